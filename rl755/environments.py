"""The environments rl755 knows, and how to make them.

Adding an environment is one `Environments` entry plus the folders
`rl755/data/<folder_name>/` and `rl755/models/<folder_name>/` (copy an existing one):

    env = Environments.CAR_RACING.make(seed=0)
    obs, info = env.reset(seed=0)          # obs: uint8 [96, 96, 3]
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

`Environments.from_name("CAR_RACING")` resolves a flag value strictly: an unknown name
raises a ValueError that lists the valid names.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
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
        if spec.observation_key is not None:
            env = gym.wrappers.TransformObservation(
                env, lambda o: o[spec.observation_key], env.observation_space[spec.observation_key]
            )
        if seed is not None:
            env.action_space.seed(seed)
        return env

    def make_fn(self, **kwargs) -> Callable[[], gym.Env]:
        """A picklable no-argument constructor (for Ray workers)."""
        return _EnvFactory(self.name, kwargs)

    def folder_module(self, package: str) -> str:
        """`rl755.<package>.<folder_name>`, e.g. folder_module("models") -> rl755.models.car_racing."""
        return f"rl755.{package}.{self.folder_name}"


class _EnvFactory:
    def __init__(self, env_name: str, kwargs: dict):
        self.env_name = env_name
        self.kwargs = kwargs

    def __call__(self) -> gym.Env:
        return Environments[self.env_name].make(**self.kwargs)
