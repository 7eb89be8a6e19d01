"""The data of stage 4: slices of encoded rollouts, checked against the model, batched per replica.

    dataset_fn = data.autoregressive_dataset_fn(builder, sequence_length=32)
    train_iter, val_iter = data.distributed_batches(strategy, dataset_fn, model, 64, 10)

`dataset_fn(split)` returns unbatched slice dicts as from
`EncodedRolloutDatasetBuilder.get_autoregressive_slices` ("inputs" [L, Z + A], "targets" [L, Z],
"rewards", "dones", "mask", "target_mask" [L], and "rollout_id" [] for models that need it),
repeating. `batch_size` is the global batch, split across the strategy's replicas.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import tensorflow as tf

from rl755.models.common.sequential import SequentialModel

log = logging.getLogger(__name__)


def autoregressive_dataset_fn(
    builder,
    sequence_length: int,
    sample_observations: bool = False,
    difference_targets: bool = False,
    shuffle_buffer: int = 256,
    slice_start: str = "uniform",
    rollout_ids: bool = False,
) -> Callable[[str], tf.data.Dataset]:
    """`split -> get_autoregressive_slices(...)` with a shuffle buffer over slices."""

    def dataset_fn(split: str) -> tf.data.Dataset:
        ds = builder.get_autoregressive_slices(
            sequence_length,
            split=split,
            sample_observations=sample_observations,
            difference_targets=difference_targets,
            repeat=True,
            slice_start=slice_start,
            rollout_ids=rollout_ids,
        )
        return ds.shuffle(shuffle_buffer) if shuffle_buffer > 1 else ds

    return dataset_fn


def warn_if_episodes_are_cut(
    builder, sequence_length: int, slice_start: str, split: str = "train", sample: int = 64
) -> tuple[int, int, int]:
    """With `slice_start="episode_start"`, a rollout's steps after the first `sequence_length`
    (its end included) are never trained on. Reads up to `sample` rollouts of `split` (in file
    order) and logs a warning naming how many are longer and the longest. Returns (longer,
    read, longest steps); (0, 0, 0) for other slice starts, which read nothing."""
    if slice_start != "episode_start":
        return 0, 0, 0
    lengths = [
        int(tf.shape(r["actions"])[0])
        for r in builder.rollouts_ds(split, shuffle_files=False).take(sample)
    ]
    longer = sum(n > sequence_length for n in lengths)
    longest = max(lengths, default=0)
    if longer:
        log.warning(
            "%d of the first %d %s rollouts are longer than --sequence_length=%d (the longest: "
            "%d steps). With --slice_start=episode_start their later steps and their ends are "
            "never trained on, so the model's dreams know nothing of that part of an episode. "
            "Raise --sequence_length to cover the episodes a controller should live through, "
            "or use --slice_start=uniform.",
            longer,
            len(lengths),
            split,
            sequence_length,
            longest,
        )
    return longer, len(lengths), longest


def check_sizes(model: SequentialModel, representation_size: int, action_size: int, what: str):
    """Fails fast when the data's Z or A differ from the model's."""
    if (model.representation_size, model.action_size) != (representation_size, action_size):
        raise ValueError(
            f"{what} holds representations of size {representation_size} and actions of size "
            f"{action_size}, but model {model.name} expects Z={model.representation_size}, "
            f"A={model.action_size}. Pick a model built for this dataset (e.g. pass "
            "representation_size= to its constructor) or another dataset."
        )


def check_element_spec(model: SequentialModel, ds: tf.data.Dataset) -> None:
    """Fails fast when the dataset's elements lack keys or have the wrong Z or A."""
    spec = ds.element_spec
    missing = {"inputs", "targets", "mask"} - set(spec)
    if missing:
        raise ValueError(f"dataset elements lack keys {sorted(missing)}; got {sorted(spec)}.")
    z = spec["targets"].shape[-1]
    a = spec["inputs"].shape[-1] - z
    check_sizes(model, int(z), int(a), "The dataset")


def distributed_batches(
    strategy, dataset_fn, model: SequentialModel, batch_size: int, validation_steps: int
):
    """(train iterator, validation iterator or None) of global batches over the replicas."""
    train_ds = dataset_fn("train")
    check_element_spec(model, train_ds)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_ds = train_ds.batch(batch_size, drop_remainder=True).with_options(options)
    train_iter = iter(strategy.experimental_distribute_dataset(train_ds.prefetch(2)))
    if validation_steps <= 0:
        return train_iter, None
    try:
        val_ds = dataset_fn("validation")
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{e} Or pass --validation_steps=0 to train without validation."
        ) from e
    val_ds = val_ds.batch(batch_size, drop_remainder=True)
    return train_iter, iter(strategy.experimental_distribute_dataset(val_ds.with_options(options)))
