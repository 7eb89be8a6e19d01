"""A GRU world model in one file: a backbone, a builder, one registration.

python scripts/models/train_sequential_model.py --model=gru.gru_with_heads ...
# with RL755_MODEL_MODULES=examples.gru_world_model (docs/guides/new-sequential-model.md)
"""

import keras
import tensorflow as tf

from rl755.models.registry import Sequential, register
from rl755.models.sequential.heads import DeterministicHead
from rl755.models.sequential.models import HeadedSequentialModel


class GruBackbone(keras.layers.Layer):
    """A GRU: x [B, T, D] -> h [B, T, units]; `step` runs its cell once."""

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True  # the mask is an argument of `call`
        self.units = units
        self.cell = keras.layers.GRUCell(units, name="cell")
        self.rnn = keras.layers.RNN(self.cell, return_sequences=True, name="gru")

    @property
    def hidden_size(self) -> int:
        return self.units

    def build(self, input_shape):
        self.rnn.build(input_shape)
        super().build(input_shape)

    def call(self, x, mask=None, training=None):
        if mask is not None:  # padded steps carry the state through unchanged
            mask = tf.cast(mask, tf.bool)
        return self.rnn(x, mask=mask, training=training)

    def initial_state(self, batch_size: int):
        return tf.zeros([batch_size, self.units])

    def step(self, x, state):
        h, _ = self.cell(x, state)
        return h, h


def gru_world_model(representation_size, action_size, units=64, **head_kwargs):
    """A GRU and a regression of z_(t+1); head_kwargs: predict_reward, predict_done, ..."""
    backbone = GruBackbone(units, name="gru_backbone")
    z_head = DeterministicHead(representation_size, name="z_head")
    return HeadedSequentialModel(
        backbone, z_head, representation_size, action_size, name="gru", **head_kwargs
    )


register(Sequential(
    "gru.gru_with_heads", gru_world_model, presets={"units": 32}, heads=True,
    description="a GRU regressing z_(t+1), + reward and episode-end heads (examples/)",
))  # fmt: skip
