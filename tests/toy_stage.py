"""A tiny resumable stage for the launcher/SLURM tests (not collected by pytest).

Does `--n` work items named `item-<tag>-<i>.done` in --out_dir, skipping the ones that exist
(so a rerun or a requeued job resumes), and logs "start <tag> <i>" / "done <tag> <i>" lines
to <out_dir>/progress.log. --fail makes it fail after its work; --msg is written into items; --norecord skips the
run record (and the TensorFlow import it costs).
"""

import contextlib
import os
import time

from absl import app, flags

flags.DEFINE_string("out_dir", None, "Output directory.")
flags.DEFINE_integer("n", 1, "Number of work items.")
flags.DEFINE_string("tag", "0", "Names this instance's work items.")
flags.DEFINE_float("sleep", 0.0, "Seconds per work item.")
flags.DEFINE_bool("fail", False, "Fail after doing the work.")
flags.DEFINE_string("msg", "", "Written into every work item.")
flags.DEFINE_bool("record", True, "Write a run record (imports TensorFlow, slow to start).")
flags.mark_flag_as_required("out_dir")
FLAGS = flags.FLAGS


def _log(line):
    with open(os.path.join(FLAGS.out_dir, "progress.log"), "a") as f:
        f.write(line + "\n")


def main(argv):
    os.makedirs(FLAGS.out_dir, exist_ok=True)
    if FLAGS.record:
        from rl755.common import run_record

        recording = run_record.record_run(FLAGS.out_dir, run_record.flags_dict(), stage="toy")
    else:
        recording = contextlib.nullcontext()
    with recording:
        for i in range(FLAGS.n):
            path = os.path.join(FLAGS.out_dir, f"item-{FLAGS.tag}-{i}.done")
            if os.path.exists(path):
                continue
            _log(f"start {FLAGS.tag} {i}")
            time.sleep(FLAGS.sleep)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(FLAGS.msg)
            os.replace(tmp, path)
            _log(f"done {FLAGS.tag} {i}")
        if FLAGS.fail:
            raise RuntimeError("toy stage asked to fail")


if __name__ == "__main__":
    app.run(main)
