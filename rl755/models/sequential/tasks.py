"""Training tasks of sequential models (stage 4's `--task`): what one batch trains.

    task = resolve_task("mixed")                 # TrainingTask(name="mixed", infill_probability=0.5)
    hidden = task.infill_mask(batch["mask"], step)   # float32 [B, T]: 1 = this z_t is hidden
    task.is_infill_batch(step)                   # bool scalar tensor: this batch infills

Tasks:
    autoregressive  every batch predicts z_{t+1} (and reward, episode end) from the steps up to t
                    (teacher forcing). What every sequential model trains on.
    infill          every batch hides spans of latents z_t and predicts them from both sides
                    (models with an infilling head: transformer.*_infilling_transformer, see
                    rl755/models/infilling/model.py).
    mixed           each batch is an autoregressive or an infilling batch at random, infilling
                    with probability `infill_probability` (0.5).

A model lists the tasks it trains on in `SequentialModel.training_tasks`; the trainer refuses
the others before any training.

Randomness is stateless: masks and batch kinds are functions of (seed, training step, replica),
so a resumed run draws exactly what an uninterrupted one would have.

Spans: each sequence gets `num_spans` spans, each of a length uniform in 1..max_span with
max_span = max(1, round(max_span_fraction * T)), starting uniformly among the sequence's real
steps (a slice's real steps come first, then padding); a span is clipped to the real steps
(mask 1) and overlapping spans merge, so every sequence with a real step hides at least one. At T = 32 and the defaults
(2 spans of at most 8 steps) about 14 % of the steps are hidden.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

AUTOREGRESSIVE, INFILL, MIXED = "autoregressive", "infill", "mixed"
TASK_NAMES = (AUTOREGRESSIVE, INFILL, MIXED)
_INFILL_PROBABILITY = {AUTOREGRESSIVE: 0.0, INFILL: 1.0, MIXED: 0.5}
_MASK_SALT, _LENGTH_SALT, _KIND_SALT = 1, 2, 3


@dataclasses.dataclass(frozen=True)
class TrainingTask:
    """One training task (see the module docstring).

    Attributes:
      name: "autoregressive", "infill" or "mixed".
      infill_probability: probability that a batch is an infilling batch (0, 1, or between).
      num_spans: hidden spans per sequence in an infilling batch.
      max_span_fraction: the longest span, as a fraction of the sequence length.
      seed: seeds the masks and the batch kinds (with the step and the replica).
    """

    name: str
    infill_probability: float
    num_spans: int = 2
    max_span_fraction: float = 0.25
    seed: int = 0

    @property
    def infills(self) -> bool:
        """True when some batches are infilling batches."""
        return self.infill_probability > 0.0

    @property
    def only_infills(self) -> bool:
        return self.infill_probability >= 1.0

    def _seed(self, step, salt: int) -> tf.Tensor:
        """A stateless seed [2] from (seed, salt) and (step, replica)."""
        ctx = tf.distribute.get_replica_context()
        replica = ctx.replica_id_in_sync_group if ctx is not None else 0
        first = tf.constant(self.seed * 16 + salt, tf.int64)
        second = tf.cast(step, tf.int64) * 1024 + tf.cast(replica, tf.int64)
        return tf.stack([first, second])

    def is_infill_batch(self, step) -> tf.Tensor:
        """bool []: whether the batch of training step `step` infills."""
        u = tf.random.stateless_uniform([], self._seed(step, _KIND_SALT))
        return u < self.infill_probability

    def infill_mask(self, mask, step) -> tf.Tensor:
        """mask float [B, T] (1 = real step) -> float32 [B, T], 1 where z_t is hidden."""
        mask = tf.convert_to_tensor(mask)
        batch, steps = tf.shape(mask)[0], tf.shape(mask)[1]
        longest = tf.maximum(
            1, tf.cast(tf.round(self.max_span_fraction * tf.cast(steps, tf.float32)), tf.int32)
        )
        shape = tf.stack([batch, self.num_spans])
        real = tf.reduce_sum(tf.cast(mask > 0, tf.float32), axis=1, keepdims=True)  # [B, 1]
        u = tf.random.stateless_uniform(shape, self._seed(step, _MASK_SALT))
        starts = tf.cast(tf.floor(u * real), tf.int32)  # uniform over the real steps
        lengths = tf.random.stateless_uniform(
            shape, self._seed(step, _LENGTH_SALT), 1, longest + 1, dtype=tf.int32
        )
        pos = tf.range(steps)[None, None, :]  # [1, 1, T]
        inside = (pos >= starts[..., None]) & (pos < (starts + lengths)[..., None])  # [B, S, T]
        hidden = tf.reduce_any(inside, axis=1) & (tf.cast(mask, tf.float32) > 0)
        return tf.cast(hidden, tf.float32)


def resolve_task(name: str, **kwargs) -> TrainingTask:
    """The task `name` (strict: an unknown name raises ValueError listing the valid ones);
    kwargs override the span settings or the seed."""
    if name not in _INFILL_PROBABILITY:
        raise ValueError(f"Unknown --task={name!r}; valid: {', '.join(TASK_NAMES)}.")
    return TrainingTask(name=name, infill_probability=_INFILL_PROBABILITY[name], **kwargs)


def check_model_trains_on(model, task: TrainingTask) -> None:
    """Fails when `model` cannot train on `task` (before any training)."""
    tasks = tuple(getattr(model, "training_tasks", (AUTOREGRESSIVE,)))
    if task.name not in tasks:
        raise ValueError(
            f"--task={task.name}: model {model.name} trains on {', '.join(tasks)} only. "
            "Infilling needs a model with an infilling head, e.g. "
            "transformer.tiny_infilling_transformer (rl755.models.catalogue)."
        )
