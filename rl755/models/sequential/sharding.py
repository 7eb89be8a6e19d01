"""Each replica's batch in parts, run side by side on the CPU cores (`batch_shards`).

    shards = sharding.choose_batch_shards(None, replica_batch=32, compiled=True, task=task)
    parts = sharding.split_batch(batch, shards)   # [B, ...] nests -> shards x [B / shards, ...]

Each part goes through its own compiled call of the model's loss, and TensorFlow's executor runs
independent calls on separate cores. The parts' loss sums and counts are added before the
division, so the loss and gradients equal one whole batch's (to float rounding).
"""

from __future__ import annotations

import os

import tensorflow as tf

from rl755.models.sequential import tasks

#: Automatic batch shards: at most this many, of at least this many sequences each.
MAX_AUTO_SHARDS = 8
MIN_SHARD_SEQUENCES = 4


def usable_cores() -> int:
    """CPU cores this process may run on (SLURM's and taskset's limits included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def choose_batch_shards(
    requested: int | None,
    replica_batch: int,
    compiled: bool,
    task: tasks.TrainingTask,
    replicas: int = 1,
    threads: int | None = None,
) -> int:
    """How many parts each replica's batch of `replica_batch` runs in (module docstring).

    `requested` (an int) is checked: a divisor of the replica's batch, and 1 unless the task is
    autoregressive (an infilling task draws its masks per batch, so equal parts would share
    them). None: 1 without XLA (`compiled`; on GPUs cuDNN's LSTM runs whole batches) or for
    other tasks; else the largest divisor of the batch up to the threads TensorFlow's executor
    runs at once (`threads`, default its inter-op pool: one per usable core unless set) shared
    by the `replicas` of this process, `MAX_AUTO_SHARDS`, and `MIN_SHARD_SEQUENCES` sequences a
    part."""
    if requested is not None:
        requested = int(requested)
        if requested < 1 or replica_batch % requested:
            raise ValueError(
                f"batch_shards={requested} must be a positive divisor of each replica's batch "
                f"({replica_batch}). Pass another value, or leave it unset to choose by cores."
            )
        if requested > 1 and task.name != tasks.AUTOREGRESSIVE:
            raise ValueError(
                f"batch_shards={requested} splits autoregressive batches only; task "
                f"{task.name!r} draws its masks per batch. Leave it unset or pass 1."
            )
        return requested
    if not compiled or task.name != tasks.AUTOREGRESSIVE:
        return 1
    if threads is None:
        threads = tf.config.threading.get_inter_op_parallelism_threads() or usable_cores()
    cap = min(threads // max(1, replicas), MAX_AUTO_SHARDS, replica_batch // MIN_SHARD_SEQUENCES)
    return max(d for d in range(1, max(cap, 1) + 1) if replica_batch % d == 0)


def split_batch(batch, shards: int) -> list:
    """A batch (a nest of [B, ...] tensors) -> `shards` nests of [B / shards, ...] slices, in
    order."""
    flat = tf.nest.flatten(batch)
    pieces = [tf.split(t, shards, axis=0) for t in flat]
    return [tf.nest.pack_sequence_as(batch, [p[i] for p in pieces]) for i in range(shards)]
