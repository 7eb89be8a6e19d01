"""Controllers whose parameters are one flat vector, for CMA-ES (stage 5).

A controller maps features (World Models: concat(z_t, h_t)) to an action inside the
environment's action box. Many parameter vectors are evaluated at once:

    ctrl = make_controller("LinearController", input_size=32 + 256, environment=env)
    ctrl.num_params                                  # (32 + 256) * 3 + 3 = 867
    actions = ctrl.act(params, inputs)               # params [P, N], inputs [P, B, D] -> [P, B, A]

`act` works on numpy arrays (returns numpy) and on TF tensors (returns tensors, usable
inside tf.function). Actions are squashed into [low, high] per dimension, each dimension
by its `SQUASHES` entry (the environment's `controller_squash`): "scaled" is
`low + (tanh(y) + 1) / 2 * (high - low)`, "clipped" is `clip(tanh(y), low, high)`. World
Models' CarRacing: tanh for steering, (tanh + 1) / 2 for gas, clip(tanh, 0, 1) for brake.

`--controller` resolves strictly by class name in this module (`controller_names()`).
"""

from __future__ import annotations

import abc
import math

import numpy as np
import tensorflow as tf


def _xp(x):
    """The array namespace (numpy or tensorflow) matching `x`."""
    return np if isinstance(x, np.ndarray) else tf


# Per action dimension: how tanh(y) in [-1, 1] becomes an action in [low, high].
SQUASHES = ("scaled", "clipped")


class Controller(abc.ABC):
    """A parametric map features [D] -> action [A] with a flat parameter vector [N].

    Attributes:
      input_size: D, the feature size (e.g. Z + H).
      action_size: A.
      action_low, action_high: float32 [A] bounds of the action box.
      action_squash: per dimension, a `SQUASHES` name (None: all "scaled").
    """

    def __init__(
        self, input_size: int, action_size: int, action_low, action_high, action_squash=None
    ):
        if input_size <= 0 or action_size <= 0:
            raise ValueError(
                f"input_size ({input_size}) and action_size ({action_size}) must be > 0."
            )
        self.input_size = int(input_size)
        self.action_size = int(action_size)
        low = np.broadcast_to(np.asarray(action_low, np.float32), (self.action_size,))
        high = np.broadcast_to(np.asarray(action_high, np.float32), (self.action_size,))
        if not np.all(high > low):
            raise ValueError(f"action_high {high} must exceed action_low {low} everywhere.")
        self.action_low = low.copy()
        self.action_high = high.copy()
        squash = tuple(action_squash or ("scaled",) * self.action_size)
        if len(squash) != self.action_size or not set(squash) <= set(SQUASHES):
            raise ValueError(
                f"action_squash {squash} must give one of {SQUASHES} per action dimension "
                f"({self.action_size})."
            )
        self.action_squash = squash
        self._clipped = np.array([s == "clipped" for s in squash])

    @property
    @abc.abstractmethod
    def num_params(self) -> int:
        """N, the length of the flat parameter vector."""

    @abc.abstractmethod
    def _pre_activation(self, params, inputs):
        """params [P, N], inputs [P, B, D] -> unsquashed outputs [P, B, A]."""

    def config(self) -> dict:
        """Constructor keyword arguments besides the sizes and bounds (for saving)."""
        return {"action_squash": list(self.action_squash)}

    def act(self, params, inputs):
        """params [P, N], inputs [P, B, D] -> actions [P, B, A] inside [low, high]."""
        xp = _xp(inputs)
        params, inputs = self._checked(params, inputs)
        t = xp.tanh(self._pre_activation(params, inputs))
        scaled = self.action_low + (t + 1.0) * ((self.action_high - self.action_low) / 2.0)
        if not self._clipped.any():
            return scaled
        if xp is np:
            clipped = np.clip(t, self.action_low, self.action_high)
        else:
            clipped = tf.clip_by_value(t, self.action_low, self.action_high)
        return xp.where(self._clipped, clipped, scaled)

    def _checked(self, params, inputs):
        """(params, inputs) as float32; numpy shapes checked ([P, N] and [P, B, D])."""
        if _xp(inputs) is np:
            params = np.asarray(params, np.float32)
            inputs = np.asarray(inputs, np.float32)
            if params.ndim != 2 or params.shape[1] != self.num_params:
                raise ValueError(
                    f"params must be [P, {self.num_params}] for {type(self).__name__}, "
                    f"got {params.shape}."
                )
            if inputs.ndim != 3 or inputs.shape[2] != self.input_size:
                raise ValueError(f"inputs must be [P, B, {self.input_size}], got {inputs.shape}.")
        else:
            params = tf.cast(params, tf.float32)
            inputs = tf.cast(inputs, tf.float32)
        return params, inputs

    def act_single(self, params, features):
        """params [N], features [D] -> action [A] (numpy; convenience for one agent)."""
        out = self.act(np.asarray(params, np.float32)[None], np.asarray(features)[None, None])
        return out[0, 0]

    def initial_params(self, scale: float = 0.0, seed: int | None = None) -> np.ndarray:
        """A flat float64 vector [N]: zeros, or N(0, scale^2) entries."""
        if not scale:
            return np.zeros(self.num_params)
        return np.random.default_rng(seed).normal(0.0, scale, self.num_params)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(input_size={self.input_size}, action_size={self.action_size}, "
            f"num_params={self.num_params})"
        )


class LinearController(Controller):
    """action = squash(W^T x + b); params = [W (D*A, row-major [D, A]), b (A)].

    World Models CarRacing: D = 32 + 256, A = 3 -> 867 parameters.
    """

    @property
    def num_params(self) -> int:
        return self.input_size * self.action_size + self.action_size

    def _pre_activation(self, params, inputs):
        xp = _xp(inputs)
        d, a = self.input_size, self.action_size
        w = xp.reshape(params[:, : d * a], (-1, d, a))  # [P, D, A]
        b = params[:, d * a :][:, None, :]  # [P, 1, A]
        return xp.einsum("pbd,pda->pba", inputs, w) + b


class HiddenLayerController(Controller):
    """action = squash(W2^T tanh(W1^T x + b1) + b2); params = [W1, b1, W2, b2] flattened.

    World Models "z + 40-unit hidden layer": D = 32, hidden_units = 40, A = 3 -> 1,443 params.
    """

    def __init__(
        self,
        input_size,
        action_size,
        action_low,
        action_high,
        hidden_units: int = 40,
        action_squash=None,
    ):
        super().__init__(input_size, action_size, action_low, action_high, action_squash)
        if hidden_units <= 0:
            raise ValueError(f"hidden_units must be > 0, got {hidden_units}.")
        self.hidden_units = int(hidden_units)

    def config(self) -> dict:
        return {**super().config(), "hidden_units": self.hidden_units}

    @property
    def num_params(self) -> int:
        d, k, a = self.input_size, self.hidden_units, self.action_size
        return d * k + k + k * a + a

    def _pre_activation(self, params, inputs):
        xp = _xp(inputs)
        d, k, a = self.input_size, self.hidden_units, self.action_size
        i = 0
        w1 = xp.reshape(params[:, i : i + d * k], (-1, d, k))  # [P, D, K]
        i += d * k
        b1 = params[:, i : i + k][:, None, :]  # [P, 1, K]
        i += k
        w2 = xp.reshape(params[:, i : i + k * a], (-1, k, a))  # [P, K, A]
        i += k * a
        b2 = params[:, i : i + a][:, None, :]  # [P, 1, A]
        hidden = xp.tanh(xp.einsum("pbd,pdk->pbk", inputs, w1) + b1)  # [P, B, K]
        return xp.einsum("pbk,pka->pba", hidden, w2) + b2


class ThresholdController(Controller):
    """World Models' DoomTakeCover controller: one output y = tanh(w^T x), no bias (D
    parameters: [z, h, c] -> 64 + 512 + 512 = 1,088), played as one of three actions on one
    axis: y < -1/3 plays `levels[0]`, y > 1/3 `levels[2]`, otherwise `levels[1]`.

    Actions are one-hot [A] (a discrete environment's action box). `levels`: three action
    indices, low to high; `make_controller` derives them from the environment's action
    meanings (MOVE_LEFT or LEFT, NOOP, MOVE_RIGHT or RIGHT) and fails on other environments.
    """

    THRESHOLD = 1.0 / 3.0

    def __init__(
        self, input_size, action_size, action_low, action_high, levels, action_squash=None
    ):
        super().__init__(input_size, action_size, action_low, action_high, action_squash)
        levels = tuple(int(i) for i in levels)
        if (
            len(levels) != 3
            or len(set(levels)) != 3
            or not all(0 <= i < action_size for i in levels)
        ):
            raise ValueError(
                f"levels must be three different action indices in [0, {action_size}), got "
                f"{levels}."
            )
        self.levels = levels

    def config(self) -> dict:
        return {**super().config(), "levels": list(self.levels)}

    @property
    def num_params(self) -> int:
        return self.input_size

    def _pre_activation(self, params, inputs):
        return _xp(inputs).einsum("pbd,pd->pb", inputs, params)[..., None]  # [P, B, 1]

    def act(self, params, inputs):
        """params [P, D], inputs [P, B, D] -> one-hot actions [P, B, A]."""
        xp = _xp(inputs)
        params, inputs = self._checked(params, inputs)
        y = xp.tanh(self._pre_activation(params, inputs))[..., 0]  # [P, B]
        low, middle, high = self.levels
        index = xp.where(y < -self.THRESHOLD, low, xp.where(y > self.THRESHOLD, high, middle))
        if xp is np:
            return np.eye(self.action_size, dtype=np.float32)[index]
        return tf.one_hot(index, self.action_size, dtype=tf.float32)


#: Action meanings a ThresholdController plays, low to high (alternatives per level).
THRESHOLD_LEVELS = (("MOVE_LEFT", "LEFT"), ("NOOP",), ("MOVE_RIGHT", "RIGHT"))


def threshold_levels(environment) -> tuple[int, int, int]:
    """The action indices of `THRESHOLD_LEVELS` in the action meanings of `environment` (an
    `Environments` member); ValueError if one is missing."""
    meanings = list(environment.spec.action_meanings or ())
    levels = []
    for names in THRESHOLD_LEVELS:
        found = [meanings.index(n) for n in names if n in meanings]
        if not found:
            raise ValueError(
                f"ThresholdController plays left / no-op / right on one axis; "
                f"{environment.name}'s actions are {tuple(meanings) or 'continuous'}, with no "
                f"{' or '.join(names)}. Use LinearController."
            )
        levels.append(found[0])
    return tuple(levels)


def controller_names() -> list[str]:
    """Valid --controller values."""
    return sorted(
        name
        for name, value in globals().items()
        if isinstance(value, type)
        and issubclass(value, Controller)
        and value is not Controller
        and not name.startswith("_")
    )


def get_controller_class(name: str) -> type[Controller]:
    """Strict lookup of a controller class by name; unknown names list the valid ones."""
    cls = None
    if name and name.isidentifier():
        cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, Controller) and cls is not Controller):
        raise LookupError(
            f"Unknown controller {name!r}. Valid --controller values: "
            f"{', '.join(controller_names())}."
        )
    return cls


def make_controller(
    name: str,
    input_size: int,
    environment=None,
    action_size=None,
    action_low=None,
    action_high=None,
    **kwargs,
) -> Controller:
    """Builds controller `name` for `environment` (an `Environments` member) or explicit bounds."""
    cls = get_controller_class(name)
    if environment is not None:
        action_size = action_size or int(math.prod(environment.action_shape))
        action_low = environment.action_low if action_low is None else action_low
        action_high = environment.action_high if action_high is None else action_high
        kwargs.setdefault("action_squash", environment.controller_squash)
        if cls is ThresholdController:
            kwargs.setdefault("levels", threshold_levels(environment))
    if action_low is None or action_high is None or action_size is None:
        raise ValueError("make_controller needs an environment or action_size/low/high.")
    return cls(input_size, action_size, action_low, action_high, **kwargs)
