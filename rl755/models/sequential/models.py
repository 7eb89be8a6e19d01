"""Concrete sequential models: a backbone (transformer or LSTM) plus prediction heads.

    model = deterministic_transformer(representation_size=32, action_size=3, num_layers=6,
                                      model_dim=256, num_heads=8, window=128)
    model = deterministic_lstm(representation_size=32, action_size=3, units=256)
    model = mdn_rnn(representation_size=32, action_size=3, units=256, num_components=5,
                    predict_reward=True, predict_done=True)

All are `SequentialModel`s (see rl755/models/common/sequential.py for the interface and the
prediction dict). Optional heads (constructor args): `predict_reward` (regression of
reward_t, squared error) and `predict_done` (Bernoulli logits of "the episode terminated
after step t", cross-entropy with positives weighted by `done_pos_weight` because ends are
rare; `done_probability` undoes the weight, sequential.py). The loss is

    z_loss_weight * z term + reward_loss_weight * reward term + done_loss_weight * done term

each a masked mean over positions: the z term over "target_mask" (steps with a next
observation), the reward and done terms over "mask" (real steps).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential.heads import DeterministicHead, MixtureDensityHead
from rl755.models.sequential.lstm import LstmBackbone
from rl755.models.sequential.transformer import CausalTransformer, split_transformer_sizes


def concrete_for(fn, cache: dict, *args):
    """The concrete function of tf.function `fn` for the dtypes and shapes of `args` (tensors,
    nested), kept in `cache`: calling it directly skips the tf.function's own dispatch."""
    key = tuple((t.dtype, tuple(t.shape)) for t in tf.nest.flatten(args))
    if key not in cache:
        cache[key] = fn.get_concrete_function(*args)
    return cache[key]


class HeadedSequentialModel(SequentialModel):
    """A backbone layer with a z head (`DeterministicHead` or `MixtureDensityHead`) and
    optional reward/done heads: what a new model's builder usually returns
    (docs/guides/new-sequential-model.md).

    The backbone (a keras.layers.Layer), with D = Z + A, its input size:
      hidden_size: H.
      call(x, mask=None, training=None): x float32 [B, T, D], mask [B, T] (1: a real step, 0: a
        padded one, only after the real steps) or None -> hidden [B, T, H]. Causal: position t
        reads inputs <= t only. Padded steps carry the state through unchanged, so the real
        positions do not depend on what padding holds (the losses ignore padded positions).
      initial_state(batch_size) -> a nested structure of tensors, each [B, ...].
      step(x_t, state): x_t [B, D] -> (h_t [B, H], new state of the same structure and
        shapes). Compiled with XLA (`step` below) and run inside compiled loops when dreaming:
        TensorFlow ops only, static shapes, no Python side effects. From `initial_state`, the
        steps over x[:, 0], x[:, 1], ... give `call(x)[:, t]` at every t (float rounding).
    Optional, read with getattr: `cell_size` (int, default 0) with `cell_state(state)` ->
    [B, cell_size] (a memory cell controllers may read, e.g. the LSTM's c);
    `compiles_with_xla` (default False): True makes the trainer compile the loss and
    gradients with XLA (`xla_training`).
    """

    def __init__(
        self,
        backbone: keras.layers.Layer,
        z_head: keras.layers.Layer,
        representation_size: int,
        action_size: int,
        predict_reward: bool = False,
        predict_done: bool = False,
        z_loss_weight: float = 1.0,
        reward_loss_weight: float = 1.0,
        done_loss_weight: float = 1.0,
        done_pos_weight: float = 10.0,
        difference_targets: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.supports_masking = True  # inputs may carry a Keras mask; masking is explicit here
        self.backbone = backbone
        self.z_head = z_head
        self._representation_size = int(representation_size)
        self._action_size = int(action_size)
        self.reward_head = keras.layers.Dense(1, name="reward_head") if predict_reward else None
        self.done_head = keras.layers.Dense(1, name="done_head") if predict_done else None
        self.loss_weights = {
            "z": float(z_loss_weight),
            "reward": float(reward_loss_weight) if predict_reward else 0.0,
            "done": float(done_loss_weight) if predict_done else 0.0,
        }
        self.done_pos_weight = float(done_pos_weight)
        self.difference_targets = bool(difference_targets)
        self._step_fn = None
        self._step_concrete = {}

    # ---- sizes ---------------------------------------------------------------------------------
    @property
    def representation_size(self) -> int:
        return self._representation_size

    @property
    def action_size(self) -> int:
        return self._action_size

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    @property
    def cell_size(self) -> int:
        return int(getattr(self.backbone, "cell_size", 0))

    def cell_state(self, state):
        if not self.cell_size:
            raise ValueError(f"{self.name} has no cell state (its backbone is not an LSTM).")
        return self.backbone.cell_state(state)

    @property
    def xla_training(self) -> bool:
        """True with an LSTM backbone on its CPU kernel (its speed:
        benchmarks/sequential_training.py); cuDNN's LSTM does not compile."""
        return bool(getattr(self.backbone, "compiles_with_xla", False))

    @property
    def has_reward_head(self) -> bool:
        return self.reward_head is not None

    @property
    def has_done_head(self) -> bool:
        return self.done_head is not None

    @property
    def loss_terms_used(self) -> list[str]:
        return [k for k, w in self.loss_weights.items() if w]

    def ensure_built(self) -> SequentialModel:
        """Builds all weights (call before `load_weights`)."""
        if not self.built or not self.backbone.built:
            self(tf.zeros([1, 1, self.representation_size + self.action_size]))
        return self

    # ---- full sequences ------------------------------------------------------------------------
    def _check_inputs(self, x):
        want = self.representation_size + self.action_size
        if x.shape[-1] is not None and x.shape[-1] != want:
            raise ValueError(
                f"{self.name} takes inputs [B, T, Z + A] = [B, T, {want}] "
                f"(Z={self.representation_size}, A={self.action_size}), got {x.shape}."
            )

    def call(self, x, mask=None, training=None):
        """x [B, T, Z + A], mask [B, T] -> prediction dict (see sequential.py)."""
        x = tf.convert_to_tensor(x, tf.float32)
        self._check_inputs(x)
        hidden = self.backbone(x, mask=mask, training=training)  # [B, T, H]
        out = self.predict_from_hidden(hidden)
        out["hidden"] = hidden
        return out

    def predict_from_hidden(self, hidden):
        out = dict(self.z_head(hidden))
        if self.reward_head is not None:
            out["reward"] = tf.squeeze(self.reward_head(hidden), -1)
        if self.done_head is not None:
            out["done_logits"] = tf.squeeze(self.done_head(hidden), -1)
        return out

    def get_hidden_representation(self, x, mask=None, training=None, position=-1):
        x = tf.convert_to_tensor(x, tf.float32)
        self._check_inputs(x)
        return self.backbone(x, mask=mask, training=training)[:, position]

    # ---- losses --------------------------------------------------------------------------------
    def loss_sums(self, batch: dict, predictions: dict) -> tuple[dict, dict]:
        """Per-term sums over valid positions and their counts (scalars).

        The trainer divides by counts summed over all replicas, so a global batch split
        across devices gives the same loss and gradients as on one device."""
        mask = tf.cast(batch["mask"], tf.float32)
        target_mask = tf.cast(batch.get("target_mask", batch["mask"]), tf.float32)

        def masked_sum(per_position, m):
            # tf.where, not multiply: padded positions may hold inf and inf * 0 = NaN.
            return tf.reduce_sum(tf.where(m > 0, per_position, 0.0))

        sums = {
            "z": masked_sum(
                self.z_head.per_position_loss(batch["targets"], predictions), target_mask
            )
        }
        counts = {"z": tf.reduce_sum(target_mask)}
        if self.reward_head is not None:
            err = tf.square(predictions["reward"] - tf.cast(batch["rewards"], tf.float32))
            sums["reward"], counts["reward"] = masked_sum(err, mask), tf.reduce_sum(mask)
        if self.done_head is not None:
            xent = tf.nn.weighted_cross_entropy_with_logits(
                labels=tf.cast(batch["dones"], tf.float32),
                logits=predictions["done_logits"],
                pos_weight=self.done_pos_weight,
            )
            sums["done"], counts["done"] = masked_sum(xent, mask), tf.reduce_sum(mask)
        return sums, counts

    def task_loss_sums(self, batch: dict, task, step, training=None) -> tuple[dict, dict]:
        """`loss_sums` of one training (or validation) batch for `task`
        (rl755.models.sequential.tasks) at training step `step` (a scalar tensor; the
        seed of a task's masks). Here: the autoregressive loss; models that train on other
        tasks override it."""
        del task, step
        predictions = self(batch["inputs"], mask=batch["mask"], training=training)
        return self.loss_sums(batch, predictions)

    def combine_loss_terms(self, terms: dict) -> tf.Tensor:
        """Weighted sum of per-term means. Keep it linear in the terms: the trainer adds it
        up over parts of a batch (rl755.models.sequential.sharding, batch_shards)."""
        return tf.add_n([self.loss_weights[k] * v for k, v in terms.items()])

    def get_loss_fn(self):
        def loss_fn(batch, predictions):
            sums, counts = self.loss_sums(batch, predictions)
            terms = {k: sums[k] / tf.maximum(counts[k], 1.0) for k in sums}
            return self.combine_loss_terms(terms)

        return loss_fn

    # ---- acting --------------------------------------------------------------------------------
    def initial_state(self, batch_size: int):
        return self.backbone.initial_state(batch_size)

    def _step(self, z, a, state):
        x = tf.concat([tf.cast(z, tf.float32), tf.cast(a, tf.float32)], axis=-1)
        return self.backbone.step(x, state)

    def step(self, z, a, state):
        """(z [B, Z], a [B, A], state) -> (hidden [B, H], new state).

        Compiled with XLA into one kernel launch per step. Called eagerly (acting), the
        concrete function for the input shapes is called directly: a tf.function's own
        dispatch (matching ~100 captured weights) costs about as much as a small model's
        step."""
        self.ensure_built()
        if self._step_fn is None:
            self._step_fn = tf.function(self._step, jit_compile=True)
            self._step_concrete = {}
        if tf.inside_function():
            return self._step_fn(z, a, state)
        z, a = tf.convert_to_tensor(z), tf.convert_to_tensor(a)
        return concrete_for(self._step_fn, self._step_concrete, z, a, state)(z, a, state)

    def sample_next(self, hidden, temperature=1.0, seed=None, z=None):
        out = self.predict_from_hidden(hidden)
        z_next = self.z_head.sample(out, temperature=temperature, seed=seed)
        if self.difference_targets:
            if z is None:
                raise ValueError(
                    f"{self.name} predicts differences z_(t+1) - z_t (difference_targets): "
                    "pass the current z to sample_next(hidden, ..., z=z_t)."
                )
            z_next = tf.cast(z, tf.float32) + z_next
        batch = tf.shape(hidden)[0]
        reward = out["reward"] if "reward" in out else tf.zeros([batch])
        done_prob = (
            self.done_probability(out["done_logits"]) if "done_logits" in out else tf.zeros([batch])
        )
        return {"z": z_next, "reward": reward, "done_prob": done_prob}


def deterministic_transformer(
    representation_size: int, action_size: int, name: str = "deterministic_transformer", **kwargs
) -> HeadedSequentialModel:
    """Causal sliding-window transformer predicting z_{t+1} by regression. Sizes by keyword:
    num_layers, model_dim, num_heads, window, intermediate_dim, dropout
    (`TRANSFORMER_SIZE_DEFAULTS` in transformer.py); the other keyword arguments go to the
    heads (`HeadedSequentialModel`)."""
    transformer_sizes, head_kwargs = split_transformer_sizes(kwargs)
    backbone = CausalTransformer(**transformer_sizes, name="transformer")
    z_head = DeterministicHead(representation_size, name="z_head")
    sizes = (representation_size, action_size)
    return HeadedSequentialModel(backbone, z_head, *sizes, name=name, **head_kwargs)


def deterministic_lstm(
    representation_size: int,
    action_size: int,
    units: int = 256,
    name: str = "deterministic_lstm",
    **head_kwargs,
) -> HeadedSequentialModel:
    """LSTM predicting z_{t+1} by regression."""
    backbone = LstmBackbone(units, name="lstm_backbone")
    z_head = DeterministicHead(representation_size, name="z_head")
    sizes = (representation_size, action_size)
    return HeadedSequentialModel(backbone, z_head, *sizes, name=name, **head_kwargs)


def mdn_rnn(
    representation_size: int,
    action_size: int,
    units: int = 256,
    num_components: int = 5,
    min_scale: float = 1e-3,
    name: str = "mdn_rnn",
    **head_kwargs,
) -> HeadedSequentialModel:
    """World Models MDN-RNN: LSTM + a `num_components` Gaussian mixture per latent dim."""
    backbone = LstmBackbone(units, name="lstm_backbone")
    z_head = MixtureDensityHead(representation_size, num_components, min_scale, name="mdn_head")
    sizes = (representation_size, action_size)
    return HeadedSequentialModel(backbone, z_head, *sizes, name=name, **head_kwargs)
