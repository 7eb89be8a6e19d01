"""Where collection workers put their rollouts: `RolloutSink`s that run inside the worker.

    sink = TFRecordShardSink(out_dir, "GZIP")   # each task -> the shard <out_dir>/<task.key>
    sink = PickleSink(out_dir)                  # each task (one rollout) -> a pickled [Rollout]

A sink publishes a task's output only when it is complete (`sharded_io.atomic_output`), so a
killed or retried worker leaves no partial file under a final name, and `is_done` lets a
rerun skip what exists.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.common.structs import Rollout
from rl755.data_gen.rollout_tasks import RolloutSink, RolloutTask
from rl755.data_gen.shards import record_bytes


def _tfrecord_writer(path: str, compression: str):
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type=sharded_io.normalize_compression(compression))
    return tf.io.TFRecordWriter(path, options=options)


class TFRecordShardSink(RolloutSink):
    """Writes each task's rollouts, in order, to the shard `<out_dir>/<task.key>`."""

    def __init__(self, out_dir: str, compression: str = "GZIP"):
        self.out_dir = out_dir
        self.compression = sharded_io.normalize_compression(compression)

    def is_done(self, task: RolloutTask) -> bool:
        return os.path.exists(os.path.join(self.out_dir, task.key))

    def write(self, task: RolloutTask, rollouts: Iterator[Rollout]) -> dict:
        path = os.path.join(self.out_dir, task.key)
        n = frames = 0
        with sharded_io.atomic_output(path) as tmp:
            with _tfrecord_writer(tmp, self.compression) as w:
                for r in rollouts:
                    w.write(record_bytes(r))
                    n += 1
                    frames += len(r)
        return {"path": path, "rollouts": n, "frames": frames, "bytes": os.path.getsize(path)}


class PickleSink(RolloutSink):
    """Writes each rollout of a task to `<out_dir>/<task.key>` as a pickled `[Rollout]`.

    Tasks have one rollout each (the original project's format: one list per file).
    `metadata` (e.g. the environment and policy names) is added to each rollout's metadata.
    """

    def __init__(self, out_dir: str, metadata: dict | None = None):
        self.out_dir = out_dir
        self.metadata = dict(metadata or {})

    def is_done(self, task: RolloutTask) -> bool:
        return os.path.exists(os.path.join(self.out_dir, task.key))

    def write(self, task: RolloutTask, rollouts: Iterator[Rollout]) -> dict:
        if len(task.items) != 1:
            raise BadInput("PickleSink tasks hold exactly one rollout.")
        path = os.path.join(self.out_dir, task.key)
        frames = nbytes = 0
        for r in rollouts:
            r.metadata.update(self.metadata)
            with sharded_io.atomic_output(path) as tmp:
                with open(tmp, "wb") as f:
                    pickle.dump([r], f, protocol=pickle.HIGHEST_PROTOCOL)
            frames += len(r)
            nbytes += os.path.getsize(path)
        return {"path": path, "rollouts": 1, "frames": frames, "bytes": nbytes}
