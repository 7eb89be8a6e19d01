"""Encoder training images/s fed by the real TFRecord pipeline vs. in-memory tensors.

    python benchmarks/encoder_training.py [--batch_size=100 --steps=20 --repeats=5]

Both feed the SAME compiled Keras train function of the World Models ConvVAE (CarRacing,
Z = 32) in one process, interleaved repeat by repeat:
  pipeline:  RawRollouts-style shards of real CarRacing frames (GZIP TFRecords, 1000-frame
             rollouts) -> random_rollout_observations(obs_sampled_per_rollout=100) ->
             shuffle(1000) -> batch -> prefetch (rl755.models.encoders.train)
  in-memory: one uint8 batch already in memory, repeated (no input pipeline at all)
Prints the median images/s of each and their ratio (target >= 0.95: the input pipeline
is not the bottleneck), and the same per CPU-second of the process (includes the tf.data
threads; on a shared machine this varies less than wall time).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 100, "Frames per batch (the paper: 100).")
flags.DEFINE_integer("steps", 20, "Training steps per timed repeat.")
flags.DEFINE_integer("repeats", 5, "Timed repeats of each feed (median reported).")
flags.DEFINE_integer("num_files", 4, "Shard files.")
flags.DEFINE_integer("rollouts_per_file", 3, "Rollouts per shard.")
flags.DEFINE_string("compression", "GZIP", "Shard compression: none, GZIP, ZLIB.")
flags.DEFINE_integer("obs_sampled_per_rollout", 100, "As the training script's flag.")
flags.DEFINE_integer("num_threads", None, "TF intra-op threads (default: TF decides).")


def main(argv):
    del argv
    import keras
    import tensorflow as tf
    from car_racing_frames import play_frames, write_rollouts

    from rl755.common import sharded_io, tf_setup
    from rl755.data.car_racing.raw_rollouts import RawRollouts
    from rl755.models import catalogue
    from rl755.models.encoders.train import observation_batches

    tf_setup.limit_threads(FLAGS.num_threads)
    tmp = tempfile.mkdtemp(prefix="bench_enc_train_")
    t = time.time()
    frames = play_frames(400)
    n = write_rollouts(
        tmp, frames, FLAGS.num_files, FLAGS.rollouts_per_file, 1000, FLAGS.compression
    )
    print(
        f"data: {n} frames in {FLAGS.num_files} {sharded_io.normalize_compression(FLAGS.compression) or 'plain'} shards "
        f"({time.time() - t:.1f} s to play and write)"
    )
    builder = RawRollouts(tfrecords_pattern=os.path.join(tmp, "rollouts-{split}*.tfrecord-*"))
    pipeline = iter(
        observation_batches(builder, "train", FLAGS.batch_size, FLAGS.obs_sampled_per_rollout)
    )
    batch = next(iter(observation_batches(builder, "train", FLAGS.batch_size, 100)))
    in_memory = iter(tf.data.Dataset.from_tensors(batch).repeat())

    vae = catalogue.build("CAR_RACING", "vae.Vae").build_for_frames()
    vae.compile(optimizer=keras.optimizers.Adam(1e-4), loss=vae.get_loss_fn())
    vae.make_train_function()
    train_function = vae.train_function
    for it in (pipeline, in_memory):  # warm up: tracing, shuffle buffer fill
        for _ in range(3):
            train_function(it)

    def timed(it) -> tuple[float, float]:
        """(images per wall second, images per CPU second of the whole process)."""
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(FLAGS.steps):
            logs = train_function(it)
        float(logs["loss"])  # wait for the last step
        n = FLAGS.steps * FLAGS.batch_size
        return n / (time.perf_counter() - start), n / (time.process_time() - cpu)

    rates = {"pipeline": [], "in_memory": []}
    cpu_rates = {"pipeline": [], "in_memory": []}
    for r in range(FLAGS.repeats):
        for name, it in (("pipeline", pipeline), ("in_memory", in_memory)):
            wall, cpu = timed(it)
            rates[name].append(wall)
            cpu_rates[name].append(cpu)
        print(
            f"repeat {r}: pipeline {rates['pipeline'][-1]:.0f} img/s "
            f"({cpu_rates['pipeline'][-1]:.0f} per CPU-s), in-memory "
            f"{rates['in_memory'][-1]:.0f} img/s ({cpu_rates['in_memory'][-1]:.0f} per CPU-s)"
        )
    start = time.perf_counter()
    for _ in range(FLAGS.steps):
        next(pipeline)
    alone = FLAGS.steps * FLAGS.batch_size / (time.perf_counter() - start)
    print(f"the input pipeline alone (no training): {alone:.0f} img/s")
    p, m = statistics.median(rates["pipeline"]), statistics.median(rates["in_memory"])
    pc, mc = statistics.median(cpu_rates["pipeline"]), statistics.median(cpu_rates["in_memory"])
    print(
        f"CPU cost (process CPU time, less sensitive to other jobs): pipeline {pc:.0f} img/CPU-s, "
        f"in-memory {mc:.0f} img/CPU-s, ratio {pc / mc:.3f}"
    )
    print(
        f"encoder training (ConvVAE Z=32, batch {FLAGS.batch_size}, {FLAGS.steps} steps x "
        f"{FLAGS.repeats}): TFRecord pipeline {p:.0f} img/s, in-memory {m:.0f} img/s, "
        f"ratio {p / m:.3f} (target >= 0.95)"
    )
    report(
        f"encoder_training/{FLAGS.compression}", "img/s, TFRecord pipeline", p,
        "img/s, in-memory batch", m, ratio=p / m, target=0.95, cpu_ratio=pc / mc,
    )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
