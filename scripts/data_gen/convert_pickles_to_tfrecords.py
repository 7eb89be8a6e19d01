"""Stage 1b: convert a directory of pickled rollouts into sharded TFRecords.

    python scripts/data_gen/convert_pickles_to_tfrecords.py --parallelism=4 \
        --pickles_per_tfrecord_file=16 --pickle_dir=$HOME/rl755_data/car_racing/rollout_pickles \
        --out_dir=$HOME/rl755_data/car_racing/raw_rollouts --out_name=rollouts

Writes <out_dir>/<out_name>-{train,validation}.tfrecord-00003-of-00074 (GZIP by default) and
dataset_info.json. Every pickle is checked before anything is converted; shards are written
under temporary names and renamed; rerunning the same command finishes a killed conversion
without redoing finished shards. The original path
scripts/data_gen/car_racing/rollout_pickles_to_tfrecords.py runs this script with the same flags.
Library: rl755.data_gen.convert.convert_pickles_to_tfrecords.
"""

from absl import app, flags, logging

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_integer("parallelism", 1, "Processes converting shards at once.")
flags.DEFINE_integer(
    "pickles_per_tfrecord_file",
    16,
    "Pickles (rollouts) per shard. A GZIP CarRacing rollout of 1000 steps is ~1 MB, 27.6 MB raw.",
)
flags.DEFINE_string(
    "pickle_dir",
    None,
    "Directory of *.pickle files from collect_rollouts.py (--out_format=pickle).",
)
flags.DEFINE_string("out_dir", None, "Directory for the shards (created if missing).")
flags.DEFINE_string("out_name", "rollouts", "Shard name prefix: <out_name>-<split>.tfrecord-...")
flags.DEFINE_enum("compression", "GZIP", ["none", "GZIP", "ZLIB"], "TFRecord compression.")
flags.DEFINE_float(
    "validation_fraction", 0.05, "Share of the (sorted) pickles put in the validation split."
)
for _name in ("pickle_dir", "out_dir"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import BadInput
    from rl755.data_gen.convert import convert_pickles_to_tfrecords

    try:
        summary = convert_pickles_to_tfrecords(
            pickle_dir=FLAGS.pickle_dir,
            out_dir=FLAGS.out_dir,
            out_name=FLAGS.out_name,
            pickles_per_tfrecord_file=FLAGS.pickles_per_tfrecord_file,
            parallelism=FLAGS.parallelism,
            compression=FLAGS.compression,
            validation_fraction=FLAGS.validation_fraction,
            run_flags=run_record.flags_dict(),
        )
    except BadInput as e:
        raise app.UsageError(str(e)) from e
    logging.info(
        "%d shards in %s: wrote %d (%d rollouts, %.1f MB), %d existed already.",
        summary["shards"],
        summary["out_dir"],
        summary["written"],
        summary["rollouts"],
        summary["bytes"] / 1e6,
        summary["skipped"],
    )


if __name__ == "__main__":
    app.run(main)
