"""Environment-independent random policies, for continuous and for discrete actions.

Per-environment settings of these (and the few policies that really differ per environment)
are in `rl755.policies.registry`; `--policy=<name>` resolves through it.

Continuous actions (a Box action space):

    policy = UniformRandomPolicy()
    policy.initialize(env, max_steps=1000, seed=3)
    action = policy.sample_action(obs, step, rollout)   # float32 [A], uniform in the action box

    policy = SmoothNoisePolicy(center=[0, 0.5, 0], scale=[1, 0.5, 0.2], period=[40, 60, 60])
    # action[t, a] = clip(center[a] + scale[a] * perlin_a(t / period[a]), low[a], high[a])

`SmoothNoisePolicy` is temporally smooth (1-D Perlin gradient noise, as in the original
project's Hastings policy): consecutive actions are close, so the agent commits to a
direction for tens of steps instead of jittering in place.

Discrete actions: discrete environments take one-hot float32 [A] actions (see
rl755.environments); these policies return one-hot vectors, which is also what rollouts store.

    policy = DiscreteRandomPolicy()
    policy.initialize(env, max_steps=2100, seed=3)
    action = policy.sample_action(obs, step, rollout)   # float32 [A], one-hot, uniform

    policy = RepeatedDiscreteRandomPolicy(min_repeat=1, max_repeat=10)
    # a uniformly random action held for a uniformly random 1..10 steps, then another

Holding an action matters in games like Doom TakeCover: a new random action every step
(about 29 ms of game time) jitters in place, while held actions move the agent across the
room, so the frames show more of the situations a controller will meet.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from rl755.policies.base import Policy


def _box(env: gym.Env) -> gym.spaces.Box:
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(
            f"This policy needs a continuous (Box) action space, got {space}. Use a policy "
            "written for discrete actions."
        )
    return space


class UniformRandomPolicy(Policy):
    """Independent uniform samples from the environment's action box at every step."""

    def initialize(self, env: gym.Env, max_steps: int, **kwargs) -> None:
        box = _box(env)
        self._low = np.asarray(box.low, np.float32)
        self._high = np.asarray(box.high, np.float32)
        self._rng = np.random.default_rng(kwargs.get("seed"))

    def sample_action(self, obs, step, rollout, **kwargs) -> np.ndarray:
        return self._rng.uniform(self._low, self._high).astype(np.float32)  # [A]


def perlin_noise_1d(
    rng: np.random.Generator, num_steps: int, period: float, octaves: int = 2
) -> np.ndarray:
    """Fractal 1-D Perlin gradient noise at t = 0..num_steps-1: float32 [num_steps], ~[-1, 1].

    `period` is the spacing (in steps) of the coarsest lattice; each further octave halves
    the period and the amplitude. Values are scaled so the coarse octave spans about [-1, 1].
    """
    t = np.arange(num_steps, dtype=np.float64)
    total = np.zeros(num_steps)
    amplitude, norm = 1.0, 0.0
    for o in range(octaves):
        p = max(period / (2**o), 1.0)
        x = t / p + rng.uniform(0.0, 1.0)
        k = np.floor(x).astype(np.int64)
        f = x - k
        grads = rng.uniform(-1.0, 1.0, k.max() + 2)
        fade = f * f * f * (f * (f * 6.0 - 15.0) + 10.0)
        n0 = grads[k] * f
        n1 = grads[k + 1] * (f - 1.0)
        total += amplitude * ((1.0 - fade) * n0 + fade * n1)
        norm += amplitude
        amplitude *= 0.5
    # A single octave lies in [-0.5, 0.5]; scale to about [-1, 1].
    return (2.0 * total / norm).astype(np.float32)


class SmoothNoisePolicy(Policy):
    """Per-dimension Perlin noise around a center, clipped to the action box.

    Args (each a scalar or one value per action dimension):
      center: the mean action.
      scale: noise amplitude (the noise itself spans about [-1, 1]).
      period: steps between the coarse noise's lattice points (larger: smoother).
      octaves: Perlin octaves (more: more small wiggles on top).
    """

    def __init__(
        self,
        center: float | Sequence[float] = 0.0,
        scale: float | Sequence[float] = 1.0,
        period: float | Sequence[float] = 50.0,
        octaves: int = 2,
    ):
        self.center = center
        self.scale = scale
        self.period = period
        self.octaves = octaves

    def initialize(self, env: gym.Env, max_steps: int, **kwargs) -> None:
        box = _box(env)
        low = np.asarray(box.low, np.float32)
        high = np.asarray(box.high, np.float32)
        a = low.shape[0]
        center = np.broadcast_to(np.asarray(self.center, np.float32), (a,))
        scale = np.broadcast_to(np.asarray(self.scale, np.float32), (a,))
        period = np.broadcast_to(np.asarray(self.period, np.float32), (a,))
        rng = np.random.default_rng(kwargs.get("seed"))
        noise = np.stack(
            [perlin_noise_1d(rng, max_steps, float(period[i]), self.octaves) for i in range(a)],
            axis=1,
        )  # [max_steps, A]
        self._actions = np.clip(center + scale * noise, low, high).astype(np.float32)

    def sample_action(self, obs, step, rollout, **kwargs) -> np.ndarray:
        return self._actions[step]  # [A]


# ---- discrete actions (one-hot float32 [A]) ------------------------------------------------------


def _num_actions(env: gym.Env) -> int:
    space = env.action_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise TypeError(
            f"This policy needs the one-hot action space that Environments.make() gives discrete "
            f"environments (Box(0, 1, (A,))), got {space}."
        )
    return int(space.shape[0])


class DiscreteRandomPolicy(Policy):
    """A uniformly random action at every step, as a one-hot float32 [A]."""

    def initialize(self, env: gym.Env, max_steps: int, **kwargs) -> None:
        self._eye = np.eye(_num_actions(env), dtype=np.float32)
        self._rng = np.random.default_rng(kwargs.get("seed"))

    def sample_action(self, obs, step, rollout, **kwargs) -> np.ndarray:
        return self._eye[self._rng.integers(len(self._eye))]  # [A]


class RepeatedDiscreteRandomPolicy(Policy):
    """A uniformly random action held for a uniformly random `min_repeat..max_repeat` steps.

    Args:
      min_repeat, max_repeat: inclusive range of the number of steps an action is held
        (min_repeat = max_repeat = k holds every action exactly k steps).
    """

    def __init__(self, min_repeat: int = 1, max_repeat: int = 10):
        if not 1 <= int(min_repeat) <= int(max_repeat):
            raise ValueError(
                f"Need 1 <= min_repeat <= max_repeat, got min_repeat={min_repeat}, "
                f"max_repeat={max_repeat}."
            )
        self.min_repeat = int(min_repeat)
        self.max_repeat = int(max_repeat)

    def initialize(self, env: gym.Env, max_steps: int, **kwargs) -> None:
        self._eye = np.eye(_num_actions(env), dtype=np.float32)
        self._rng = np.random.default_rng(kwargs.get("seed"))
        self._current = 0
        self._left = 0

    def sample_action(self, obs, step, rollout, **kwargs) -> np.ndarray:
        if self._left <= 0:
            self._current = int(self._rng.integers(len(self._eye)))
            self._left = int(self._rng.integers(self.min_repeat, self.max_repeat + 1))
        self._left -= 1
        return self._eye[self._current]  # [A]
