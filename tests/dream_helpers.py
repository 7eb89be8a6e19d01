"""Helpers for the dream tests: a sequential model with no state whose next z, reward and end
probability a subclass scripts in `sample_next` (Z = `z_size`, A = 3, H = 1)."""

from __future__ import annotations

import tensorflow as tf

from rl755.models.common.sequential import SequentialModel


class ScriptedModel(SequentialModel):
    """Stateless: `step` returns the state it got; subclasses write `sample_next`."""

    def __init__(self, z_size: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.z_size = z_size

    representation_size = property(lambda self: self.z_size)
    action_size = property(lambda self: 3)
    hidden_size = property(lambda self: 1)
    has_reward_head = property(lambda self: True)
    has_done_head = property(lambda self: True)

    def get_loss_fn(self):
        raise NotImplementedError

    def get_hidden_representation(self, x, mask=None, training=None, position=-1):
        raise NotImplementedError

    def initial_state(self, batch_size):
        return tf.zeros([batch_size, 1])

    def step(self, z, a, state):
        return state, state
