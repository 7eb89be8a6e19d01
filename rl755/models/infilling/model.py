"""A transformer that trains on autoregressive and infilling tasks and still acts step by step.

    model = infilling_transformer(representation_size=32, action_size=3, num_layers=4,
                                  model_dim=128, num_heads=4, window=64)
    sums, counts = model.task_loss_sums(batch, resolve_task("mixed"), step, training=True)
    h, state = model.step(z_t, a_t, state)          # acting: exactly a causal transformer
    z_hat = model.infill(x, mask, hidden)           # x [B, T, Z + A], hidden [B, T] -> [B, T, Z]

Design: causal backbone with an infilling head (not a prefix-LM).

    inputs  [z_t * (1 - m_t), a_t, m_t]    m_t = 1 where z_t is hidden (always 0 when acting)
    backbone: CausalTransformer (rl755/models/sequential/transformer.py), unchanged
        -> h [B, T, H] -> next-step heads (z_{t+1}, reward, episode end): autoregressive task
        -> infilling head: `num_infill_layers` bidirectional blocks over every real position
           of h (symmetric ALiBi distance penalty) -> Dense(Z): the hidden z_t, infill task

The backbone is causal, so h_j only reads steps <= j; the head attends over all positions, so
a hidden z_t is predicted from the steps before it and from the backbone's states after the
span (which saw the steps after it): both sides. The infilling loss reaches the backbone
through the head, and teaches it to carry the dynamics across steps whose observation it
lacks (m_t = 1), which is what it does in a dream.

Why not a prefix-LM: its prefix attends both ways, so the keys and values of a position
change as later steps arrive; an agent would have to recompute the prefix at every step (no
key/value cache) or act with a model other than the one trained. Here acting is the causal
transformer itself: same cache, same cost per step, and `step` agrees with the full pass.
The infilling head (one block: a 1/num_layers share of the backbone's parameters) is used in
training only.

Losses: autoregressive batches train the next-step terms of rl755/models/sequential/
models.py ("z", "reward", "done"); infilling batches train "infill", the squared
error of the hidden z_t averaged over Z and over hidden real steps. A mixed task draws one kind
per batch (`tf.cond`: one kind's compute per step). Validation reports both.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from rl755.models.sequential.heads import DeterministicHead
from rl755.models.sequential.models import HeadedSequentialModel
from rl755.models.sequential.tasks import AUTOREGRESSIVE, TASK_NAMES
from rl755.models.sequential.transformer import (
    CausalTransformer,
    alibi_slopes,
    split_transformer_sizes,
)

_NEG = -1e9


class MaskableBackbone(keras.layers.Layer):
    """A backbone fed [z * (1 - m), a, m]: z_t can be hidden (m_t = 1). `call` without
    `hidden` and `step` feed m = 0 (the autoregressive task, acting)."""

    def __init__(self, backbone: keras.layers.Layer, representation_size: int, **kw):
        super().__init__(**kw)
        self.supports_masking = True
        self.backbone = backbone
        self.representation_size = int(representation_size)

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    def backbone_inputs(self, x, hidden=None):
        """x [..., Z + A], hidden [...] or None -> [..., Z + A + 1]."""
        if hidden is None:
            return tf.concat([x, tf.zeros_like(x[..., :1])], axis=-1)
        m = tf.cast(hidden, x.dtype)[..., None]
        z, a = x[..., : self.representation_size], x[..., self.representation_size :]
        return tf.concat([z * (1.0 - m), a, m], axis=-1)

    def call(self, x, mask=None, training=None, hidden=None):
        """x [B, T, Z + A], hidden [B, T] (1 = z_t hidden) -> [B, T, H]."""
        return self.backbone(self.backbone_inputs(x, hidden), mask=mask, training=training)

    def initial_state(self, batch_size: int):
        return self.backbone.initial_state(batch_size)

    def step(self, x, state):
        """x [B, Z + A] -> (h [B, H], new state)."""
        return self.backbone.step(self.backbone_inputs(x), state)


class BidirectionalBlock(keras.layers.Layer):
    """Pre-layer-norm block attending over every real position (both directions), with a
    symmetric ALiBi penalty -slope_h * |i - j|."""

    def __init__(self, num_heads: int, intermediate_dim: int | None = None, **kw):
        super().__init__(**kw)
        self.supports_masking = True  # masking is explicit (key_mask)
        self.num_heads = int(num_heads)
        self.intermediate_dim = intermediate_dim
        self.slopes = tf.constant(alibi_slopes(self.num_heads))

    def build(self, input_shape):
        d = int(input_shape[-1])
        if d % self.num_heads:
            raise ValueError(f"width {d} must be divisible by num_heads {self.num_heads}.")
        self.key_dim = d // self.num_heads
        self.norm1 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm1")
        self.norm2 = keras.layers.LayerNormalization(epsilon=1e-5, name="norm2")
        self.qkv = keras.layers.Dense(3 * d, name="qkv")
        self.out = keras.layers.Dense(d, name="out")
        self.ff1 = keras.layers.Dense(self.intermediate_dim or 4 * d, activation="gelu", name="ff1")
        self.ff2 = keras.layers.Dense(d, name="ff2")
        super().build(input_shape)

    def call(self, x, key_mask=None):
        """x [B, T, D], key_mask [B, T] (1 = real step) -> [B, T, D]."""
        qkv = self.qkv(self.norm1(x))
        shape = tf.concat([tf.shape(x)[:2], [3, self.num_heads, self.key_dim]], axis=0)
        qkv = tf.reshape(qkv, shape)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, T, h, dk]
        scores = tf.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.key_dim)
        pos = tf.range(tf.shape(x)[1])
        dist = tf.cast(tf.abs(pos[:, None] - pos[None, :]), tf.float32)  # [T, T]
        scores += -self.slopes[:, None, None] * dist[None]
        if key_mask is not None:
            real = tf.cast(key_mask, tf.bool)[:, None, None, :]
            scores = tf.where(real, scores, _NEG)
        out = tf.einsum("bhqk,bkhd->bqhd", tf.nn.softmax(scores, axis=-1), v)
        x = x + self.out(tf.reshape(out, tf.shape(x)))
        return x + self.ff2(self.ff1(self.norm2(x)))


class InfillingTransformer(HeadedSequentialModel):
    """A causal transformer with next-step heads and an infilling head (module docstring)."""

    training_tasks = TASK_NAMES

    def __init__(
        self,
        backbone: MaskableBackbone,
        z_head: keras.layers.Layer,
        representation_size: int,
        action_size: int,
        num_heads: int,
        num_infill_layers: int = 1,
        infill_loss_weight: float = 1.0,
        **kwargs,
    ):
        super().__init__(backbone, z_head, representation_size, action_size, **kwargs)
        self.infill_blocks = [
            BidirectionalBlock(num_heads, name=f"infill_block_{i}")
            for i in range(int(num_infill_layers))
        ]
        self.infill_norm = keras.layers.LayerNormalization(epsilon=1e-5, name="infill_norm")
        self.infill_head = keras.layers.Dense(self.representation_size, name="infill_head")
        self.loss_weights["infill"] = float(infill_loss_weight)

    def build(self, input_shape):
        """The infilling layers (which `call` does not use); the rest build on first call."""
        hidden = (None, None, self.backbone.hidden_size)
        for block in self.infill_blocks:
            block.build(hidden)
        self.infill_norm.build(hidden)
        self.infill_head.build(hidden)
        self.built = True

    def ensure_built(self):
        if not self.built or not self.infill_head.built:
            x = tf.zeros([1, 1, self.representation_size + self.action_size])
            self(x)
            self.infill(x, tf.ones([1, 1]), tf.ones([1, 1]))
        return self

    def infill(self, x, mask, hidden, training=None):
        """x [B, T, Z + A], mask [B, T], hidden [B, T] (1 = z_t hidden) -> z_t predicted [B, T, Z]."""
        x = tf.convert_to_tensor(x, tf.float32)
        self._check_inputs(x)
        g = self.backbone(x, mask=mask, training=training, hidden=hidden)
        for block in self.infill_blocks:
            g = block(g, key_mask=mask)
        return self.infill_head(self.infill_norm(g))

    def infill_loss_sums(self, batch, hidden, training=None) -> tuple[dict, dict]:
        """{"infill": squared error summed over hidden real steps}, {"infill": their count}."""
        x = tf.convert_to_tensor(batch["inputs"], tf.float32)
        predicted = self.infill(x, batch["mask"], hidden, training=training)
        err = tf.reduce_mean(tf.square(predicted - x[..., : self.representation_size]), -1)
        return {"infill": tf.reduce_sum(tf.where(hidden > 0, err, 0.0))}, {
            "infill": tf.reduce_sum(hidden)
        }

    def task_loss_sums(self, batch, task, step, training=None):
        """Training: the batch is of one kind (`task.is_infill_batch(step)`); validation
        (training falsy): the autoregressive terms, and "infill" when the task infills."""
        ar = super().task_loss_sums
        if task.name == AUTOREGRESSIVE:
            return ar(batch, task, step, training)
        hidden = task.infill_mask(batch["mask"], step)
        if not training:
            sums, counts = ar(batch, task, step, training)
            inf_sums, inf_counts = self.infill_loss_sums(batch, hidden, training)
            return {**sums, **inf_sums}, {**counts, **inf_counts}
        if task.only_infills:
            return self.infill_loss_sums(batch, hidden, training)
        zero = tf.constant(0.0)

        def autoregressive():
            sums, counts = ar(batch, task, step, training)
            return {**sums, "infill": zero}, {**counts, "infill": zero}

        def infilling():
            sums, counts = self.infill_loss_sums(batch, hidden, training)
            names = ["z"] + [k for k in ("reward", "done") if getattr(self, f"{k}_head")]
            return {**{k: zero for k in names}, **sums}, {**{k: zero for k in names}, **counts}

        return tf.cond(task.is_infill_batch(step), infilling, autoregressive)


def infilling_transformer(
    representation_size: int,
    action_size: int,
    num_infill_layers: int = 1,
    infill_loss_weight: float = 1.0,
    name: str = "infilling_transformer",
    **kwargs,
) -> InfillingTransformer:
    """A causal sliding-window transformer predicting z_{t+1} by regression, with an
    infilling head for `--task=infill|mixed`. Sizes by keyword: num_layers, model_dim,
    num_heads, window, intermediate_dim, dropout (`TRANSFORMER_SIZE_DEFAULTS`); the other
    keyword arguments go to the heads."""
    sizes, head_kwargs = split_transformer_sizes(kwargs)
    causal = CausalTransformer(**sizes, name="transformer")
    return InfillingTransformer(
        MaskableBackbone(causal, representation_size, name="maskable"),
        DeterministicHead(representation_size, name="z_head"),
        representation_size,
        action_size,
        num_heads=sizes["num_heads"],
        num_infill_layers=num_infill_layers,
        infill_loss_weight=infill_loss_weight,
        name=name,
        **head_kwargs,
    )
