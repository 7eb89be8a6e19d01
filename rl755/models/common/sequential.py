"""The sequential model interface (stage 4).

Training (full sequences, teacher forcing), with batches from
`EncodedRolloutDatasetBuilder.get_autoregressive_slices`:

    model = rl755.models.catalogue.build("CAR_RACING", "transformer.base_deterministic_transformer")
    # batch["inputs"]: float32 [B, T, Z + A] = concat(z_t, a_t)
    predictions = model(batch["inputs"], mask=batch["mask"])         # dict, see below
    loss = model.get_loss_fn()(batch, predictions)                   # scalar, masked mean
    h = model.get_hidden_representation(batch["inputs"], position=-1)  # [B, H]

`model(x)` returns a dict of per-position predictions:
    "hidden":      [B, T, H]     the hidden representation (what a controller reads)
    "z":           [B, T, Z]     deterministic models: the predicted target
    "mdn_logits", "mdn_locs", "mdn_scales": [B, T, Z, K]   mixture models (MDN-RNN)
    "reward":      [B, T]        only with a reward head (predict_reward=True)
    "done_logits": [B, T]        only with an episode-end head (predict_done=True)
`model.predict_from_hidden(h)` gives the same dict (without "hidden") for h [..., H].

Acting and dreaming (incremental, O(1) work per step for recurrent models, a key/value
cache for transformers):

    state = model.initial_state(batch_size)                          # nested tensors
    h, state = model.step(z_t, a_t, state)                           # z_t [B, Z], a_t [B, A] -> h [B, H]
    nxt = model.sample_next(h, temperature=1.0, z=z_t)
    # {"z": [B, Z] next representation, "reward": [B], "done_prob": [B]}

`step` applied to the inputs of a sequence one position at a time gives the same hidden
representations as `get_hidden_representation(..., position=t)` on the full sequence (to
float rounding). `step` runs compiled with XLA (`tf.function(jit_compile=True)`, also inside
the dream's compiled loops): TensorFlow ops only, static shapes, a state whose structure and
shapes never change. Masks: `mask` [B, T] is 1 on real steps and 0 on the padding after them;
padded steps carry the state through unchanged, and no real position depends on them.

Optional attributes read with getattr on models or backbones: `cell_size` and
`cell_state(state)` (a memory cell [B, C] a controller may read), `compiles_with_xla`
(the trainer's XLA switch, `xla_training`). A new model is one file plus one registration
(rl755/models/registry.py, docs/guides/new-sequential-model.md); every registered model is
tested for all of the above by tests/test_registered_models.py.

Targets: a model trained with `--difference_targets` predicts z_{t+1} - z_t; its
`difference_targets` attribute is then True and `sample_next` needs the current `z` to
return the next representation itself (it always returns z_{t+1}, never the difference).
"reward" and "done_prob" are zeros when the model has no such head (`has_reward_head`,
`has_done_head` tell). "done_prob" is calibrated: a head trained with its positives weighted
w (`done_pos_weight`) predicts odds w times the real ones, and `done_probability` divides
them back out, so dreams that draw Bernoulli(done_prob) end as often as real episodes and a
threshold means the same on every head.

Beyond the weights: a model may keep data of its own in its model directory (a retrieval
model's nearest-neighbour index, rl755/models/retrieval/model.py). Stage 4 calls
`build_extras(model_dir, builder)` before training and every loader calls
`load_extras(model_dir)` after building the model; both do nothing by default.
`training_tasks` lists the stage-4 `--task` values the model trains on
(rl755/models/sequential/tasks.py).
"""

from __future__ import annotations

import abc
import math
from typing import Any

import keras
import tensorflow as tf


class SequentialModel(keras.Model, abc.ABC):
    """A keras.Model over [B, T, Z + A] sequences; see the module docstring."""

    #: True when the model predicts z_{t+1} - z_t (set by the trainer / saved_models).
    difference_targets: bool = False
    #: The weight of episode ends in its episode-end loss (1: plain cross-entropy).
    done_pos_weight: float = 1.0
    #: The `--task` values it trains on (rl755.models.sequential.tasks).
    training_tasks: tuple[str, ...] = ("autoregressive",)
    #: True when its training slices must carry "rollout_id" (`get_autoregressive_slices`).
    needs_rollout_ids: bool = False

    @property
    def xla_training(self) -> bool:
        """True when the trainer should compile the model's loss and gradients with XLA
        (`fit_sequential_model(jit_compile=None)`), giving the same losses. False by
        default."""
        return False

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

    @property
    def cell_size(self) -> int:
        """C, the size of `cell_state(state)`: an LSTM's memory cell (0: the model has none)."""
        return 0

    def cell_state(self, state: Any) -> tf.Tensor:
        """The memory cell of a step state: [B, C] (World Models' Doom controller reads z, h
        and the LSTM's c). Models without one raise ValueError."""
        raise ValueError(f"{type(self).__name__} has no cell state (cell_size is 0).")

    @property
    def has_reward_head(self) -> bool:
        return False

    @property
    def has_done_head(self) -> bool:
        return False

    @abc.abstractmethod
    def get_loss_fn(self):
        """`fn(batch, predictions) -> scalar`: the masked mean training loss.

        `batch` is a dict as from `get_autoregressive_slices` ("targets" [B, T, Z],
        "rewards" [B, T], "dones" [B, T], "mask" [B, T], "target_mask" [B, T]);
        `predictions` is `model(batch["inputs"])`."""

    @abc.abstractmethod
    def get_hidden_representation(
        self, x: tf.Tensor, mask: tf.Tensor | None = None, training=None, position: int = -1
    ) -> tf.Tensor:
        """x: [B, T, Z + A] -> hidden representation at `position`: [B, H]."""

    @abc.abstractmethod
    def initial_state(self, batch_size: int) -> Any:
        """The state before any step: a nested structure of tensors, each [B, ...]."""

    @abc.abstractmethod
    def step(self, z: tf.Tensor, a: tf.Tensor, state: Any) -> tuple[tf.Tensor, Any]:
        """One incremental step: (z [B, Z], a [B, A], state) -> (hidden [B, H], new state of
        the same structure and shapes). Compiled with XLA; agrees with the full pass (module
        docstring)."""

    def build_extras(self, model_dir: str, builder) -> None:
        """Writes what the model keeps beside its weights into `model_dir`, from the training
        rollouts of `builder` (an EncodedRolloutDatasetBuilder). Stage 4 runs it before
        training; rerun, it resumes or finds the work done. Nothing by default."""
        del model_dir, builder

    def load_extras(self, model_dir: str) -> None:
        """Loads what `build_extras` wrote (called by every loader of a trained model and by
        the trainer before its first step). Nothing by default."""
        del model_dir

    def done_probability(self, done_logits: tf.Tensor) -> tf.Tensor:
        """done_logits [...] (the head's output) -> P(the episode ends after this step) [...].

        Weighted cross-entropy with positive weight w is minimised by logit = log(w) +
        logit(p), where p is the real probability, so p = sigmoid(logit - log(w)): a head
        trained with ends weighted 10x says 0.5 where the data says 1/11."""
        shift = math.log(self.done_pos_weight)
        return tf.sigmoid(tf.cast(done_logits, tf.float32) - shift)

    def predict_from_hidden(self, hidden: tf.Tensor) -> dict:
        """hidden [..., H] -> the prediction dict of the module docstring (without "hidden")."""
        raise NotImplementedError(f"{type(self).__name__} has no prediction heads.")

    def sample_next(self, hidden: tf.Tensor, temperature: float = 1.0, seed=None, z=None) -> dict:
        """hidden [B, H] -> {"z": [B, Z], "reward": [B], "done_prob": [B]} (dream rollouts).

        Deterministic models return their prediction (temperature is ignored); mixture
        models sample at `temperature` (mixture logits / tau, std * sqrt(tau)). `seed`: an
        int or a shape-[2] int tensor for a stateless sample, None for a random one. `z`
        [B, Z], the current representation, is required when `difference_targets`."""
        raise NotImplementedError(f"{type(self).__name__} cannot sample next observations.")
