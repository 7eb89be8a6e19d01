"""A chain of jobs summed up in one line: "stage 3 of 8 running (encode_train), 2 done, 0 failed".

Reads the chain records (`chain-*.json`, written by `rl755.slurm.chain.submit_chain`) under
a directory tree, the latest per directory, and each stage's state: SLURM's (scontrol, then
sacct), else the stage's run records (SLURM forgets finished jobs after a few minutes when
there is no accounting), else "unknown".

    for line in chain_lines("/scratch/me/runs/tiny"):
        print(line)
"""

from __future__ import annotations

import dataclasses
import os

from rl755.common import run_record
from rl755.slurm import pending, resume
from rl755.slurm.job_state import SlurmJob, query_slurm

BUCKETS = {
    "done": ("COMPLETED", "completed"),
    "running": ("RUNNING", "COMPLETING", "CONFIGURING", "running"),
    "pending": ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESIZING"),
    "cancelled": ("CANCELLED",),
    "failed": (
        "FAILED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "failed",
        "interrupted",
    ),
}


def bucket(states: list[str | None]) -> str:
    """One word for a stage from its jobs' (array tasks') states."""
    kinds = set()
    for state in states:
        state = state.split()[0] if state else ""
        kinds.add(next((b for b, names in BUCKETS.items() if state in names), "unknown"))
    if not kinds or kinds == {"unknown"}:
        return "unknown"
    if kinds == {"done"}:
        return "done"
    for word in ("failed", "cancelled"):
        if word in kinds:
            return word
    if kinds & {"running", "done"}:
        return "running"
    return "pending" if "pending" in kinds else "unknown"


@dataclasses.dataclass
class StageState:
    name: str
    job_id: str | None
    state: str  # done, running, pending, failed, cancelled, unknown
    detail: str = ""  # pending reason, "will never start: ..."


def stage_states(record: dict, slurm: dict[str, SlurmJob] | None = None) -> list[StageState]:
    entries = record.get("stages", [])
    if slurm is None:
        slurm = query_slurm(str(e["job_id"]) for e in entries if e.get("job_id"))
    out = []
    for e in entries:
        name, job_id = e.get("name", "?"), e.get("job_id")
        if e.get("action") == "done" and not job_id:
            out.append(StageState(name, None, "done", "done before this submission"))
            continue
        job_id = str(job_id) if job_id else None
        jobs = [j for k, j in slurm.items() if job_id and (k == job_id or j.array_job_id == job_id)]
        jobs = list({j.job_id: j for j in jobs}.values())
        if jobs:
            state = bucket([j.state for j in jobs])
            detail = ""
            if state == "pending":
                head = next((j for j in jobs if j.state == "PENDING"), jobs[0])
                detail = head.reason or ""
                stuck = pending.never_starts(head)
                if stuck:
                    detail = f"{detail}, will never start"
            out.append(StageState(name, job_id, state, detail))
            continue
        statuses = _recorded(e.get("out_dir"), job_id)
        out.append(StageState(name, job_id, bucket(statuses) if statuses else "unknown"))
    return out


def _recorded(out_dir: str | None, job_id: str | None) -> list[str | None]:
    """Latest record status per process of the job, from `<out_dir>/runs` (an array task
    has its own job id; a requeued job keeps its id, so its latest start counts)."""
    if not out_dir or not job_id:
        return []
    latest: dict[str, str | None] = {}
    for r in run_record.read_records(os.path.join(out_dir, run_record.RUNS_SUBDIR)):
        s = r.get("slurm") or {}
        if job_id in (s.get("job_id"), s.get("array_job_id")):
            latest[s.get("job_id")] = r.get("status")
    return list(latest.values())


def summary_line(states: list[StageState]) -> str:
    """ "stage 3 of 8 running (encode_train), 2 done, 0 failed" / "all 8 stages done, 0 failed"."""
    n = len(states)
    count = {b: sum(s.state == b for s in states) for b in ("done", "failed", "cancelled")}
    tail = f"{count['done']} done, {count['failed']} failed"
    if count["cancelled"]:
        tail += f", {count['cancelled']} cancelled"
    if count["done"] == n:
        return f"all {n} stages done, 0 failed"
    i, first = next((i, s) for i, s in enumerate(states) if s.state != "done")
    detail = f": {first.detail}" if first.detail else ""
    return f"stage {i + 1} of {n} {first.state} ({first.name}{detail}), {tail}"


def find_chain_records(root: str) -> list[str]:
    """The latest chain record of every directory under `root` that has one."""
    found = []
    for dirpath, dirnames, filenames in os.walk(os.path.abspath(root)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if any(f.startswith(resume.CHAIN_PREFIX) and f.endswith(".json") for f in filenames):
            paths = resume.chain_records(dirpath)
            if paths:
                found.append(paths[-1])
    return found


def chain_lines(root: str) -> list[str]:
    """One summary line per chain under `root`: "<where>: stage i of n <state> (...), ..."."""
    lines = []
    for path in find_chain_records(root):
        record = resume.read_chain_record(path)
        if record is None:
            continue
        where = os.path.dirname(os.path.dirname(path))
        rel = os.path.relpath(where, os.path.abspath(root))
        label = record.get("label") or "chain"
        where = label if rel == "." else f"{label} {rel}"
        lines.append(f"{where}: {summary_line(stage_states(record))}")
    return lines
