"""Shared helpers for tests that submit real SLURM jobs.

    from slurm_helpers import needs_slurm, wait_job

    pytestmark = needs_slurm          # marks `slurm` and skips with a reason without SLURM

`.ci/run` starts a single-node SLURM (.ci/start_slurm.sh); on a laptop without `sbatch`
these tests are skipped (pytest lists them and why at the end), so `pytest` still passes. In
CI (CI=true) they fail instead: a green CI means they ran.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import time

import pytest

FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


@functools.lru_cache(maxsize=1)
def slurm_unavailable_reason() -> str | None:
    """None if sbatch is on PATH and the controller answers, else why not."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH (no SLURM here; CI starts one with .ci/start_slurm.sh)"
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"sinfo failed: {e}"
    if proc.returncode != 0:
        return f"SLURM controller does not answer (sinfo: {proc.stderr.strip()})"
    return None


def slurm_required() -> bool:
    """In CI (CI=true) the SLURM tests must run: without SLURM they fail instead of skipping."""
    return os.environ.get("CI", "").lower() == "true"


needs_slurm = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        slurm_unavailable_reason() is not None and not slurm_required(),
        reason=str(slurm_unavailable_reason()),
    ),
    pytest.mark.usefixtures("slurm_or_fail"),  # tests/conftest.py
]


def job_states(job_id: str) -> list[str]:
    """States of a job (one per array task); [] if SLURM does not know it."""
    proc = subprocess.run(
        ["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30
    )
    return re.findall(r"JobState=(\S+)", proc.stdout) if proc.returncode == 0 else []


def wait_job(job_id: str, timeout: float = 120) -> str:
    """Waits until every task of the job is final; returns the states joined by '/'."""
    end = time.time() + timeout
    while True:
        states = job_states(job_id)
        if states and all(s in FINAL_STATES for s in states):
            return "/".join(sorted(set(states)))
        if time.time() > end:
            raise TimeoutError(f"job {job_id} not finished after {timeout}s: {states}")
        time.sleep(0.3)


def wait_state(job_id: str, state: str, timeout: float = 120) -> None:
    end = time.time() + timeout
    while state not in job_states(job_id):
        if time.time() > end:
            raise TimeoutError(f"job {job_id} never reached {state}: {job_states(job_id)}")
        time.sleep(0.2)


def cancel(job_id: str) -> None:
    subprocess.run(["scancel", str(job_id)], capture_output=True, timeout=30)
