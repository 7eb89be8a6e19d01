"""CPU cost of each sequential model: training sequences per CPU-second, acting cost per step.

    python benchmarks/world_model_cost.py [--environment=CAR_RACING] [--batch_size=32] \
        [--sequence_length=32] [--acting_batch_size=1] [--context=128] [--num_threads=1]

At the stated shape (Z and A of the environment's models; training batch B x L; acting
batch and context), for each model (untrained weights: cost does not depend on them):
  - training: a compiled Adam step on a synthetic batch in memory; sequences per CPU-second
    (all threads' CPU time) and per wall second;
  - acting: the cached `step` (recurrent state / key-value cache, full after `context` steps),
    what the agent runs per environment step, CPU and wall ms per step.
Medians of the timed repeats. Library: rl755.evaluation.cost.
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", "CAR_RACING", "Environments enum name.")
flags.DEFINE_list(
    "models",
    [
        "transformer.tiny_deterministic_transformer",
        "transformer.base_deterministic_transformer",
        "lstm.deterministic_lstm",
        "mdn_rnn.mdn_rnn",
        "mdn_rnn.mdn_rnn_with_heads",
    ],
    "Sequential models of rl755.models.catalogue.",
)
flags.DEFINE_integer("batch_size", 32, "Training sequences per step.")
flags.DEFINE_integer("sequence_length", 32, "Training sequence length.")
flags.DEFINE_integer("train_steps", 10, "Timed training steps per model (after 3 warm-up).")
flags.DEFINE_integer("acting_batch_size", 1, "Environments acted on at once.")
flags.DEFINE_integer("context", 128, "Steps taken before timing acting (fills a cache).")
flags.DEFINE_integer("acting_steps", 50, "Timed acting steps per model.")
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size.")


def model_fn(environment: str, name: str):
    """The one name lookup: a sequential model of rl755.models.catalogue, sized for `environment`."""
    from rl755.models import catalogue

    return catalogue.model_fn(environment, name, kind=catalogue.SEQUENTIAL)


def main(argv):
    del argv
    tf_setup.limit_threads(FLAGS.num_threads)
    from rl755.evaluation import cost

    try:
        fns = {name: model_fn(FLAGS.environment, name) for name in FLAGS.models}  # fail fast
    except (LookupError, ValueError) as e:
        raise app.UsageError(str(e)) from e
    print(
        f"{FLAGS.environment}; training: batch {FLAGS.batch_size} x {FLAGS.sequence_length} steps; "
        f"acting: batch {FLAGS.acting_batch_size}, after {FLAGS.context} steps; medians"
    )
    header = (
        f"{'model':45s} {'params':>10s} {'train seq/CPU-s':>16s} {'train seq/s':>12s} "
        f"{'act CPU ms':>11s} {'act wall ms':>12s}"
    )
    print(header)
    print("-" * len(header))
    for name, fn in fns.items():
        t = cost.training_cost(fn, FLAGS.batch_size, FLAGS.sequence_length, FLAGS.train_steps)
        a = cost.acting_cost(fn, FLAGS.acting_batch_size, FLAGS.context, FLAGS.acting_steps)
        print(
            f"{name:45s} {t['params']:>10,d} {t['sequences_per_cpu_second']:>16.1f} "
            f"{t['sequences_per_second']:>12.1f} {a['cpu_ms_per_step']:>11.3f} "
            f"{a['wall_ms_per_step']:>12.3f}"
        )
        report(
            f"world_model_cost/{name}", "training sequences per CPU-s",
            t["sequences_per_cpu_second"], None, None, ratio=None,
            acting_cpu_ms=a["cpu_ms_per_step"],
        )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
