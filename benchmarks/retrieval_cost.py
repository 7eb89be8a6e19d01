"""Acting cost per step of a retrieval transformer against the same transformer without it.

    python benchmarks/retrieval_cost.py [--environment=CAR_RACING] [--preset=small] \
        [--index_windows=1000,10000,100000] [--contexts=10,100,1000] [--num_threads=1]

For each index size (windows of synthetic encoded rollouts of 1000 steps, built by stage 4's
`build_index` with the preset's settings: an exact "Flat" index up to 20,000 windows, an
"IVF" one above) and each context (steps already taken in the episode), the cached `step`
(what the agent and the dream run per environment step) of
transformer.<preset>_retrieval_transformer and of transformer.<preset>_deterministic_transformer
is timed, interleaved round by round (rl755.evaluation.cost.acting_cost, untrained weights),
and the ratio of the medians printed. The cost should not grow with the context (a bounded
cost per step) and grow slowly with the index (IVF probes `nprobe` lists).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile

import numpy as np
from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", "CAR_RACING", "Environments enum name (its Z and A).")
flags.DEFINE_enum("preset", "small", ["tiny", "small", "base"], "Transformer size preset.")
flags.DEFINE_list("index_windows", ["1000", "10000", "100000"], "Index sizes (windows).")
flags.DEFINE_list("contexts", ["10", "100", "1000"], "Steps taken before timing.")
flags.DEFINE_integer("rounds", 3, "Interleaved rounds per (size, context).")
flags.DEFINE_integer("steps", 30, "Timed steps per round.")
flags.DEFINE_integer("num_threads", 1, "TensorFlow thread pool size.")


def synthetic_index(directory, env, settings, windows: int) -> str:
    """Encoded rollouts of 1000 random steps enough for `windows` windows, and their index
    (in <directory>/retrieval_index, as stage 4 builds it); returns `directory`."""
    from rl755.common import sharded_io
    from rl755.common.structs import Rollout
    from rl755.evaluation.run import PatternRollouts
    from rl755.models.retrieval.index import build_index
    from rl755.models.retrieval.model import index_dir

    z, a = env.presets.representation_size, env.action_size
    rng = np.random.default_rng(0)
    n = max(1, -(-windows * settings.stride // 999))
    rollouts = [
        Rollout(
            list(rng.normal(size=(1000, z)).astype(np.float32)),
            list(rng.uniform(-1, 1, (1000, a)).astype(np.float32)),
            list(np.zeros(1000)),
        ).serialize()
        for _ in range(n)
    ]
    data = os.path.join(directory, "data")
    os.makedirs(data, exist_ok=True)
    sharded_io.write_tfrecord(os.path.join(data, sharded_io.shard_name("e-train", 0, 1)), rollouts)
    sharded_io.write_dataset_info(
        data, {"environment": env.name, "representation_size": z, "has_std_devs": False}
    )
    builder = PatternRollouts(env, os.path.join(data, "e-{split}*.tfrecord-*"))
    settings = dataclasses.replace(settings, max_windows=windows)
    build_index(builder, index_dir(directory), settings, z, a)
    return directory


def main(argv):
    del argv
    from rl755.environments import Environments
    from rl755.evaluation.cost import acting_cost
    from rl755.models import catalogue
    from rl755.models.retrieval.model import RETRIEVAL_PRESETS

    tf_setup.limit_threads(FLAGS.num_threads)
    env = Environments.from_name(FLAGS.environment)
    plain_name = f"transformer.{FLAGS.preset}_deterministic_transformer"
    retrieval_name = f"transformer.{FLAGS.preset}_retrieval_transformer"
    print(
        f"{env.name}, {FLAGS.preset}: ms per step (CPU), batch 1, medians of {FLAGS.rounds} rounds"
    )
    print(
        f"{'windows':>8} {'context':>8} {'index':>16} {'plain':>8} {'retrieval':>10} {'ratio':>6}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in FLAGS.index_windows):
            settings = dataclasses.replace(RETRIEVAL_PRESETS[FLAGS.preset], max_windows=size)
            model_dir = synthetic_index(os.path.join(tmp, str(size)), env, settings, size)

            def retrieval(model_dir=model_dir, settings=settings):
                model = catalogue.build(env, retrieval_name, retrieval=settings)
                model.load_extras(model_dir)
                return model

            def plain():
                return catalogue.build(env, plain_name)

            index = retrieval().backbone.memory.info["faiss_index"]
            for context in (int(c) for c in FLAGS.contexts):
                times = {"plain": [], "retrieval": []}
                for _ in range(FLAGS.rounds):
                    for label, fn in (("plain", plain), ("retrieval", retrieval)):
                        cost = acting_cost(fn, 1, context, FLAGS.steps, warmup=3)
                        times[label].append(cost["cpu_ms_per_step"])
                p, r = (statistics.median(times[k]) for k in ("plain", "retrieval"))
                print(f"{size:>8} {context:>8} {index:>16} {p:>8.2f} {r:>10.2f} {r / p:>6.2f}")
                report(
                    f"retrieval_cost/{size}w/context{context}", "retrieval step, CPU ms", r,
                    "plain transformer step, CPU ms", p, ratio=r / p, target=2.0, better="lower",
                )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
