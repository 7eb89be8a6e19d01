"""Prints the TFRecord files matching --pattern that cannot be read to the end.

    python scripts/data_gen/find_corrupted_tfrecords.py \
        --pattern="$HOME/rl755_data/car_racing/raw_rollouts/rollouts-*.tfrecord-*"
    # then, only if you want to: --delete, or --quarantine_dir=/some/dir to move them away

Reads every record of every file (any compression). Exit status 0 if all are healthy, 1 if
any is corrupted, 2 on bad flags. Library: rl755.data_gen.corrupted.
"""

import sys

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("pattern", None, "Glob of the files to check (quote it).")
flags.DEFINE_bool("delete", False, "Delete the corrupted files.")
flags.DEFINE_string("quarantine_dir", None, "Move the corrupted files into this directory.")
flags.mark_flag_as_required("pattern")


def main(argv):
    del argv
    from rl755.common.errors import BadInput
    from rl755.data_gen.corrupted import dispose_corrupted, find_corrupted_tfrecords

    try:
        if FLAGS.delete and FLAGS.quarantine_dir:
            raise BadInput("Pass either --delete or --quarantine_dir, not both.")
        corrupted, checked = find_corrupted_tfrecords(FLAGS.pattern)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path, reason in corrupted:
        print(f"{path}\t{reason}")
    print(f"{len(corrupted)} of {checked} files corrupted.", file=sys.stderr)
    for line in dispose_corrupted(corrupted, FLAGS.delete, FLAGS.quarantine_dir):
        print(line, file=sys.stderr)
    return 1 if corrupted else 0


if __name__ == "__main__":
    app.run(main)
