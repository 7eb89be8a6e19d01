"""A tiny stage run in a fresh interpreter vs forked from the test suite's warm one.

    python benchmarks/stage_startup.py --repeats=3

The stage: `scripts/data_gen/collect_rollouts.py` writing 2 FAKE_PIXELS rollouts of 8 steps
as TFRecords, the size of a test's stage, so nearly all of its time is starting: importing
TensorFlow, Keras, TFP and Ray, and ending the process. Side by side, interleaved, `repeats`
times after one warm-up of each: the real interpreter, and the shim of
`rl755.testing.warm_python` (each script a fork of a server that has imported them). Prints
the median wall time of each and the ratio fresh / warm; `same_output` says whether both
wrote the same files, byte for byte.
"""

import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_result import report  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("repeats", 3, "Timed runs of each side (after one warm-up of each).")

STAGE = os.path.join(REPO, "scripts", "data_gen", "collect_rollouts.py")


def _run(python: str, out_dir: str) -> float:
    argv = [
        python, STAGE, "--environment=FAKE_PIXELS", "--policy=RandomPolicy",
        "--num_rollouts=2", "--max_steps=8", "--rollouts_per_shard=2", "--seed=1",
        "--out_format=tfrecord", f"--out_dir={out_dir}",
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return seconds


def _same(a: str, b: str) -> bool:
    names = sorted(f for f in os.listdir(a) if f.startswith("rollouts-"))
    if not names or names != sorted(f for f in os.listdir(b) if f.startswith("rollouts-")):
        return False
    return all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


def main(argv):
    del argv
    from rl755.testing import warm_python

    with tempfile.TemporaryDirectory() as tmp:
        server = warm_python.start(os.path.join(tmp, "warm"))
        try:
            if not warm_python.wait_until_ready(server):
                raise RuntimeError(f"the warm server did not start: {tmp}/warm/server.log")
            times = {"fresh": [], "warm": []}
            same = True
            for i in range(FLAGS.repeats + 1):
                dirs = {}
                for side, python in (("fresh", server.real_python), ("warm", server.shim)):
                    dirs[side] = os.path.join(tmp, f"{side}{i}")
                    seconds = _run(python, dirs[side])
                    if i > 0:  # the first of each is the warm-up
                        times[side].append(seconds)
                same = same and _same(dirs["fresh"], dirs["warm"])
        finally:
            server.stop()
    fresh, warm = (statistics.median(times[k]) for k in ("fresh", "warm"))
    print(f"tiny collect stage: fresh interpreter {fresh:.2f} s, warm fork {warm:.2f} s "
          f"(medians of {FLAGS.repeats}); {fresh / warm:.1f}x; same output: {same}")  # fmt: skip
    report(
        "stage_startup/collect_rollouts",
        "tiny stage s, forked warm",
        round(warm, 3),
        "tiny stage s, fresh interpreter",
        round(fresh, 3),
        ratio=round(fresh / warm, 2),
        target=5.0,
        same_output=same,
    )


if __name__ == "__main__":
    app.run(main)
