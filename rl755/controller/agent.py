"""Encoder + sequential model + controller, batched over several environments.

World Models' agent: at step t the encoder turns the frame into z_t, the controller acts on
[z_t, h_t] (or [z_t, h_t, c_t] with `cell_state=True`: the LSTM's memory cell too, as the
paper's Doom agent), and the sequential model advances h_{t+1}, state = step(z_t, a_t, state).
`WorldModelAgent` runs these networks once per step for E environments together, each
environment with its own controller parameters (a different CMA-ES member or trial):

    spec = AgentSpec("CAR_RACING", "LinearController", encoder_fn=..., sequential_model_fn=...)
    agent = spec.build()
    agent.reset(E)
    actions = agent.act(frames, params)      # uint8 [E, H, W, C], [E, N] -> float32 [E, A]

`run_episodes(envs, agent, params, seeds, max_steps)` is the vectorized evaluation loop:
one encoder call on [E, H, W, C], one `step` on [E, ...], one controller call per step.

`AgentSpec` is picklable (constructors, not models), so Ray workers build their own
networks once and keep them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from rl755.common.errors import BadInput
from rl755.controller import networks as controllers_lib
from rl755.environments import Environments


def check_sizes(environment: Environments, encoder=None, sequential_model=None) -> None:
    """Fails fast, naming both sizes, when encoder/sequential model/environment don't fit."""
    action_size = int(math.prod(environment.action_shape))
    if sequential_model is not None:
        if encoder is None:
            raise BadInput(
                "A sequential model needs an encoder (its inputs are representations); "
                "pass --encoder, or --sequential_model=none for a controller on pixels."
            )
        if encoder.representation_size != sequential_model.representation_size:
            raise BadInput(
                f"Encoder representation size {encoder.representation_size} does not match the "
                f"sequential model's representation size {sequential_model.representation_size}: "
                "use the sequential model trained on this encoder's encoded rollouts."
            )
        if sequential_model.action_size != action_size:
            raise BadInput(
                f"Sequential model action size {sequential_model.action_size} does not match "
                f"{environment.name}'s action size {action_size}."
            )


def feature_size(
    environment: Environments, encoder=None, sequential_model=None, cell_state: bool = False
) -> int:
    """D, the controller's input size: Z (+ H (+ C)), or the flattened frame without an encoder."""
    if encoder is None:
        return int(math.prod(environment.observation_shape))
    size = encoder.representation_size
    if sequential_model is not None:
        size += sequential_model.hidden_size
        if cell_state:
            if not sequential_model.cell_size:
                raise ValueError(
                    "--cell_state needs a sequential model with a memory cell (an LSTM or "
                    f"MDN-RNN); {getattr(sequential_model, 'name', 'this model')} has none."
                )
            size += sequential_model.cell_size
    return int(size)


def controller_features(z, h=None, state=None, sequential_model=None, cell_state=False):
    """The controller's input [B, D]: z [B, Z], then h [B, H] and the cell c [B, C] of `state`
    (the state h came with) when a sequential model is used."""
    if sequential_model is None:
        return z
    parts = [z, h]
    if cell_state:
        parts.append(tf.cast(sequential_model.cell_state(state), z.dtype))
    return tf.concat(parts, axis=-1)


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """How to build an agent (picklable: constructors and names, no models).

    Attributes:
      environment: `Environments` member name, e.g. "CAR_RACING".
      controller: controller class name in rl755.controller.networks.
      controller_kwargs: extra constructor arguments, e.g. (("hidden_units", 40),).
      encoder_fn: () -> ObservationEncoder, or None for a controller on raw pixels / 255.
      sequential_model_fn: () -> SequentialModel, or None for a V-only (z-only) controller.
      encoder_name, sequential_model_name: descriptions saved with the controller.
      cell_state: the controller also reads the sequential model's memory cell c (World
        Models' Doom agent: z, h and c; needs an LSTM-based model).
    """

    environment: str
    controller: str
    controller_kwargs: tuple = ()
    encoder_fn: Callable | None = None
    sequential_model_fn: Callable | None = None
    encoder_name: str = "none"
    sequential_model_name: str = "none"
    cell_state: bool = False

    @property
    def env(self) -> Environments:
        return Environments.from_name(self.environment)

    def build_models(self):
        """-> (encoder or None, sequential model or None), sizes checked."""
        from rl755.models.common.encoder import ObservationEncoder
        from rl755.models.common.sequential import SequentialModel

        encoder = self.encoder_fn() if self.encoder_fn is not None else None
        seq = self.sequential_model_fn() if self.sequential_model_fn is not None else None
        for model, cls, what in (
            (encoder, ObservationEncoder, self.encoder_name),
            (seq, SequentialModel, self.sequential_model_name),
        ):
            if model is not None and not isinstance(model, cls):
                raise TypeError(f"{what} gave a {type(model).__name__}, not a {cls.__name__}.")
        check_sizes(self.env, encoder, seq)
        return encoder, seq

    def build_controller(self, encoder=None, sequential_model=None):
        return controllers_lib.make_controller(
            self.controller,
            feature_size(self.env, encoder, sequential_model, self.cell_state),
            environment=self.env,
            **dict(self.controller_kwargs),
        )

    def build(self, use_tf_function: bool = True) -> WorldModelAgent:
        encoder, seq = self.build_models()
        controller = self.build_controller(encoder, seq)
        return WorldModelAgent(
            controller,
            encoder,
            seq,
            use_tf_function=use_tf_function,
            action_fn=self.action_fn,
            cell_state=self.cell_state,
        )

    @property
    def action_fn(self):
        """Discrete environments: controller outputs -> one-hot actions; else None."""
        return self.env.to_stored_action if self.env.is_discrete else None


class WorldModelAgent:
    """Batched acting with encoder (optional) + sequential model (optional) + controller."""

    def __init__(
        self,
        controller,
        encoder=None,
        sequential_model=None,
        use_tf_function=True,
        action_fn=None,
        cell_state=False,
    ):
        # action_fn: controller outputs [E, A] -> the environment's stored actions (one-hot
        # for discrete environments, `Environments.to_stored_action`); None keeps them.
        self.controller = controller
        self.action_fn = action_fn
        self.encoder = encoder
        self.sequential_model = sequential_model
        self.cell_state = bool(cell_state)
        self.hidden_size = sequential_model.hidden_size if sequential_model is not None else 0
        self._step_fn = tf.function(self._step) if use_tf_function else self._step
        self._encode_fn = tf.function(self._encode) if use_tf_function else self._encode
        self._h = None
        self._state = None

    @property
    def num_params(self) -> int:
        return self.controller.num_params

    def _encode(self, obs):
        if self.encoder is None:
            flat = tf.reshape(obs, [tf.shape(obs)[0], -1])
            return tf.cast(flat, tf.float32) / 255.0
        return self.encoder.compute_full_representation(obs)[0]

    def _step(self, obs, params, h, state, override=None, use_override=None):
        z = self._encode(obs)  # [E, Z]
        features = controller_features(z, h, state, self.sequential_model, self.cell_state)
        actions = self.controller.act(params, features[:, None, :])[:, 0, :]  # [E, A]
        if self.action_fn is not None:
            actions = self.action_fn(actions)  # what the sequential model was trained on
        if override is not None:  # exploration: the model must see the action really taken
            actions = tf.where(use_override[:, None], tf.cast(override, actions.dtype), actions)
        if self.sequential_model is not None:
            h, state = self.sequential_model.step(z, actions, state)
        return actions, h, state

    def encode(self, obs) -> np.ndarray:
        """uint8 [B, H, W, C] -> float32 [B, D_z] (the representation the controller sees)."""
        return self._encode_fn(tf.convert_to_tensor(obs)).numpy()

    def reset(self, batch_size: int) -> None:
        """Starts `batch_size` new episodes (zero hidden, the model's initial state)."""
        self._h = tf.zeros([batch_size, self.hidden_size], tf.float32)
        self._state = (
            self.sequential_model.initial_state(batch_size)
            if self.sequential_model is not None
            else ()
        )

    def act(self, obs, params, override=None, use_override=None) -> np.ndarray:
        """obs uint8 [E, H, W, C], params [E, N] -> actions float32 [E, A]; advances h.

        `override` [E, A] (stored actions) replaces the controller's action where
        `use_override` [E] (bool) is True, and the sequential model steps with what was
        returned (exploration with the model's state kept true to the episode).
        """
        if self._h is None:
            raise RuntimeError("Call reset(batch_size) before act().")
        params = tf.convert_to_tensor(np.asarray(params, np.float32))
        extra = ()
        if override is not None:
            extra = (
                tf.convert_to_tensor(np.asarray(override, np.float32)),
                tf.convert_to_tensor(np.asarray(use_override, bool)),
            )
        actions, self._h, self._state = self._step_fn(
            tf.convert_to_tensor(obs), params, self._h, self._state, *extra
        )
        return actions.numpy()


def run_episodes(
    envs: Sequence,
    agent: WorldModelAgent,
    params: np.ndarray,
    seeds: Sequence[int],
    max_steps: int,
    record_frames: int | None = None,
) -> dict:
    """Runs len(params) episodes in lockstep on envs[:len(params)], batched networks.

    Args:
      envs: at least E gymnasium environments (reused across calls).
      params: [E, N] controller parameters, one row per episode.
      seeds: [E] reset seeds.
      max_steps: step limit per episode (the env's own limit applies too).
      record_frames: index of the episode whose observations to return (for GIFs), or None.
    Returns:
      {"returns": float64 [E], "steps": int64 [E], "frames": list of uint8 frames (if recorded)}.
    """
    params = np.asarray(params, np.float32)
    n = len(params)
    if len(seeds) != n or len(envs) < n:
        raise ValueError(
            f"{n} parameter rows need {n} seeds and envs (got {len(seeds)}, {len(envs)})."
        )
    obs = np.stack([envs[i].reset(seed=int(seeds[i]))[0] for i in range(n)])  # [E, H, W, C]
    agent.reset(n)
    returns = np.zeros(n)
    steps = np.zeros(n, np.int64)
    active = np.ones(n, bool)
    frames = [obs[record_frames].copy()] if record_frames is not None else []
    for _ in range(max_steps):
        actions = agent.act(obs, params)
        for i in np.flatnonzero(active):
            o, r, terminated, truncated, _ = envs[i].step(actions[i])
            obs[i] = o
            returns[i] += r
            steps[i] += 1
            if terminated or truncated:
                active[i] = False
        if record_frames is not None and steps[record_frames] > len(frames) - 1:
            frames.append(obs[record_frames].copy())
        if not active.any():
            break
    out = {"returns": returns, "steps": steps}
    if record_frames is not None:
        out["frames"] = frames
    return out
