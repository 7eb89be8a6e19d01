"""The environments rl755 knows, and how to make them.

Adding an environment is one `Environments` entry plus the folders
`rl755/data/<folder_name>/` and `rl755/models/<folder_name>/` (copy an existing one):

    env = Environments.CAR_RACING.make(seed=0)
    obs, info = env.reset(seed=0)          # obs: uint8 [96, 96, 3]
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

`Environments.from_name("CAR_RACING")` resolves a flag value strictly: an unknown name
raises a ValueError that lists the valid names.

Discrete environments (DOOM_TAKE_COVER, BREAKOUT) look continuous to the rest of rl755:
rollouts, policies, sequential models and controllers always handle actions as float32
vectors [A]; for a discrete environment that vector is one-hot over its
`num_discrete_actions` actions. `make()` puts the conversion at the environment boundary
(`env.step` takes the [A] vector and plays its argmax), and the enum converts explicitly:

    env_enum = Environments.DOOM_TAKE_COVER
    env_enum.to_env_action([0.0, 1.0, 0.0])        # -> 1 (MOVE_RIGHT), what the game plays
    env_enum.from_env_action(2)                     # -> float32 [0, 0, 1] (stored one-hot)
    env_enum.to_stored_action(controller_output)    # [..., A] -> one-hot of the argmax
                                                    # (continuous: clipped to the box);
                                                    # numpy or TF tensors (dream rollouts)

Frames: environments with a `frame_size` are resized there at the boundary (Doom's 240x320
screen and Atari's 210x160 to 64x64, as World Models did), so `observation_shape` is what
reset/step return and what rollouts store; `env.render()` still gives the full frame.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import os
import tempfile
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np


@dataclasses.dataclass(frozen=True)
class EnvironmentSpec:
    """Static facts about one environment.

    Attributes:
      open_ai_name: the gymnasium id passed to `gym.make`.
      folder_name: the folder under `rl755/data/` and `rl755/models/`.
      observation_shape: shape of one observation as stored in rollouts (uint8 frames).
      action_shape: shape of one action as stored in rollouts (float32).
      action_low: per-dimension lower bound of the action box (continuous envs).
      action_high: per-dimension upper bound of the action box (continuous envs).
      num_discrete_actions: for discrete environments, the number of actions; actions are
        then stored as a one-hot float vector of length `num_discrete_actions`.
      max_episode_steps: the environment's own time limit.
      make_kwargs: extra keyword arguments for `gym.make`.
      register_module: module imported before `gym.make` (registers the id), or None.
      observation_key: for dict observations, the key holding the frame, or None.
      description: one line shown in listings.
      frame_size: (height, width) that `make()` resizes frames to (bilinear, antialiased),
        or None to keep the environment's own frames.
      action_meanings: for discrete environments, the name of each action index.
    """

    open_ai_name: str
    folder_name: str
    observation_shape: tuple[int, ...]
    action_shape: tuple[int, ...]
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    num_discrete_actions: int | None = None
    max_episode_steps: int | None = None
    make_kwargs: tuple[tuple[str, Any], ...] = ()
    register_module: str | None = None
    observation_key: str | None = None
    description: str = ""
    frame_size: tuple[int, int] | None = None
    action_meanings: tuple[str, ...] | None = None


class Environments(enum.Enum):
    """Environments by flag name (`--environment=CAR_RACING`)."""

    CAR_RACING = EnvironmentSpec(
        open_ai_name="CarRacing-v3",
        folder_name="car_racing",
        observation_shape=(96, 96, 3),
        # action = [steering in [-1, 1], gas in [0, 1], brake in [0, 1]]
        action_shape=(3,),
        action_low=(-1.0, 0.0, 0.0),
        action_high=(1.0, 1.0, 1.0),
        max_episode_steps=1000,
        description="Box2D top-down racing; 96x96 RGB frames; 1000-step episodes.",
    )
    FAKE_PIXELS = EnvironmentSpec(
        open_ai_name="rl755/FakePixels-v0",
        folder_name="fake",
        observation_shape=(16, 16, 3),
        # Same action layout as CarRacing: [steering, gas, brake].
        action_shape=(3,),
        action_low=(-1.0, 0.0, 0.0),
        action_high=(1.0, 1.0, 1.0),
        max_episode_steps=24,
        register_module="rl755.testing.fake_env",
        description="Tiny deterministic pixel env for tests and smoke runs (16x16, 24 steps).",
    )
    DOOM_TAKE_COVER = EnvironmentSpec(
        open_ai_name="VizdoomTakeCover-v1",
        folder_name="doom_take_cover",
        # The (240, 320, 3) "screen" of the observation dict, resized to 64x64 at the boundary.
        observation_shape=(64, 64, 3),
        # One-hot over (NOOP, MOVE_RIGHT, MOVE_LEFT); reward +1 per step survived.
        action_shape=(3,),
        action_low=(0.0, 0.0, 0.0),
        action_high=(1.0, 1.0, 1.0),
        num_discrete_actions=3,
        # World Models caps an episode at 2100 steps (60 s of game time at 35 fps).
        max_episode_steps=2100,
        make_kwargs=(
            ("max_episode_steps", 2100),
            # ViZDoom writes its ini file into the working directory unless told otherwise.
            ("doom_config_path", os.path.join(tempfile.gettempdir(), "rl755_vizdoom.ini")),
        ),
        register_module="vizdoom.gymnasium_wrapper",
        observation_key="screen",
        frame_size=(64, 64),
        action_meanings=("NOOP", "MOVE_RIGHT", "MOVE_LEFT"),
        description="ViZDoom TakeCover: dodge fireballs; 64x64 frames; 3 discrete actions; "
        "reward = steps survived (max 2100).",
    )
    BREAKOUT = EnvironmentSpec(
        open_ai_name="ALE/Breakout-v5",
        folder_name="breakout",
        # The (210, 160, 3) Atari screen, resized to 64x64 at the boundary.
        observation_shape=(64, 64, 3),
        action_shape=(4,),
        action_low=(0.0, 0.0, 0.0, 0.0),
        action_high=(1.0, 1.0, 1.0, 1.0),
        num_discrete_actions=4,
        # ALE v5: frameskip 4, sticky actions 0.25, 108,000 frames = 27,000 steps at most.
        max_episode_steps=27000,
        register_module="ale_py",
        frame_size=(64, 64),
        action_meanings=("NOOP", "FIRE", "RIGHT", "LEFT"),
        description="Atari Breakout (ale-py, ROM included); 64x64 frames; 4 discrete actions.",
    )

    # ---- convenient accessors -------------------------------------------------------------
    @property
    def spec(self) -> EnvironmentSpec:
        return self.value

    @property
    def open_ai_name(self) -> str:
        return self.value.open_ai_name

    @property
    def folder_name(self) -> str:
        return self.value.folder_name

    @property
    def observation_shape(self) -> tuple[int, ...]:
        return self.value.observation_shape

    @property
    def action_shape(self) -> tuple[int, ...]:
        return self.value.action_shape

    @property
    def action_low(self) -> np.ndarray | None:
        low = self.value.action_low
        return None if low is None else np.asarray(low, np.float32)

    @property
    def action_high(self) -> np.ndarray | None:
        high = self.value.action_high
        return None if high is None else np.asarray(high, np.float32)

    @property
    def is_discrete(self) -> bool:
        return self.value.num_discrete_actions is not None

    @property
    def max_episode_steps(self) -> int | None:
        return self.value.max_episode_steps

    @property
    def num_discrete_actions(self) -> int | None:
        return self.value.num_discrete_actions

    @property
    def action_size(self) -> int:
        """A, the length of a stored action vector."""
        return int(np.prod(self.value.action_shape))

    # ---- actions: stored/model-side float vectors [A] <-> what the environment plays ----------
    def to_env_action(self, stored_action) -> int | np.ndarray:
        """A stored action float [A] -> the raw environment's action.

        Discrete: the index of the largest entry (an int); continuous: float32 [A] as is.
        """
        a = np.asarray(stored_action, np.float32)
        if a.shape != tuple(self.value.action_shape):
            raise ValueError(
                f"{self.name} actions have shape {tuple(self.value.action_shape)}, got {a.shape}."
            )
        if self.is_discrete:
            return int(np.argmax(a))
        return a

    def from_env_action(self, env_action) -> np.ndarray:
        """The raw environment's action -> the stored action, float32 [A] (one-hot if discrete)."""
        if self.is_discrete:
            n = self.value.num_discrete_actions
            index = int(env_action)
            if not 0 <= index < n:
                raise ValueError(f"{self.name} has actions 0..{n - 1}, got {env_action!r}.")
            return np.eye(n, dtype=np.float32)[index]
        return np.asarray(env_action, np.float32).reshape(self.value.action_shape)

    def to_stored_action(self, output):
        """A policy's or controller's output [..., A] -> the stored action [..., A].

        Discrete: one-hot of the argmax (what the environment will play); continuous:
        clipped to [action_low, action_high]. Accepts numpy arrays (returns float32 numpy)
        and TF tensors (returns a float32 tensor), so dream rollouts feed the sequential
        model exactly the actions it was trained on.
        """
        import tensorflow as tf  # local: environments must not pull TF into env-only workers

        if isinstance(output, tf.Tensor | tf.Variable):
            x = tf.cast(output, tf.float32)
            if self.is_discrete:
                n = self.value.num_discrete_actions
                return tf.one_hot(tf.argmax(x, axis=-1), n, dtype=tf.float32)
            return tf.clip_by_value(x, self.action_low, self.action_high)
        x = np.asarray(output, np.float32)
        if self.is_discrete:
            n = self.value.num_discrete_actions
            return np.eye(n, dtype=np.float32)[np.argmax(x, axis=-1)]
        return np.clip(x, self.action_low, self.action_high).astype(np.float32)

    @classmethod
    def names(cls) -> list[str]:
        return [e.name for e in cls]

    @classmethod
    def from_name(cls, name: str | Environments) -> Environments:
        """Strict lookup by enum name (case-insensitive)."""
        if isinstance(name, Environments):
            return name
        key = str(name).strip().upper()
        if key in cls.__members__:
            return cls[key]
        raise ValueError(
            f"Unknown environment {name!r}. Valid --environment values: "
            f"{', '.join(cls.names())}. To add one, see README 'Adding an environment'."
        )

    def make(self, seed: int | None = None, render_mode: str | None = None, **kwargs) -> gym.Env:
        """Creates the gymnasium environment (observations are frames, uint8)."""
        spec = self.value
        if spec.register_module:
            importlib.import_module(spec.register_module)
        make_kwargs = dict(spec.make_kwargs)
        make_kwargs.update(kwargs)
        if render_mode is not None:
            make_kwargs["render_mode"] = render_mode
        env = gym.make(spec.open_ai_name, **make_kwargs)
        if spec.observation_key is not None or spec.frame_size is not None:
            env = FrameObservation(env, spec.observation_key, spec.frame_size)
        if spec.num_discrete_actions is not None:
            env = OneHotActions(env)
        if seed is not None:
            env.action_space.seed(seed)
        return env

    def make_fn(self, **kwargs) -> Callable[[], gym.Env]:
        """A picklable no-argument constructor (for Ray workers)."""
        return _EnvFactory(self.name, kwargs)

    def folder_module(self, package: str) -> str:
        """`rl755.<package>.<folder_name>`, e.g. folder_module("models") -> rl755.models.car_racing."""
        return f"rl755.{package}.{self.folder_name}"


class OneHotBox(gym.spaces.Box):
    """Box(0, 1, (n,)) whose `sample()` is a one-hot vector (a uniformly random action)."""

    def __init__(self, n: int, seed: int | None = None):
        super().__init__(0.0, 1.0, (int(n),), np.float32, seed=seed)

    def sample(self, mask=None, probability=None) -> np.ndarray:
        n = self.shape[0]
        return np.eye(n, dtype=np.float32)[int(self.np_random.integers(n))]


class OneHotActions(gym.ActionWrapper):
    """Lets a Discrete(n) environment take float32 [n] actions: it plays their argmax.

    `action_space` becomes a `OneHotBox(n)`, so everything written for [A] float actions
    (policies, controllers, rollout code) runs unchanged.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            raise TypeError(f"OneHotActions needs a Discrete action space, got {env.action_space}.")
        self._start = int(env.action_space.start)
        self.action_space = OneHotBox(int(env.action_space.n))

    def action(self, action) -> int:
        if np.ndim(action) == 0:  # already an index
            return int(action)
        return self._start + int(np.argmax(np.asarray(action, np.float32)))


class FrameObservation(gym.ObservationWrapper):
    """Takes the frame out of a dict observation (`key`) and/or resizes it to `size` (H, W).

    Resizing uses PIL's antialiased bilinear filter; frames stay uint8 [H, W, C].
    """

    def __init__(self, env: gym.Env, key: str | None = None, size: tuple[int, int] | None = None):
        super().__init__(env)
        self._key = key
        self._size = None if size is None else (int(size[0]), int(size[1]))
        space = env.observation_space[key] if key is not None else env.observation_space
        shape = tuple(space.shape)
        if self._size is not None:
            shape = (*self._size, *shape[2:])
        self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)

    def observation(self, observation) -> np.ndarray:
        frame = observation[self._key] if self._key is not None else observation
        if self._size is None or frame.shape[:2] == self._size:
            return np.asarray(frame, np.uint8)
        from PIL import Image

        h, w = self._size
        image = Image.fromarray(np.asarray(frame, np.uint8).squeeze())
        out = np.asarray(image.resize((w, h), Image.Resampling.BILINEAR), np.uint8)
        return out.reshape(self.observation_space.shape)


class _EnvFactory:
    def __init__(self, env_name: str, kwargs: dict):
        self.env_name = env_name
        self.kwargs = kwargs

    def __call__(self) -> gym.Env:
        return Environments[self.env_name].make(**self.kwargs)
