"""A whole-sequence LSTM with a hand-written backward pass, for training on CPUs.

    h = lstm_sequence(x, mask, kernel, recurrent_kernel, bias)
    # x [B, T, D_in], mask [B, T] float (1 = real step) or None,
    # kernel [D_in, 4U], recurrent_kernel [U, 4U], bias [4U] (keras.layers.LSTM's weights,
    # gates in Keras' order i, f, c, o) -> h [B, T, U], from a zero state

The same function as `keras.layers.LSTM(U, return_sequences=True)` (sigmoid gates, tanh cell,
a masked step carries h and c through unchanged and outputs the carried h). What differs is
the cost on a CPU: Keras runs one generic cell per step in a while loop and TensorFlow
differentiates that loop op by op; here the input projection of all steps is one matrix
product, the loop does one [B, U] x [U, 4U] product and a few element-wise ops per step, and
the backward loop (written out below, cuDNN's scheme) does one [B, 4U] x [4U, U] product per
step, the weight gradients being three large products over all steps at the end. Its
gradients equal Keras' to float rounding (tests/test_sequential_models.py); its speed is
measured in benchmarks/sequential_training.py.
"""

from __future__ import annotations

import tensorflow as tf


def _gates(z):
    """Pre-activations [B, 4U] -> input, forget, cell candidate, output gates [B, U] each."""
    i, f, g, o = tf.split(z, 4, axis=-1)
    return tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)


def lstm_sequence(x, mask, kernel, recurrent_kernel, bias):
    """See the module docstring."""
    x = tf.convert_to_tensor(x, tf.float32)
    if mask is None:
        mask = tf.ones(tf.shape(x)[:2], tf.float32)
    mask = tf.cast(mask, tf.float32)
    return _lstm(
        x,
        mask,
        tf.convert_to_tensor(kernel),
        tf.convert_to_tensor(recurrent_kernel),
        tf.convert_to_tensor(bias),
    )


@tf.custom_gradient
def _lstm(x, mask, kernel, recurrent_kernel, bias):
    batch, steps = tf.shape(x)[0], tf.shape(x)[1]
    units = recurrent_kernel.shape[0]
    xw = tf.einsum("bti,ij->tbj", x, kernel) + bias  # [T, B, 4U]
    real = tf.transpose(mask)[..., None]  # [T, B, 1]
    zeros = tf.zeros([batch, units])

    def forward(t, h, c, h_all, c_all, gates_all):
        i, f, g, o = _gates(xw[t] + tf.matmul(h, recurrent_kernel))
        keep = real[t] > 0
        c = tf.where(keep, f * c + i * g, c)
        h = tf.where(keep, o * tf.tanh(c), h)
        gates = tf.concat([i, f, g, o], -1)
        return t + 1, h, c, h_all.write(t, h), c_all.write(t, c), gates_all.write(t, gates)

    arrays = [tf.TensorArray(tf.float32, size=steps) for _ in range(3)]
    _, _, _, h_all, c_all, gates_all = tf.while_loop(
        lambda t, *_: t < steps, forward, (0, zeros, zeros, *arrays)
    )
    hs, cs, gs = h_all.stack(), c_all.stack(), gates_all.stack()  # [T, B, U], .., [T, B, 4U]

    def backward(d_out):
        d_hs = tf.transpose(d_out, [1, 0, 2])  # [T, B, U]
        h_prev = tf.concat([zeros[None], hs[:-1]], 0)
        c_prev = tf.concat([zeros[None], cs[:-1]], 0)
        recurrent_t = tf.transpose(recurrent_kernel)

        def step(t, dh_next, dc_next, dz_all):
            i, f, g, o = tf.split(gs[t], 4, axis=-1)
            m = real[t]
            tanh_c = tf.tanh(f * c_prev[t] + i * g)  # the new cell before masking
            dh = d_hs[t] + dh_next
            dc = (dh * o * (1.0 - tanh_c * tanh_c) + dc_next) * m
            dz = tf.concat(
                [
                    dc * g * i * (1.0 - i),
                    dc * c_prev[t] * f * (1.0 - f),
                    dc * i * (1.0 - g * g),
                    dh * tanh_c * o * (1.0 - o) * m,
                ],
                -1,
            )
            dh_prev = tf.matmul(dz, recurrent_t) + dh * (1.0 - m)
            dc_prev = dc * f + dc_next * (1.0 - m)
            return t - 1, dh_prev, dc_prev, dz_all.write(t, dz)

        _, _, _, dz_all = tf.while_loop(
            lambda t, *_: t >= 0,
            step,
            (steps - 1, zeros, zeros, tf.TensorArray(tf.float32, size=steps)),
        )
        dz = dz_all.stack()  # [T, B, 4U]
        return (
            tf.einsum("tbj,ij->bti", dz, kernel),
            tf.zeros_like(mask),
            tf.einsum("bti,tbj->ij", x, dz),
            tf.einsum("tbu,tbj->uj", h_prev, dz),
            tf.reduce_sum(dz, [0, 1]),
        )

    return tf.transpose(hs, [1, 0, 2]), backward
