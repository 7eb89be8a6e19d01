"""Runs any stage script locally or submits it to SLURM (one job or one job array).

    # one job on the general partition
    python scripts/launch.py --cpus=4 --mem=16G --time=8:00:00 -- \
        scripts/data_gen/collect_rollouts.py --num_rollouts=100 --out_dir=/data/raw

    # 1000 rollouts as 10 array tasks of 100, same out_dir
    python scripts/launch.py --array=10 --split=num_rollouts --cpus=8 -- \
        scripts/data_gen/collect_rollouts.py --num_rollouts=1000 --out_dir=/data/raw

    # 12 outer shards as 3 array tasks x 4 GPUs (task i: outer shards 4i..4i+3, gpu 0..3)
    python scripts/launch.py --partition=volta-gpu --gpus=4 --array=3 --instances_per_task=4 -- \
        scripts/data_gen/encode_raw_rollouts.py --num_outer_shards=12 \
        --outer_shard_index={outer_shard_index} --gpu_index={gpu_index} ...

    # the same stage here, without SLURM
    python scripts/launch.py --local -- scripts/... --flag=value

Everything after `--` is the stage script and its flags, in --name=value form. Prints the
job id, the sbatch script, where the logs (`<logs_dir>/logs-%j.out/.err`) and outputs go.
Before submitting it checks that the cluster can ever run the request (partition limits,
`sbatch --test-only`) and refuses with what the cluster offers if not. Partition, qos and
account default to the "slurm" object of the rl755 config file (rl755/slurm/site.py).
"""

import sys

from absl import app, flags

from rl755.common.errors import BadInput
from rl755.slurm import launcher, site
from rl755.slurm.sbatch import Resources

flags.DEFINE_bool("local", False, "Run here (blocking) instead of submitting to SLURM.")
flags.DEFINE_string(
    "partition", None, "SLURM partition; default: the config file's, else the cluster's default."
)
flags.DEFINE_string(
    "gpu_partition",
    None,
    "Partition when --gpus > 0 (default: the config file's, else --partition).",
)
flags.DEFINE_integer("gpus", 0, "GPUs per job / array task (--gres=gpu:N).")
flags.DEFINE_integer("cpus", 1, "CPUs per job / array task.")
flags.DEFINE_string("mem", "4G", "Memory per job / array task, e.g. 16G.")
flags.DEFINE_string("time", "1:00:00", "Time limit: minutes, H:MM:SS or D-HH:MM:SS.")
flags.DEFINE_integer("nodes", 1, "Nodes per job.")
flags.DEFINE_string("qos", None, "Quality of service, e.g. gpu_access.")
flags.DEFINE_string("account", None, "Account to charge.")
flags.DEFINE_multi_string("sbatch_arg", [], "Extra sbatch option, e.g. --sbatch_arg=--exclusive.")
flags.DEFINE_string("job_name", None, "Job name; default: the script name.")
flags.DEFINE_string(
    "logs_dir", None, "Where the sbatch script and logs go; default <out_dir>/slurm or ./slurm."
)
flags.DEFINE_integer("array", 1, "Number of array tasks N (1 = a plain job).")
flags.DEFINE_integer("instances_per_task", 1, "Concurrent stage instances K per array task.")
flags.DEFINE_list("split", [], "Integer stage flags to divide exactly among the N*K instances.")
flags.DEFINE_integer("max_concurrent", None, "At most this many array tasks at once.")
flags.DEFINE_list("after", [], "Job ids that must complete successfully first (afterok).")
flags.DEFINE_bool("requeue", False, "Let SLURM requeue the job; the stage resumes from outputs.")
flags.DEFINE_bool("check", True, "Validate the stage's flags (--only_check_args) first.")
flags.DEFINE_bool("dry_run", False, "Write the sbatch script and print it; do not submit.")
flags.DEFINE_bool(
    "ray", False, "Run the stage under scripts/ray_on_slurm.sh (Ray over all --nodes)."
)
flags.DEFINE_bool(
    "srun", False, "Start the stage with srun: one process per node (multi-worker training)."
)
flags.DEFINE_string("python", None, "Python interpreter for the stage; default: this one.")
FLAGS = flags.FLAGS


def main(argv):
    if len(argv) < 2:
        raise app.UsageError("Give the stage script and its flags after --.")
    try:
        return _launch(argv)
    except BadInput as e:
        print(f"scripts/launch.py: {e}", file=sys.stderr)
        return 2


def _launch(argv):
    resources = Resources(
        gpus=FLAGS.gpus,
        cpus=FLAGS.cpus,
        mem=FLAGS.mem,
        time=FLAGS.time,
        nodes=FLAGS.nodes,
        qos=FLAGS.qos,
        account=FLAGS.account,
        extra=tuple(FLAGS.sbatch_arg),
    )
    if not FLAGS.local:
        resources = site.place(
            resources, partition=FLAGS.partition, gpu_partition=FLAGS.gpu_partition
        )
    result = launcher.launch(
        argv[1],
        launcher.parse_flag_args(argv[2:]),
        resources=resources,
        array=launcher.ArraySpec(
            num_tasks=FLAGS.array,
            instances_per_task=FLAGS.instances_per_task,
            split=tuple(FLAGS.split),
            max_concurrent=FLAGS.max_concurrent,
        ),
        local=FLAGS.local,
        job_name=FLAGS.job_name,
        log_dir=FLAGS.logs_dir,
        dependencies=FLAGS.after,
        requeue=FLAGS.requeue,
        python=FLAGS.python,
        check=FLAGS.check,
        dry_run=FLAGS.dry_run,
        ray=FLAGS.ray,
        srun=FLAGS.srun,
        how="scripts/launch.py",
    )
    if FLAGS.dry_run and result.sbatch_script:
        with open(result.sbatch_script) as f:
            print(f.read())
    print(result.summary())
    return result.returncode or 0


if __name__ == "__main__":
    app.run(main)
