"""Lists the runs under a directory tree: stage, state, SLURM job, times, metrics, TensorBoard.

    python scripts/status.py /scratch/me/experiments
    python scripts/status.py --metrics='loss|reward' runs/demo
    python scripts/status.py --format=json runs/demo

State comes from SLURM (scontrol, then sacct) where the run has a job id, else from the
run record (`<out_dir>/runs/*.json`); jobs submitted by scripts/launch.py that have not
started yet (pending, or cancelled because a dependency failed) are listed too. LOST = the
record says running but neither SLURM nor the host knows the process any more. A pending
job that can never start (beyond its partition's limits, a dependency that failed...) is
marked NEVER STARTS, with a "!" line saying why and what to change. A chain submitted by
scripts/pipeline.py --launcher=slurm is summed up in one line under the table:
    pipeline runs/tiny: stage 3 of 8 running (encode_train), 2 done, 0 failed
"""

from absl import app, flags

from rl755.slurm import chain_status, status

flags.DEFINE_enum("format", "table", ["table", "json"], "Output format.")
flags.DEFINE_string("metrics", None, "Regex: show only the matching scalar tags.")
flags.DEFINE_integer("max_metrics", 4, "At most this many metrics per row in the table.")
flags.DEFINE_bool("with_metrics", True, "Read TensorBoard event files for the latest metrics.")
FLAGS = flags.FLAGS


def main(argv):
    roots = argv[1:] or ["."]
    for root in roots:
        rows = status.collect_status(root, with_metrics=FLAGS.with_metrics)
        if FLAGS.format == "json":
            print(status.to_json(rows))
        else:
            if len(roots) > 1:
                print(f"== {root}")
            print(status.format_table(rows, root, FLAGS.metrics, FLAGS.max_metrics))
            for line in chain_status.chain_lines(root):
                print(line)


if __name__ == "__main__":
    app.run(main)
