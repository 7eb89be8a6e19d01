"""A causal transformer backbone with sliding-window attention and a key/value cache.

    backbone = CausalTransformer(num_layers=6, model_dim=256, num_heads=8, window=128)
    h = backbone(x)                                    # x [B, T, D_in] -> h [B, T, model_dim]
    state = backbone.initial_state(batch_size)         # ring-buffer key/value cache
    h_t, state = backbone.step(x_t, state)             # x_t [B, D_in] -> [B, model_dim]

Positions: no absolute position embedding. Each head adds a linear distance penalty to its
attention logits (ALiBi, Press et al. 2022: -slope_h * (i - j)), so attention depends only
on how far back a key is, never on where the sequence started.

The window (what happens past it): every layer's query at time i attends to the keys at
times i - window + 1 .. i (sliding-window attention, as in Longformer/Mistral). The
full-sequence forward pass applies exactly this banded causal mask at any length, and
`step` keeps the last `window` keys/values of each layer in a ring buffer, so the two
agree at every step, also for t >= window: acting never slows down or forgets abruptly.
For t < window this is plain causal attention, identical to training on slices of length
<= window. Past the window, one layer sees exactly the last `window` inputs; with several
layers information from further back can still flow through earlier positions (the
receptive field of a stack of sliding-window layers), unlike recomputing a fresh window
from scratch, which would cost O(window) times more per step (see
benchmarks/acting_cost.py).
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

_NEG = -1e9  # finite "minus infinity": a fully masked row gives a uniform softmax, not NaN


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Geometric per-head slopes 2^(-8 h / num_heads), h = 1..num_heads (float32 [heads])."""
    return np.array([2.0 ** (-8.0 * (h + 1) / num_heads) for h in range(num_heads)], np.float32)


class SlidingWindowAttention(keras.layers.Layer):
    """Multi-head causal self-attention over the last `window` positions, with ALiBi."""

    def __init__(self, num_heads: int, key_dim: int, window: int, dropout: float = 0.0, **kw):
        super().__init__(**kw)
        self.supports_masking = True
        self.num_heads, self.key_dim, self.window = int(num_heads), int(key_dim), int(window)
        self.dropout_rate = float(dropout)
        self.slopes = tf.constant(alibi_slopes(self.num_heads))  # [h]

    def build(self, input_shape):
        d = int(input_shape[-1])
        self.qkv = keras.layers.Dense(3 * self.num_heads * self.key_dim, name="qkv")
        self.qkv.build(input_shape)
        self.out = keras.layers.Dense(d, name="out")
        self.out.build((*input_shape[:-1], self.num_heads * self.key_dim))
        self.dropout = keras.layers.Dropout(self.dropout_rate)
        super().build(input_shape)

    def _split(self, x):
        """[..., D] -> q, k, v each [..., h, dk]."""
        qkv = self.qkv(x)
        shape = tf.concat([tf.shape(qkv)[:-1], [3, self.num_heads, self.key_dim]], axis=0)
        qkv = tf.reshape(qkv, shape)
        return qkv[..., 0, :, :], qkv[..., 1, :, :], qkv[..., 2, :, :]

    def call(self, x, key_mask=None, training=None):
        """x [B, T, D], key_mask [B, T] (1 = real step) -> [B, T, D]."""
        q, k, v = self._split(x)  # [B, T, h, dk]
        t = tf.shape(x)[1]
        scores = tf.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.key_dim)
        pos = tf.range(t)
        dist = pos[:, None] - pos[None, :]  # [T, T] query time - key time
        bias = -self.slopes[:, None, None] * tf.cast(dist, tf.float32)[None]  # [h, T, T]
        allowed = tf.logical_and(dist >= 0, dist < self.window)[None, None]  # [1, 1, T, T]
        if key_mask is not None:
            allowed = tf.logical_and(allowed, tf.cast(key_mask, tf.bool)[:, None, None, :])
        scores = tf.where(allowed, scores + bias[None], _NEG)
        weights = self.dropout(tf.nn.softmax(scores, axis=-1), training=training)
        out = tf.einsum("bhqk,bkhd->bqhd", weights, v)  # [B, T, h, dk]
        out = tf.reshape(out, tf.concat([tf.shape(out)[:2], [-1]], axis=0))
        return self.out(out)

    def step_bias(self, t):
        """ALiBi bias and validity of each cache slot at time t: [h, W] (-1e9 = empty)."""
        dist = (t - tf.range(self.window)) % self.window  # [W] how far back each slot is
        bias = -self.slopes[:, None] * tf.cast(dist, tf.float32)[None]  # [h, W]
        return tf.where((dist <= t)[None], bias, _NEG)  # slots not yet written are empty

    def step(self, x, cache_k, cache_v, slot, bias):
        """x [B, D] at time t; caches [B, h, W, dk] before t (a ring buffer: time s lives in
        slot s % W, so slot t % W still holds time t - W, which is out of the window); slot
        [W] bool, True at t % W; bias [h, W] from `step_bias(t)` -> (out [B, D], k and v of
        x, each [B, h, dk], for the caller to write into slot t % W).

        Attends as if x's key and value were already in their slot, without writing the
        cache here: the caller writes all layers' keys and values at once."""
        q, k, v = self._split(x)  # [B, h, dk]
        scores = tf.matmul(q[:, :, None, :], cache_k, transpose_b=True)[:, :, 0]  # [B, h, W]
        scores = tf.where(slot, tf.reduce_sum(q * k, -1, keepdims=True), scores)
        weights = tf.nn.softmax(scores / math.sqrt(self.key_dim) + bias[None], axis=-1)
        new_weight = tf.reduce_sum(tf.where(slot, weights, 0.0), -1, keepdims=True)  # [B, h, 1]
        old = tf.matmul(tf.where(slot, 0.0, weights)[:, :, None, :], cache_v)[:, :, 0]
        out = old + new_weight * v  # [B, h, dk]
        out = tf.reshape(out, [tf.shape(out)[0], self.num_heads * self.key_dim])
        return self.out(out), k, v


class TransformerBlock(keras.layers.Layer):
    """Pre-layer-norm block: x + attn(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, num_heads, key_dim, window, intermediate_dim, dropout=0.0, **kw):
        super().__init__(**kw)
        self.supports_masking = True
        self.attention = SlidingWindowAttention(num_heads, key_dim, window, dropout, name="attn")
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm2")
        self.ff1 = keras.layers.Dense(intermediate_dim, activation="gelu", name="ff1")
        self.ff2 = None
        self.dropout = keras.layers.Dropout(dropout)

    def build(self, input_shape):
        self.ff2 = keras.layers.Dense(int(input_shape[-1]), name="ff2")
        super().build(input_shape)

    def _ffn(self, x, training=None):
        return self.dropout(self.ff2(self.ff1(self.norm2(x))), training=training)

    def call(self, x, key_mask=None, training=None):
        a = self.attention(self.norm1(x), key_mask=key_mask, training=training)
        x = x + self.dropout(a, training=training)
        return x + self._ffn(x, training=training)

    def step(self, x, cache_k, cache_v, slot, bias):
        """x [B, D] -> (out [B, D], k, v [B, h, dk]); see SlidingWindowAttention.step."""
        a, k, v = self.attention.step(self.norm1(x), cache_k, cache_v, slot, bias)
        x = x + a
        return x + self._ffn(x), k, v


#: The sizes every transformer model constructor takes as keyword arguments, and their
#: defaults (World Models' "base"): the arguments of `CausalTransformer`.
TRANSFORMER_SIZE_DEFAULTS = dict(
    num_layers=6, model_dim=256, num_heads=8, window=128, intermediate_dim=None, dropout=0.0
)


def split_transformer_sizes(kwargs: dict) -> tuple[dict, dict]:
    """A transformer model constructor's keyword arguments, split into the backbone's sizes
    (`TRANSFORMER_SIZE_DEFAULTS` updated by those given) and the others (its heads')."""
    sizes = {k: kwargs.get(k, v) for k, v in TRANSFORMER_SIZE_DEFAULTS.items()}
    return sizes, {k: v for k, v in kwargs.items() if k not in sizes}


class CausalTransformer(keras.layers.Layer):
    """Input projection, `num_layers` sliding-window blocks, final layer norm.

    State for `step`: {"kv": [B, L, 2, h, W, dk] keys (index 0) and values (1) of every
    layer, a ring buffer over W; "t": int32 [], one time index for the whole batch}."""

    def __init__(
        self,
        num_layers: int,
        model_dim: int,
        num_heads: int,
        window: int,
        intermediate_dim: int | None = None,
        dropout: float = 0.0,
        **kw,
    ):
        super().__init__(**kw)
        self.supports_masking = True  # inputs may carry a Keras mask; masking is explicit here
        if model_dim % num_heads:
            raise ValueError(f"model_dim {model_dim} must be divisible by num_heads {num_heads}.")
        if window <= 0:
            raise ValueError(f"window must be positive, got {window}.")
        self.num_layers, self.model_dim, self.num_heads = num_layers, model_dim, num_heads
        self.window, self.key_dim = int(window), model_dim // num_heads
        self.input_projection = keras.layers.Dense(model_dim, name="input_projection")
        self.blocks = [
            TransformerBlock(
                num_heads,
                self.key_dim,
                window,
                intermediate_dim or 4 * model_dim,
                dropout,
                name=f"block_{i}",
            )
            for i in range(num_layers)
        ]
        self.final_norm = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")

    @property
    def hidden_size(self) -> int:
        return self.model_dim

    def call(self, x, mask=None, training=None):
        """x [B, T, D_in], mask [B, T] or None -> [B, T, model_dim]."""
        h = self.input_projection(x)
        for block in self.blocks:
            h = block(h, key_mask=mask, training=training)
        return self.final_norm(h)

    def initial_state(self, batch_size: int) -> dict:
        shape = [batch_size, self.num_layers, 2, self.num_heads, self.window, self.key_dim]
        return {"kv": tf.zeros(shape), "t": tf.constant(0, tf.int32)}

    def step(self, x, state):
        """x [B, D_in] -> (h [B, model_dim], new state); O(window) work per step."""
        t, kv = state["t"], state["kv"]
        h = self.input_projection(x)
        slot = tf.equal(tf.range(self.window), t % self.window)  # [W]
        bias = self.blocks[0].attention.step_bias(t) if self.blocks else None  # same slopes
        new = []
        for i, block in enumerate(self.blocks):
            h, k, v = block.step(h, kv[:, i, 0], kv[:, i, 1], slot, bias)
            new.append(tf.stack([k, v], axis=1))  # [B, 2, h, dk]
        if new:  # one write of every layer's key and value into slot t % W
            kv = tf.where(slot[:, None], tf.stack(new, axis=1)[..., None, :], kv)
        return self.final_norm(h), {"kv": kv, "t": t + 1}
