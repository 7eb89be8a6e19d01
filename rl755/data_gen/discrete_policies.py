"""Random policies for discrete environments; `rl755/models/<env>/policies.py` picks defaults.

Discrete environments take one-hot float32 [A] actions (see rl755.environments): these
policies return one-hot vectors, which is also what rollouts store.

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

import gymnasium as gym
import numpy as np

from rl755.data_gen.gym_rollouts import Policy


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
