"""Running scripts/pipeline.py in tests, and the files a run leaves behind.

proc = run_pipeline("tiny", out_dir, "--launcher=slurm")
assert output_files(slurm_dir) == output_files(local_dir)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# The flags of the session's shared tiny run (conftest.tiny_local_run): the issue's
# repeatability command, `pipeline.py --preset=tiny --seed=3 --deterministic`.
TINY_RUN_FLAGS = ("--num_threads=1", "--seed=3", "--deterministic")


def run_pipeline(preset, out_dir, *extra, env=None, timeout=1500, check=True):
    cmd = [
        sys.executable,
        os.path.join(REPO, "scripts/pipeline.py"),
        f"--preset={preset}",
        f"--out_dir={out_dir}",
        *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def output_files(out_dir) -> set[str]:
    """Paths under out_dir, with what differs between two runs of the same thing spelled out
    once: run records (named by time, host, pid), TensorBoard event files (same) and SLURM's
    own files (sbatch scripts, logs, chain records) are left out or reduced to a pattern."""
    files = set()
    for dirpath, _, filenames in os.walk(out_dir):
        rel = os.path.relpath(dirpath, out_dir)
        parts = rel.split(os.sep)
        if "slurm" in parts:
            continue
        for name in filenames:
            if parts[-1] == "runs" and name.endswith(".json"):
                name = "<run record>.json"
            name = re.sub(r"^events\.out\.tfevents\..*", "events.out.tfevents.<host, time>", name)
            files.add(os.path.normpath(os.path.join(rel, name)))
    return files
