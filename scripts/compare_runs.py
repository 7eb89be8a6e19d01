"""Compares two pipeline runs stage by stage: which stage's outputs first differ, and by how much.

    python scripts/pipeline.py --preset=tiny --seed=3 --out_dir=/tmp/A
    python scripts/pipeline.py --preset=tiny --seed=3 --out_dir=/tmp/B
    python scripts/compare_runs.py /tmp/A /tmp/B --preset=tiny
    python scripts/compare_runs.py /tmp/C /tmp/D --preset=tiny --environment=CATCH

Prints one row per stage (identical, or the first differing file, array and the largest
absolute difference) and exits 1 if any stage differs. Library: rl755.pipeline.compare.
"""

import sys

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "demo", "The preset both runs used (scripts/pipeline.py --preset).")
flags.DEFINE_string(
    "environment", None, "The --environment both runs used (default: the preset's own)."
)


def main(argv):
    if len(argv) != 3:
        raise app.UsageError("Give two run directories: compare_runs.py <out_dir A> <out_dir B>.")
    from rl755 import pipeline
    from rl755.pipeline import compare

    diffs = compare.compare_runs(
        argv[1], argv[2], pipeline.get_preset(FLAGS.preset, FLAGS.environment)
    )
    print(compare.format_diffs(diffs))
    first = compare.first_difference(diffs)
    if first is not None:
        print(f"First difference: stage {first.stage} ({first.detail}).")
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
