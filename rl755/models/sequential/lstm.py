"""An LSTM backbone with an O(1) incremental step.

    backbone = LstmBackbone(units=256)
    h = backbone(x)                                # x [B, T, D_in] -> [B, T, units]
    state = backbone.initial_state(batch_size)     # {"h": [B, units], "c": [B, units]}
    c = backbone.cell_state(state)                 # [B, units] (what a z, h, c controller reads)
    h_t, state = backbone.step(x_t, state)         # x_t [B, D_in] -> [B, units]

The full pass and `step` (keras.layers.LSTM's cell) share weights. The full pass is
keras.layers.LSTM (cuDNN) when a GPU is visible and otherwise
`lstm_kernel.lstm_sequence`, the same function with a backward pass written for CPUs
(`sequence_kernel=True/False` forces one). With a mask, padded steps carry the state through
unchanged.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from rl755.models.sequential import lstm_kernel


class LstmBackbone(keras.layers.Layer):
    def __init__(self, units: int = 256, sequence_kernel: bool | None = None, **kw):
        super().__init__(**kw)
        self.supports_masking = True  # inputs may carry a Keras mask; masking is explicit here
        self.units = int(units)
        self.lstm = keras.layers.LSTM(self.units, return_sequences=True, name="lstm")
        # None: decided at the first call (True without a GPU).
        self.sequence_kernel = sequence_kernel

    @property
    def hidden_size(self) -> int:
        return self.units

    @property
    def cell_size(self) -> int:
        return self.units

    def cell_state(self, state) -> tf.Tensor:
        """The memory cell c [B, units] of a step state."""
        return state["c"]

    def build(self, input_shape):
        self.lstm.build(input_shape)
        super().build(input_shape)

    def _use_sequence_kernel(self) -> bool:
        if self.sequence_kernel is None:
            self.sequence_kernel = not tf.config.list_logical_devices("GPU")
        return self.sequence_kernel

    @property
    def compiles_with_xla(self) -> bool:
        """True on the sequence kernel (XLA compiles it; cuDNN's LSTM does not compile)."""
        return self._use_sequence_kernel()

    def call(self, x, mask=None, training=None):
        """x [B, T, D_in], mask [B, T] or None -> [B, T, units]."""
        if self._use_sequence_kernel():
            cell = self.lstm.cell
            return lstm_kernel.lstm_sequence(x, mask, cell.kernel, cell.recurrent_kernel, cell.bias)
        if mask is not None:
            mask = tf.cast(mask, tf.bool)
        return self.lstm(x, mask=mask, training=training)

    def initial_state(self, batch_size: int) -> dict:
        zeros = tf.zeros([batch_size, self.units])
        return {"h": zeros, "c": zeros}

    def step(self, x, state):
        """x [B, D_in] -> (h [B, units], new state)."""
        out, (h, c) = self.lstm.cell(x, [state["h"], state["c"]])
        return out, {"h": h, "c": c}
