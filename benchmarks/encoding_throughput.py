"""Stage 3 encoding observations/s: rollout files in, encoded files out, vs. the bare model.

    python benchmarks/encoding_throughput.py [--repeats=3 --compression=GZIP]

In one process, interleaved repeat by repeat:
  files:     rl755.data_gen.encode.encode_raw_rollouts on shards of real CarRacing frames
             (1000-frame rollouts): read, parse, encode (ConvVAE Z = 32), serialize, write;
             its own timing excludes the one-off model loading
  in-memory: the same tf.function encoder on the same number of frames already in memory
Prints the median frames/s of each and their ratio.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 3, "Timed repeats (median reported).")
flags.DEFINE_integer("num_files", 2, "Input shard files.")
flags.DEFINE_integer("rollouts_per_file", 2, "Rollouts per shard (1000 frames each).")
flags.DEFINE_string("compression", "GZIP", "Input shard compression: none, GZIP, ZLIB.")
flags.DEFINE_integer("batch_size", 500, "Frames per encoder call.")
flags.DEFINE_integer("num_threads", None, "TF intra-op threads (default: TF decides).")


def main(argv):
    del argv
    import numpy as np
    from car_racing_frames import play_frames, write_rollouts

    from rl755.common import checkpoints, sharded_io, tf_setup
    from rl755.data_gen import encode
    from rl755.environments import Environments
    from rl755.models import catalogue

    tf_setup.limit_threads(FLAGS.num_threads)
    tmp = tempfile.mkdtemp(prefix="bench_encode_")
    frames = play_frames(400)
    raw_dir = os.path.join(tmp, "raw")
    n = write_rollouts(
        raw_dir, frames, FLAGS.num_files, FLAGS.rollouts_per_file, 1000, FLAGS.compression
    )
    model_dir = os.path.join(tmp, "vae")
    vae = catalogue.build("CAR_RACING", "vae.Vae").build_for_frames()
    checkpoints.save_checkpoint(
        model_dir,
        1,
        vae,
        {"model": "vae.Vae", "environment": "CAR_RACING", "representation_size": 32},
    )
    encode_fn = encode.make_encode_fn(
        vae, Environments.CAR_RACING.observation_shape, FLAGS.batch_size
    )
    memory = frames[np.random.default_rng(0).integers(0, len(frames), 1000)]
    encode_fn(memory)  # trace

    def files_rate(r: int) -> float:
        out = os.path.join(tmp, f"out{r}")
        res = encode.encode_raw_rollouts(
            "CAR_RACING", "vae.Vae", "train", out, "encoded", num_sub_shards=2,
            model_dir=model_dir, batch_size=FLAGS.batch_size,
            rollouts_pattern=os.path.join(raw_dir, "rollouts-{split}*.tfrecord-*"),
        )  # fmt: skip
        shutil.rmtree(out)
        assert res.frames == n
        return res.frames / res.seconds

    def memory_rate() -> float:
        start = time.perf_counter()
        for _ in range(n // len(memory)):
            encode_fn(memory)
        return n // len(memory) * len(memory) / (time.perf_counter() - start)

    files_rate(-1)  # warm up
    rates = {"files": [], "memory": []}
    for r in range(FLAGS.repeats):
        rates["files"].append(files_rate(r))
        rates["memory"].append(memory_rate())
        print(
            f"repeat {r}: files {rates['files'][-1]:.0f} frames/s, "
            f"in-memory {rates['memory'][-1]:.0f} frames/s"
        )
    f, m = statistics.median(rates["files"]), statistics.median(rates["memory"])
    print(
        f"encoding (ConvVAE Z=32, {n} frames, {sharded_io.normalize_compression(FLAGS.compression) or 'plain'} input, batch "
        f"{FLAGS.batch_size}): files in/out {f:.0f} frames/s, in-memory model {m:.0f} frames/s, "
        f"ratio {f / m:.3f}"
    )
    report(
        f"encoding_throughput/{FLAGS.compression}", "frames/s, files in and out", f,
        "frames/s, encoder on frames in memory", m, ratio=f / m, target=0.5,
    )  # fmt: skip
    shutil.rmtree(tmp)


if __name__ == "__main__":
    app.run(main)
