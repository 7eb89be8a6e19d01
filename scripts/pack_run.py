"""Packs a run of scripts/pipeline.py (a preset or a recipe) into one archive, to continue it
on another machine with scripts/unpack_run.py.

    python scripts/pack_run.py --out_dir=runs/doom --archive=/scratch/me/doom.tar.gz

Everything the run made goes in except the raw rollouts (the collection steps make them again
from their seeds and flags), killed writers' temporary files and SLURM chain records. See
docs/guides/recipes.md and rl755/pipeline/pack.py.
"""

import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("out_dir", None, "The run's --out_dir.")
flags.DEFINE_string("archive", None, "The archive to write (.tar.gz), outside --out_dir.")
for _name in ("out_dir", "archive"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common.errors import BadInput
    from rl755.pipeline.pack import pack_run

    try:
        manifest = pack_run(FLAGS.out_dir, FLAGS.archive)
    except BadInput as e:
        print(f"scripts/pack_run.py: {e}", file=sys.stderr)
        return 2
    print(f"Packed {len(manifest['files'])} files into {FLAGS.archive}.")
    for left in manifest["left_out"]:
        print(f"  left out (collected again on resuming): {left}")
    return 0


if __name__ == "__main__":
    app.run(main)
