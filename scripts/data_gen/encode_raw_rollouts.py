"""Stage 3: encode one outer shard of a split's raw rollouts with a trained encoder.

    python scripts/data_gen/encode_raw_rollouts.py --environment=CAR_RACING \
        --model=raw_rollout_vae_32ld --split=train --out_name=encoded \
        --num_sub_shards=4 --num_outer_shards=12 --outer_shard_index=3 --gpu_index=0

Writes <out_dir>/<out_name>-<split>-o00003of00012.tfrecord-0000j-of-00004 (default out_dir:
<data_dir>/<env folder>/encoded_rollouts/<model>). Rerun to finish an interrupted instance.
To run all the instances of a SLURM job (one per GPU) and of a job array, use
encode_raw_rollouts_multi.py. Library: rl755.data_gen.encode.encode_raw_rollouts.
"""

from absl import app, flags

from rl755.common import determinism, tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_string(
    "model",
    None,
    "An encoder of the zoo (rl755.zoo, e.g. raw_rollout_vae_32ld); with "
    "--model_dir, the model class name instead (e.g. vae.Vae).",
)
flags.DEFINE_string("split", "train", "Which split of the raw rollouts to read (train/validation).")
flags.DEFINE_string(
    "out_dir", None, "Output dir (default <data_dir>/<env folder>/encoded_rollouts/<model>)."
)
flags.DEFINE_string("out_name", "encoded", "Output files: <out_name>-<split>-o..tfrecord-..")
flags.DEFINE_integer("num_sub_shards", 1, "Output files written by this instance.")
flags.DEFINE_integer("num_outer_shards", 1, "Number of groups the input files are split into.")
flags.DEFINE_integer("outer_shard_index", 0, "The group this instance encodes, in [0, n).")
flags.DEFINE_integer("gpu_index", None, "GPU to use among the visible ones (ignored on CPU).")
flags.DEFINE_string("model_dir", None, "Encode with a training run's weights (see --model).")
flags.DEFINE_string("checkpoint", None, "With --model_dir: a weights file (default: newest).")
flags.DEFINE_integer("representation_size", None, "With --model_dir: Z (default: from .json).")
flags.DEFINE_integer("batch_size", 500, "Frames per encoder call.")
flags.DEFINE_string("compression", "none", "Output compression: none, GZIP or ZLIB.")
flags.DEFINE_string("rollouts_pattern", None, "Glob with '{split}' overriding RawRollouts.")
flags.DEFINE_integer("num_threads", None, "TF intra-op threads (default: TF decides).")
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
flags.mark_flag_as_required("environment")
flags.mark_flag_as_required("model")


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import exit_on_bad_input
    from rl755.data_gen.encode import encode_raw_rollouts

    with exit_on_bad_input():
        encode_raw_rollouts(
            environment=FLAGS.environment,
            model=FLAGS.model,
            split=FLAGS.split,
            out_dir=FLAGS.out_dir,
            out_name=FLAGS.out_name,
            num_sub_shards=FLAGS.num_sub_shards,
            num_outer_shards=FLAGS.num_outer_shards,
            outer_shard_index=FLAGS.outer_shard_index,
            gpu_index=FLAGS.gpu_index,
            model_dir=FLAGS.model_dir,
            checkpoint=FLAGS.checkpoint,
            representation_size=FLAGS.representation_size,
            batch_size=FLAGS.batch_size,
            compression=FLAGS.compression,
            rollouts_pattern=FLAGS.rollouts_pattern,
            num_threads=FLAGS.num_threads,
            run_flags=run_record.flags_dict(),
            deterministic=FLAGS.deterministic,
        )


if __name__ == "__main__":
    app.run(main)
