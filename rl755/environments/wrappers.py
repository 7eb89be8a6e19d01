"""Wrappers `Environments.make()` puts around an environment.

    OldGymApi         an old gym-API object -> a gymnasium.Env (reset/step/seed/spaces)
    FrameObservation  dict observation -> its frame; frames resized to `frame_size`
    OneHotActions     Discrete(n) -> float32 [n] actions (it plays their argmax)

An environment class outside gymnasium's registry (`EnvironmentSpec.constructor`) is built by
`make_from_constructor`; a class that is not a `gymnasium.Env` gets `OldGymApi`:

    old-style                               gymnasium, after OldGymApi
    env.seed(s); obs = env.reset()          obs, info = env.reset(seed=s)
    obs, reward, done, info = env.step(a)   obs, reward, terminated, truncated, info
    gym.spaces.Box / Discrete (any object   gymnasium.spaces.Box / Discrete
      with low/high/shape/dtype or n),
      a plain shape (observations: uint8
      frames) or an int n (actions)

`done` with `info["TimeLimit.truncated"]` becomes `truncated`, otherwise `terminated`. The
old `gym` package is not needed: spaces are read by their attributes (namedtuples too).
`reset(seed=s)` seeds the object the way its entry says: a new object built with the seed
(`seed_argument`, a constructor argument), an attribute set (`seed_attribute`), or its own
`seed(s)`; an object that none of these can seed fails when made, unless its entry declares
`reproducible_reset=False`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rl755.common import lookup
from rl755.common.errors import BadInput


# ---- old gym API -------------------------------------------------------------------------------
def to_gymnasium_space(space, what: str) -> gym.spaces.Space:
    """An old-style space, a plain shape or an int -> the gymnasium space.

    Read by attributes, in this order, so namedtuples read as what their fields say (a
    namedtuple `Discrete(n=17)` is also a tuple of ints): a gymnasium space as is; an int n
    -> Discrete(n); an object with `n` (and optionally `start`) -> Discrete; one with `low`,
    `high` and `shape` (`dtype`: float32 if absent) -> Box; a `.spaces` mapping -> Dict, per
    key; a plain shape tuple -> uint8 frames [0, 255] for observations, an unbounded float32
    Box for actions. Anything else: TypeError naming `what`.
    """
    if isinstance(space, gym.spaces.Space):
        return space
    if isinstance(space, int | np.integer):
        return gym.spaces.Discrete(int(space))
    if hasattr(space, "n"):
        return gym.spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if hasattr(space, "low") and hasattr(space, "high") and hasattr(space, "shape"):
        dtype = np.dtype(getattr(space, "dtype", None) or np.float32)
        shape = tuple(int(d) for d in space.shape)
        low = np.broadcast_to(np.asarray(space.low, dtype), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype), shape)
        return gym.spaces.Box(low, high, shape, dtype)
    if isinstance(getattr(space, "spaces", None), dict):
        return gym.spaces.Dict({k: to_gymnasium_space(v, what) for k, v in space.spaces.items()})
    if isinstance(space, tuple | list) and all(isinstance(d, int | np.integer) for d in space):
        if what == "observation_space":
            return gym.spaces.Box(0, 255, tuple(int(d) for d in space), np.uint8)
        return gym.spaces.Box(-np.inf, np.inf, tuple(int(d) for d in space), np.float32)
    raise TypeError(
        f"Cannot read {what} {space!r}: expected a gym(nasium) space, an object with "
        "n or low/high/shape(/dtype), a shape tuple or an int."
    )


class OldGymApi(gym.Env):
    """Adapts an object with the old gym API to gymnasium; see the module docstring.

    `reset(seed=s)` seeds the object as its entry says, then this wrapper's `np_random`:
    `rebuild(s)` makes a new object with the seed (a constructor that takes it), or
    `seed_attribute` is set to s, or else the object's `seed(s)` is called (if it has one).
    `reset()` results that already are (obs, info) and 5-tuple steps pass through, so classes
    halfway between the APIs work too.
    """

    def __init__(
        self,
        env,
        render_mode: str | None = None,
        rebuild: Callable[[int], object] | None = None,
        seed_attribute: str | None = None,
    ):
        self.env = env
        self.render_mode = render_mode
        self._rebuild = rebuild
        self._seed_attribute = seed_attribute
        for what in ("observation_space", "action_space"):
            if not hasattr(env, what):
                raise TypeError(f"{type(env).__name__} has no {what} (needed to adapt it).")
            setattr(self, what, to_gymnasium_space(getattr(env, what), what))
        self.metadata = dict(getattr(env, "metadata", None) or {})

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            if self._rebuild is not None:
                self.close()
                self.env = self._rebuild(int(seed))
            elif self._seed_attribute is not None:
                setattr(self.env, self._seed_attribute, int(seed))
            elif callable(getattr(self.env, "seed", None)):
                self.env.seed(int(seed))
        out = self.env.reset() if options is None else self.env.reset(options=options)
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
            return out
        return out, {}

    def step(self, action):
        out = self.env.step(action)
        if len(out) == 5:
            return out
        obs, reward, done, info = out
        info = dict(info or {})
        truncated = bool(done and info.pop("TimeLimit.truncated", False))
        return obs, float(reward), bool(done) and not truncated, truncated, info

    def render(self):
        if self.render_mode is None:
            return self.env.render()
        return self.env.render(mode=self.render_mode)

    def close(self):
        if callable(getattr(self.env, "close", None)):
            self.env.close()


def _takes(cls, name: str) -> bool:
    """Whether calling `cls` accepts the keyword argument `name`."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: assume it does
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


_SEED_WORDS = ("seed", "random_seed", "rng_seed")


def make_from_constructor(
    constructor: str,
    kwargs: dict,
    render_mode: str | None = None,
    max_episode_steps: int | None = None,
    seed_argument: str | None = None,
    seed_attribute: str | None = None,
    reproducible: bool = True,
    name: str = "This environment",
) -> gym.Env:
    """Imports and calls "package.module:Class"; adapts it (OldGymApi) unless it is a
    gymnasium.Env that needs no seeding help; `max_episode_steps` becomes a TimeLimit.

    `render_mode` goes to the class if its constructor takes it, else to the adapter.
    `seed_argument` (a constructor keyword) or `seed_attribute` say how `reset(seed=s)` seeds
    an object (see OldGymApi). Raises BadInput, naming the entry `name`, when the constructor
    does not take `seed_argument`, or when nothing could seed the object (no seed() method,
    neither field given) and the entry does not declare `reproducible_reset=False`.
    """
    cls = lookup.import_object(constructor, what="environment constructor")
    kwargs = dict(kwargs)
    if render_mode is not None and _takes(cls, "render_mode"):
        kwargs["render_mode"] = render_mode
    if seed_argument is not None and not _takes(cls, seed_argument):
        raise BadInput(
            f"{name}: seed_argument={seed_argument!r}, but {constructor} takes no argument "
            f"{seed_argument!r}. Name the constructor's seed argument in the entry, or use "
            "seed_attribute= or reproducible_reset=False."
        )
    env = cls(**kwargs)
    helped = seed_argument is not None or seed_attribute is not None
    if not isinstance(env, gym.Env) or helped:
        if not helped and reproducible and not callable(getattr(env, "seed", None)):
            takes = [w for w in _SEED_WORDS if w in _parameters(cls)]
            hint = f'seed_argument="{takes[0]}"' if takes else 'seed_argument="<its argument>"'
            if callable(getattr(env, "close", None)):
                env.close()
            raise BadInput(
                f"{name}: {constructor} has no seed() method and the entry says neither "
                "seed_argument nor seed_attribute, so reset(seed=...) would be ignored. "
                f"Declare how it is seeded in its EnvironmentSpec: {hint} (a constructor "
                'argument), seed_attribute="<attribute>", or reproducible_reset=False if it '
                "cannot be seeded."
            )
        rebuild = None
        if seed_argument is not None:
            rebuild = functools.partial(_build_seeded, cls, kwargs, seed_argument)
        env = OldGymApi(env, render_mode, rebuild=rebuild, seed_attribute=seed_attribute)
    if max_episode_steps:
        env = gym.wrappers.TimeLimit(env, int(max_episode_steps))
    return env


def _parameters(cls) -> set[str]:
    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


def _build_seeded(cls, kwargs: dict, seed_argument: str, seed: int):
    return cls(**{**kwargs, seed_argument: seed})


# ---- frames and actions ------------------------------------------------------------------------
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
            raise TypeError(
                f"OneHotActions plays one-hot actions on a Discrete action space, but this "
                f"environment's action_space reads as {env.action_space}. An entry with "
                "num_discrete_actions needs an environment whose action space is Discrete(n) (or "
                "an object with `n`); a box of actions takes action_low/action_high instead."
            )
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
