"""`Environments`: the registry of environments by flag name, filled from table.ENVIRONMENTS.

It reads like an enum: `Environments.CAR_RACING`, `Environments["CAR_RACING"]`,
`for env in Environments`, `Environments.from_name("car_racing")` (strict: an unknown name
raises a ValueError listing the valid ones). Members are `Environment` objects; they pickle
by name plus entry, so Ray workers get the same member, even for an environment registered
at run time with `Environments.register(EnvironmentSpec(...))` (notebooks, tests, plug-ins).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator

import gymnasium as gym
import numpy as np

from rl755.environments.spec import EnvironmentSpec
from rl755.environments.table import ENVIRONMENTS
from rl755.environments.wrappers import FrameObservation, OneHotActions, make_from_constructor


def _from_spec(field: str, doc: str | None = None) -> property:
    """A read-only property returning `spec.<field>` (the spec itself for "")."""
    return property(lambda self: getattr(self.spec, field) if field else self.spec, doc=doc)


class Environment:
    """One registered environment: its `spec` (an `EnvironmentSpec`) and what it can do."""

    __slots__ = ("name", "spec")

    def __init__(self, spec: EnvironmentSpec):
        self.name = spec.name
        self.spec = spec

    def __repr__(self) -> str:
        return f"Environments.{self.name}"

    def __reduce__(self):
        return _member, (self.name, self.spec)

    # ---- facts ---------------------------------------------------------------------------------
    value = _from_spec("", "The spec (enum-style alias of `spec`).")
    presets = _from_spec("presets", "Model sizes (ModelPresets) for rl755.models.catalogue.")
    open_ai_name = _from_spec("open_ai_name")
    folder_name = _from_spec("folder_name")
    observation_shape = _from_spec("observation_shape")
    action_shape = _from_spec("action_shape")
    max_episode_steps = _from_spec("max_episode_steps")
    num_discrete_actions = _from_spec("num_discrete_actions")
    controller_squash = _from_spec(
        "controller_squash", "Per action dimension, how controllers squash into the box."
    )

    @property
    def action_low(self) -> np.ndarray | None:
        low = self.spec.action_low
        return None if low is None else np.asarray(low, np.float32)

    @property
    def action_high(self) -> np.ndarray | None:
        high = self.spec.action_high
        return None if high is None else np.asarray(high, np.float32)

    @property
    def is_discrete(self) -> bool:
        return self.spec.num_discrete_actions is not None

    @property
    def action_size(self) -> int:
        """A, the length of a stored action vector."""
        return int(np.prod(self.spec.action_shape))

    # ---- actions: stored/model-side float vectors [A] <-> what the environment plays ----------
    def to_env_action(self, stored_action) -> int | np.ndarray:
        """A stored action float [A] -> the raw environment's action.

        Discrete: the index of the largest entry (an int); continuous: float32 [A] as is.
        """
        a = np.asarray(stored_action, np.float32)
        if a.shape != self.action_shape:
            raise ValueError(f"{self.name} actions have shape {self.action_shape}, got {a.shape}.")
        if self.is_discrete:
            return int(np.argmax(a))
        return a

    def from_env_action(self, env_action) -> np.ndarray:
        """The raw environment's action -> the stored action, float32 [A] (one-hot if discrete)."""
        if self.is_discrete:
            n = self.num_discrete_actions
            index = int(env_action)
            if not 0 <= index < n:
                raise ValueError(f"{self.name} has actions 0..{n - 1}, got {env_action!r}.")
            return np.eye(n, dtype=np.float32)[index]
        return np.asarray(env_action, np.float32).reshape(self.action_shape)

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
                return tf.one_hot(tf.argmax(x, axis=-1), self.num_discrete_actions)
            return tf.clip_by_value(x, self.action_low, self.action_high)
        x = np.asarray(output, np.float32)
        if self.is_discrete:
            return np.eye(self.num_discrete_actions, dtype=np.float32)[np.argmax(x, axis=-1)]
        return np.clip(x, self.action_low, self.action_high).astype(np.float32)

    # ---- making it -----------------------------------------------------------------------------
    def make(self, seed: int | None = None, render_mode: str | None = None, **kwargs) -> gym.Env:
        """Creates the gymnasium environment (observations are frames, uint8).

        `seed` seeds the action space; episodes are seeded by `env.reset(seed=...)`.
        `kwargs` override the entry's `make_kwargs`."""
        spec = self.spec
        if spec.register_module:
            importlib.import_module(spec.register_module)
        make_kwargs = dict(spec.make_kwargs)
        make_kwargs.update(kwargs)
        if spec.constructor is not None:
            env = make_from_constructor(
                spec.constructor, make_kwargs, render_mode, spec.max_episode_steps
            )
        else:
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
        return _EnvFactory(self, kwargs)

    def folder_module(self, package: str) -> str:
        """`rl755.<package>.<folder_name>`, e.g. folder_module("models") -> rl755.models.car_racing."""
        return f"rl755.{package}.{self.folder_name}"


class _EnvironmentsMeta(type):
    """Enum-like access to the registered environments."""

    _members: dict[str, Environment]

    def __getattr__(cls, name: str) -> Environment:
        members = type.__getattribute__(cls, "_members")
        if name in members:
            return members[name]
        raise AttributeError(f"Environments has no {name!r}; valid: {', '.join(members)}.")

    def __getitem__(cls, name: str) -> Environment:
        return cls._members[name]

    def __iter__(cls) -> Iterator[Environment]:
        return iter(list(cls._members.values()))

    def __len__(cls) -> int:
        return len(cls._members)

    def __contains__(cls, item) -> bool:
        return item in cls._members.values() or item in cls._members

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Environment)

    @property
    def __members__(cls) -> dict[str, Environment]:
        return dict(cls._members)


class Environments(metaclass=_EnvironmentsMeta):
    """Environments by flag name (`--environment=CAR_RACING`); see the module docstring."""

    _members: dict[str, Environment] = {}

    @classmethod
    def names(cls) -> list[str]:
        return list(cls._members)

    @classmethod
    def from_name(cls, name: str | Environment) -> Environment:
        """Strict lookup by name (case-insensitive)."""
        if isinstance(name, Environment):
            return name
        key = str(name).strip().upper()
        if key in cls._members:
            return cls._members[key]
        raise ValueError(
            f"Unknown environment {name!r}. Valid --environment values: "
            f"{', '.join(cls.names())}. To add one, see docs/guides/new-environment.md."
        )

    @classmethod
    def register(cls, spec: EnvironmentSpec) -> Environment:
        """Adds an environment (or returns the member already registered with this spec)."""
        current = cls._members.get(spec.name)
        if current is not None:
            if current.spec != spec:
                raise ValueError(f"Environment {spec.name} is already registered differently.")
            return current
        member = Environment(spec)
        cls._members[spec.name] = member
        return member

    @classmethod
    def unregister(cls, name: str) -> None:
        """Removes a run-time registered environment (tests); table entries cannot go."""
        if any(spec.name == name for spec in ENVIRONMENTS):
            raise ValueError(f"{name} is in rl755/environments/table.py; it cannot be removed.")
        cls._members.pop(name, None)


def _member(name: str, spec: EnvironmentSpec) -> Environment:
    """Unpickling: the registered member (registering the pickled entry if it is new here)."""
    current = Environments._members.get(name)
    return current if current is not None else Environments.register(spec)


class _EnvFactory:
    def __init__(self, environment: Environment, kwargs: dict):
        self.environment = environment
        self.kwargs = kwargs

    def __call__(self) -> gym.Env:
        return self.environment.make(**self.kwargs)


for _spec in ENVIRONMENTS:
    Environments.register(_spec)
