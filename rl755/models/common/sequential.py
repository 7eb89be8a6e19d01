"""The sequential model interface (stage 4).

Training (full sequences, teacher forcing):

    model = rl755.models.car_racing.transformer.base_deterministic_transformer()
    # inputs: float32 [B, T, Z + A] = concat(z_t, a_t); targets as from
    # EncodedRolloutDatasetBuilder.get_autoregressive_slices
    model.compile(optimizer=..., loss=model.get_loss_fn())
    h = model.get_hidden_representation(inputs, position=-1)        # [B, H]

Acting and dreaming (incremental, O(1) per step for recurrent models, a key/value cache
for transformers):

    state = model.initial_state(batch_size)                          # nested tensors
    h, state = model.step(z_t, a_t, state)                           # z_t [B, Z], a_t [B, A] -> h [B, H]
    nxt = model.sample_next(h, temperature=1.0)
    # {"z": [B, Z] next representation, "reward": [B], "done_prob": [B]}

`step` applied to the inputs of a sequence one position at a time gives the same hidden
representations as `get_hidden_representation(..., position=t)` on the full sequence.
"""

from __future__ import annotations

import abc
from typing import Any

import keras
import tensorflow as tf


class SequentialModel(keras.Model, abc.ABC):
    """A keras.Model over [B, T, Z + A] sequences; see the module docstring."""

    @property
    @abc.abstractmethod
    def representation_size(self) -> int:
        """Z."""

    @property
    @abc.abstractmethod
    def action_size(self) -> int:
        """A."""

    @property
    @abc.abstractmethod
    def hidden_size(self) -> int:
        """H, the size returned by get_hidden_representation and step."""

    @abc.abstractmethod
    def get_loss_fn(self):
        """A Keras loss `fn(targets, predictions) -> scalar` for `compile(loss=...)`."""

    @abc.abstractmethod
    def get_hidden_representation(
        self, x: tf.Tensor, mask: tf.Tensor | None = None, training=None, position: int = -1
    ) -> tf.Tensor:
        """x: [B, T, Z + A] -> hidden representation at `position`: [B, H]."""

    @abc.abstractmethod
    def initial_state(self, batch_size: int) -> Any:
        """The state before any step (a nested structure of tensors)."""

    @abc.abstractmethod
    def step(self, z: tf.Tensor, a: tf.Tensor, state: Any) -> tuple[tf.Tensor, Any]:
        """One incremental step: (z [B, Z], a [B, A], state) -> (hidden [B, H], new state)."""

    def sample_next(self, hidden: tf.Tensor, temperature: float = 1.0, seed=None) -> dict:
        """hidden [B, H] -> {"z": [B, Z], "reward": [B], "done_prob": [B]} (dream rollouts)."""
        raise NotImplementedError(f"{type(self).__name__} cannot sample next observations.")
