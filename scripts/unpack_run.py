"""Unpacks an archive of scripts/pack_run.py into a new directory and resumes the run there.

    python scripts/unpack_run.py --archive=doom.tar.gz --out_dir=/scratch/me/doom
    python scripts/unpack_run.py --archive=doom.tar.gz --out_dir=/scratch/me/doom --noresume
    # then on SLURM: python scripts/pipeline.py --preset=doom_dream --launcher=slurm \
    #     --out_dir=/scratch/me/doom

Resuming collects the raw rollouts again (same seeds, same rollouts), skips the finished
steps and continues the interrupted one, as rerunning the run's scripts/pipeline.py command
does. See docs/guides/recipes.md and rl755/pipeline/pack.py.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("archive", None, "An archive written by scripts/pack_run.py.")
flags.DEFINE_string("out_dir", None, "A new (or empty) directory for the run.")
flags.DEFINE_bool("resume", True, "Resume the run here once unpacked (locally).")
for _name in ("archive", "out_dir"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common.errors import BadInput
    from rl755.pipeline.pack import resume_unpacked, unpack_run

    try:
        manifest = unpack_run(FLAGS.archive, FLAGS.out_dir)
    except BadInput as e:
        print(f"scripts/unpack_run.py: {e}", file=sys.stderr)
        return 2
    print(f"Unpacked {len(manifest['files'])} files into {FLAGS.out_dir}.")
    if FLAGS.resume:
        resume_unpacked(manifest, FLAGS.out_dir)
    return 0


if __name__ == "__main__":
    app.run(main)
