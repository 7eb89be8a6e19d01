"""Stage 3, all at once: run one encode_raw_rollouts.py instance per GPU of this SLURM job,
with the job array's tasks covering every outer shard (no index arithmetic by hand).

    # 3 jobs x 4 GPUs = 12 outer shards (the outer shard count is num_jobs x instances):
    sbatch --array=0-2 --gres=gpu:4 --wrap "python scripts/data_gen/encode_raw_rollouts_multi.py \
        --environment=CAR_RACING --model=raw_rollout_vae_32ld --split=train --num_sub_shards=4"
    # locally: K processes on the CPU, all outer shards
    python scripts/data_gen/encode_raw_rollouts_multi.py --environment=FAKE_PIXELS \
        --model=raw_rollout_vae_4ld --instances_per_job=2

Instance k of array task j encodes outer shard j*K + k of num_jobs*K on GPU k. Defaults:
K = visible GPUs (CUDA_VISIBLE_DEVICES; 1 without GPUs), job index/count from
SLURM_ARRAY_TASK_ID/MIN/COUNT ((0, 1) outside an array). Exits non-zero if any instance
failed; rerun to finish. Library: rl755.data_gen.encode_instances.run_instances.
"""

import sys

from absl import app, flags, logging

from rl755.common import determinism

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_string("model", None, "saved_models function (or class name with --model_dir).")
flags.DEFINE_string("split", "train", "Split of the raw rollouts to read.")
flags.DEFINE_string("out_dir", None, "Output dir (default: as encode_raw_rollouts.py).")
flags.DEFINE_string("out_name", "encoded", "Output file name prefix.")
flags.DEFINE_integer("num_sub_shards", 1, "Output files per instance.")
flags.DEFINE_integer("instances_per_job", None, "K (default: visible GPUs, or 1 without).")
flags.DEFINE_integer("job_index", None, "This job's index (default: from the SLURM array).")
flags.DEFINE_integer("num_jobs", None, "Number of jobs (default: the SLURM array's size).")
flags.DEFINE_string("model_dir", None, "Encode with a training run's weights.")
flags.DEFINE_string("checkpoint", None, "With --model_dir: a weights file.")
flags.DEFINE_integer("representation_size", None, "With --model_dir: Z.")
flags.DEFINE_integer("batch_size", None, "Frames per encoder call.")
flags.DEFINE_string("compression", None, "Output compression: none, GZIP or ZLIB.")
flags.DEFINE_string("rollouts_pattern", None, "Glob with '{split}' overriding RawRollouts.")
flags.DEFINE_integer("num_threads", None, "TF threads per instance (default: cores / K on CPU).")
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
flags.mark_flag_as_required("environment")
flags.mark_flag_as_required("model")


def main(argv):
    del argv
    from rl755.data_gen.encode_instances import run_instances
    from rl755.data_gen.encode_shards import resolve_out_dir

    out_dir = resolve_out_dir(FLAGS.environment, FLAGS.model, FLAGS.model_dir, FLAGS.out_dir)
    instance_flags = {
        name: getattr(FLAGS, name)
        for name in (
            "environment",
            "model",
            "split",
            "out_name",
            "num_sub_shards",
            "model_dir",
            "checkpoint",
            "representation_size",
            "batch_size",
            "compression",
            "rollouts_pattern",
            "num_threads",
            "deterministic",
        )
    }
    try:
        outers = run_instances(
            instance_flags,
            out_dir,
            instances_per_job=FLAGS.instances_per_job,
            job_index=FLAGS.job_index,
            num_jobs=FLAGS.num_jobs,
        )
    except RuntimeError as e:
        logging.error("%s", e)
        sys.exit(1)
    logging.info("Encoded outer shards %s into %s.", outers, out_dir)


if __name__ == "__main__":
    app.run(main)
