"""A transformer that retrieves windows of past experience at every step and attends to them.

    model = retrieval_transformer(representation_size=32, action_size=3, num_layers=4,
                                  model_dim=128, num_heads=4, window=64,
                                  retrieval=RetrievalSettings(window=4, num_neighbors=8))
    model.build_extras(model_dir, builder)   # stage 4: the index of the training rollouts
    model.load_extras(model_dir)             # every loader: the index, once per process
    out = model(x, mask=mask, rollout_ids=ids)   # x [B, T, Z + A], ids [B] (training)
    h, state = model.step(z_t, a_t, state)   # acting and dreaming: same index, same answer

At step t:
    h_t   = CausalTransformer(x_<=t)                      the causal backbone, unchanged
    q_t   = x_{t-w+1} .. x_t                              the last w steps (zeros before 0)
    items = the k windows nearest q_t in the index of training rollouts, each with what
            followed it (rl755/models/retrieval/index.py), and its distance to q_t
    e     = Dense(items, distance)                        [k, D]
    h'_t  = h_t + CrossAttention(LN(h_t), e)              items not found are masked
    h''_t = LN(h'_t + FFN(LN(h'_t)))                      the hidden representation (H = D)
then the usual heads (z_{t+1}, reward, episode end) read h''_t.

Retrieval reads only the current query, so the full pass and `step` agree position by
position; the step state is the backbone's key/value cache plus the last w inputs, and each
step searches k items for each of the batch's queries: a cost bounded by the index size,
never growing with the episode. During training each slice carries its rollout's
fingerprint and its own rollout is left out of the search (else the model would read the
answer); acting, dreaming and evaluation search everything (evaluate on held-out rollouts).
"""

from __future__ import annotations

import math
import os

import keras
import numpy as np
import tensorflow as tf

from rl755.models.retrieval.index import RetrievalSettings, build_index, value_size
from rl755.models.retrieval.memory import Memory
from rl755.models.sequential.heads import DeterministicHead
from rl755.models.sequential.models import HeadedSequentialModel, concrete_for
from rl755.models.sequential.transformer import CausalTransformer, split_transformer_sizes

INDEX_DIR = "retrieval_index"
_NEG = -1e9


def index_dir(model_dir: str) -> str:
    return os.path.join(str(model_dir), INDEX_DIR)


class RetrievalFusion(keras.layers.Layer):
    """h [..., D] and retrieved items (values [..., k, V], dist [..., k], found [..., k]) ->
    [..., D]: cross-attention from h to the items, then a feed-forward block."""

    def __init__(self, num_heads: int, intermediate_dim: int | None = None, **kw):
        super().__init__(**kw)
        self.supports_masking = True  # per position: padding needs no mask here
        self.num_heads = int(num_heads)
        self.intermediate_dim = intermediate_dim

    def build(self, input_shape):
        d = int(input_shape[-1])
        if d % self.num_heads:
            raise ValueError(f"width {d} must be divisible by num_heads {self.num_heads}.")
        self.key_dim = d // self.num_heads
        self.embed = keras.layers.Dense(d, activation="gelu", name="item_embed")
        self.norm_q = keras.layers.LayerNormalization(epsilon=1e-5, name="norm_q")
        self.norm_f = keras.layers.LayerNormalization(epsilon=1e-5, name="norm_f")
        self.norm_out = keras.layers.LayerNormalization(epsilon=1e-5, name="norm_out")
        self.query = keras.layers.Dense(d, name="query")
        self.key_value = keras.layers.Dense(2 * d, name="key_value")
        self.out = keras.layers.Dense(d, name="out")
        self.ff1 = keras.layers.Dense(self.intermediate_dim or 4 * d, activation="gelu", name="ff1")
        self.ff2 = keras.layers.Dense(d, name="ff2")
        super().build(input_shape)

    def call(self, h, values, dist, found):
        lead = tf.shape(h)[:-1]
        items = self.embed(tf.concat([values, tf.math.log1p(dist)[..., None]], axis=-1))
        q = tf.reshape(
            self.query(self.norm_q(h)), tf.concat([lead, [self.num_heads, self.key_dim]], 0)
        )
        kv = self.key_value(items)  # [..., k, 2D]
        k_shape = tf.concat([tf.shape(kv)[:-1], [2, self.num_heads, self.key_dim]], 0)
        kv = tf.reshape(kv, k_shape)
        keys, vals = kv[..., 0, :, :], kv[..., 1, :, :]  # [..., k, h, dk]
        scores = tf.einsum("...hd,...khd->...hk", q, keys) / math.sqrt(self.key_dim)
        scores = tf.where(found[..., None, :] > 0, scores, _NEG)
        att = tf.einsum("...hk,...khd->...hd", tf.nn.softmax(scores, -1), vals)
        any_found = tf.reduce_max(found, axis=-1, keepdims=True)  # [..., 1]
        h = h + self.out(tf.reshape(att, tf.shape(h))) * any_found
        return self.norm_out(h + self.ff2(self.ff1(self.norm_f(h))))


class RetrievalBackbone(keras.layers.Layer):
    """CausalTransformer + retrieval + `RetrievalFusion`; the step state adds the last w inputs."""

    def __init__(self, backbone, fusion, settings: RetrievalSettings, z: int, a: int, **kw):
        super().__init__(**kw)
        self.supports_masking = True
        self.backbone, self.fusion, self.settings = backbone, fusion, settings
        self.sizes = (int(z), int(a))
        self.input_size = int(z) + int(a)
        self.memory: Memory | None = None

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    def windows(self, x):
        """x [B, T, D] -> the raw query windows [B, T, w D] (zeros before the start)."""
        w = self.settings.window
        padded = tf.pad(x, [[0, 0], [w - 1, 0], [0, 0]])
        frames = tf.signal.frame(padded, w, 1, axis=1)  # [B, T, w, D]
        return tf.reshape(frames, tf.concat([tf.shape(x)[:2], [w * self.input_size]], 0))

    def retrieve(self, windows, rollout_ids=None, real=None):
        if self.memory is None:
            raise ValueError(
                f"{self.name} has no retrieval index: load the model with load_trained_model"
                "(model_dir) (or call model.load_extras(model_dir) after build_extras)."
            )
        return self.memory.lookup(windows, rollout_ids, real, k=self.settings.num_neighbors)

    def empty_items(self, lead_shape):
        k, v = self.settings.num_neighbors, value_size(self.settings, *self.sizes)
        zeros = tf.zeros(tf.concat([lead_shape, [k]], 0))
        return tf.zeros(tf.concat([lead_shape, [k, v]], 0)), zeros, zeros

    def call(self, x, mask=None, training=None, rollout_ids=None, items=None):
        """x [B, T, D], mask [B, T], rollout_ids [B] or None, items: retrieved items to use
        instead of searching (building the weights) -> [B, T, H]."""
        h = self.backbone(x, mask=mask, training=training)
        if items is None:
            ids = None
            if rollout_ids is not None:
                ids = tf.broadcast_to(tf.cast(rollout_ids, tf.int64)[:, None], tf.shape(x)[:2])
            items = self.retrieve(self.windows(x), ids, mask)
        return self.fusion(h, *items)

    def initial_state(self, batch_size: int) -> dict:
        last = tf.zeros([batch_size, self.settings.window, self.input_size])
        return {"backbone": self.backbone.initial_state(batch_size), "last": last}

    def step_query(self, x, state):
        """x [B, D] -> (h [B, H], backbone state, last [B, w, D], query window [B, w D]):
        the step up to the search."""
        h, inner = self.backbone.step(x, state["backbone"])
        last = tf.concat([state["last"][:, 1:], x[:, None, :]], axis=1)  # [B, w, D]
        window = tf.reshape(last, [-1, self.settings.window * self.input_size])
        return h, inner, last, window

    def step(self, x, state):
        """x [B, D] -> (h [B, H], new state): one backbone step, one search per query."""
        h, inner, last, window = self.step_query(x, state)
        return self.fusion(h, *self.retrieve(window)), {"backbone": inner, "last": last}


class RetrievalTransformer(HeadedSequentialModel):
    """`RetrievalBackbone` + the usual heads (module docstring)."""

    needs_rollout_ids = True

    def __init__(self, backbone: RetrievalBackbone, z_head, representation_size, action_size, **kw):
        super().__init__(backbone, z_head, representation_size, action_size, **kw)
        self._acting = None  # ((query fn, concretes), (fuse fn, concretes)): eager `step`

    @property
    def settings(self) -> RetrievalSettings:
        return self.backbone.settings

    def ensure_built(self):
        if not self.built or not self.backbone.built:
            x = tf.zeros([1, 1, self.representation_size + self.action_size])
            self(x, items=self.backbone.empty_items([1, 1]))
        return self

    def call(self, x, mask=None, training=None, rollout_ids=None, items=None):
        x = tf.convert_to_tensor(x, tf.float32)
        self._check_inputs(x)
        hidden = self.backbone(
            x, mask=mask, training=training, rollout_ids=rollout_ids, items=items
        )
        out = self.predict_from_hidden(hidden)
        out["hidden"] = hidden
        return out

    def get_hidden_representation(self, x, mask=None, training=None, position=-1):
        return self(x, mask=mask, training=training)["hidden"][:, position]

    def task_loss_sums(self, batch, task, step, training=None):
        del task, step
        ids = batch.get("rollout_id")
        predictions = self(batch["inputs"], mask=batch["mask"], training=training, rollout_ids=ids)
        return self.loss_sums(batch, predictions)

    def step(self, z, a, state):
        """As HeadedSequentialModel.step. Called eagerly (acting): two XLA-compiled halves,
        the backbone step and the fusion, around the search in numpy. Inside a tf.function
        (a dream's loop): one graph without XLA, the search a numpy function in it."""
        self.ensure_built()
        if tf.inside_function():
            if self._step_fn is None:
                self._step_fn = tf.function(self._step, reduce_retracing=True, jit_compile=False)
            return self._step_fn(z, a, state)
        memory = self.backbone.memory
        if memory is None:
            self.backbone.retrieve(None)  # raises, naming what to load
        if self._acting is None:
            query = tf.function(self._step_query, jit_compile=True)
            fuse = tf.function(self._fuse_packed, jit_compile=True)
            self._acting = ((query, {}), (fuse, {}))
        (query, query_cache), (fuse, fuse_cache) = self._acting
        z, a = tf.convert_to_tensor(z), tf.convert_to_tensor(a)
        h, inner, last, window = concrete_for(query, query_cache, z, a, state)(z, a, state)
        no_exclusion = np.zeros(window.shape[0], np.int64)  # acting searches every rollout
        values, dist, found = memory.search(
            window.numpy(), no_exclusion, self.settings.num_neighbors
        )
        packed = tf.constant(np.concatenate([values, dist[..., None], found[..., None]], -1))
        fused = concrete_for(fuse, fuse_cache, h, packed)(h, packed)
        return fused, {"backbone": inner, "last": last}

    def _fuse_packed(self, h, packed):
        """h [B, H], packed [B, k, V + 2] (values, dist, found) -> [B, H]."""
        return self.backbone.fusion(h, packed[..., :-2], packed[..., -2], packed[..., -1])

    def _step_query(self, z, a, state):
        x = tf.concat([tf.cast(z, tf.float32), tf.cast(a, tf.float32)], axis=-1)
        return self.backbone.step_query(x, state)

    # ---- the index -------------------------------------------------------------------------------
    def build_extras(self, model_dir, builder):
        build_index(
            builder,
            index_dir(model_dir),
            self.settings,
            self.representation_size,
            self.action_size,
        )

    def load_extras(self, model_dir):
        memory = Memory.load(index_dir(model_dir))
        memory.check_fits(self.settings, self.representation_size, self.action_size, model_dir)
        memory.nprobe = self.settings.nprobe
        self.backbone.memory = memory
        self._step_fn = None  # a step traced before holds no index


#: Retrieval settings per transformer preset (the index's size grows with the model's).
RETRIEVAL_PRESETS = {
    "tiny": RetrievalSettings(
        window=4, num_neighbors=4, continuation=4, stride=1, max_windows=50_000
    ),
    "small": RetrievalSettings(
        window=4, num_neighbors=8, continuation=8, stride=2, max_windows=100_000
    ),
    "base": RetrievalSettings(
        window=4, num_neighbors=8, continuation=8, stride=4, max_windows=200_000
    ),
}


def retrieval_transformer(
    representation_size: int,
    action_size: int,
    retrieval: RetrievalSettings | str | None = None,
    name: str = "retrieval_transformer",
    **kwargs,
) -> RetrievalTransformer:
    """A causal sliding-window transformer with retrieval, predicting z_{t+1} by regression.
    Sizes by keyword: num_layers, model_dim, num_heads, window, intermediate_dim, dropout
    (`TRANSFORMER_SIZE_DEFAULTS`); the other keyword arguments go to the heads. `retrieval`:
    the settings, or the name of one of `RETRIEVAL_PRESETS` (None: `RetrievalSettings()`)."""
    if isinstance(retrieval, str):
        retrieval = RETRIEVAL_PRESETS[retrieval]
    settings = retrieval or RetrievalSettings()
    sizes, head_kwargs = split_transformer_sizes(kwargs)
    causal = CausalTransformer(**sizes, name="transformer")
    fusion = RetrievalFusion(sizes["num_heads"], sizes["intermediate_dim"], name="fusion")
    backbone = RetrievalBackbone(
        causal, fusion, settings, representation_size, action_size, name="retrieval"
    )
    z_head = DeterministicHead(representation_size, name="z_head")
    return RetrievalTransformer(
        backbone, z_head, representation_size, action_size, name=name, **head_kwargs
    )
