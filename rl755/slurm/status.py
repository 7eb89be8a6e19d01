"""What ran, what runs, how it went: a table of the runs under a directory tree.

Sources, per run:
  * run records `<out_dir>/runs/*.json` (`rl755.common.run_record`): stage, flags, host,
    SLURM ids, start/end time, status;
  * submissions `<out_dir>/slurm/job-<id>.json` written by the launcher, so that jobs that
    have not started (PENDING, or CANCELLED because a dependency failed) are listed too;
  * SLURM's view of every job id (rl755.slurm.job_state: scontrol, then sacct), else the
    record;
  * the last value of every scalar in TensorBoard event files under the run's out_dir
    (rl755.common.tensorboard; a trainer's are `tensorboard/{train,validation}`).

    rows = collect_status("/scratch/me/experiments")
    print(format_table(rows))

`scripts/status.py DIR` prints the table (or JSON with --format=json).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import socket
from collections.abc import Sequence

from rl755.common import run_record
from rl755.common.tensorboard import latest_metrics, tensorboard_dirs
from rl755.slurm import pending
from rl755.slurm.job_state import SlurmJob, query_slurm  # noqa: F401  (SlurmJob: re-exported)
from rl755.slurm.launcher import SLURM_SUBDIR

# Record states when SLURM no longer knows the job or there is none.
LOST = "LOST"


# ---------------------------------------------------------------- rows


@dataclasses.dataclass
class RunStatus:
    """One row of the status table."""

    stage: str
    state: str
    state_source: str  # "slurm", "sacct", "record", "submission"
    job: str  # "123", "123_4" or "" (local run)
    host: str
    start_time: str | None
    end_time: str | None
    out_dir: str
    metrics: dict[str, tuple[int, float]]
    tensorboard_dirs: list[str]
    record_path: str | None = None
    error: str | None = None
    never_starts: str | None = None  # a pending job that never will: why, what to change

    def elapsed(self, now: datetime.datetime | None = None) -> str:
        if not self.start_time:
            return ""
        start = datetime.datetime.fromisoformat(self.start_time)
        if self.end_time:
            end = datetime.datetime.fromisoformat(self.end_time)
        else:
            end = now or datetime.datetime.now(datetime.UTC)
        secs = max(0, int((end - start).total_seconds()))
        return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def _read_submissions(root: str) -> list[dict]:
    """The launcher's `<log_dir>/job-<id>.json` files under `root`, each with its "_path"."""
    out = []
    for path, data in run_record.json_files_in(root, SLURM_SUBDIR, r"job-\d+\.json"):
        data["_path"] = path
        out.append(data)
    return out


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


def _record_job(record: dict) -> str:
    slurm = record.get("slurm") or {}
    if slurm.get("array_job_id") and slurm.get("array_task_id"):
        return f"{slurm['array_job_id']}_{slurm['array_task_id']}"
    return slurm.get("job_id", "")


def collect_status(root: str, with_metrics: bool = True) -> list[RunStatus]:
    """Rows for every run record and every not-yet-started submission under `root`."""
    root = os.path.abspath(root)
    records = run_record.read_records(root)  # oldest first, each with its "record_path"
    submissions = _read_submissions(root)
    job_ids = {(r.get("slurm") or {}).get("job_id") for r in records}
    job_ids |= {s.get("job_id") for s in submissions}
    slurm = query_slurm(j for j in job_ids if j)
    tb_cache: dict[str, tuple[list, dict]] = {}

    def tb(out_dir: str):
        if out_dir not in tb_cache:
            dirs = tensorboard_dirs(out_dir)
            tb_cache[out_dir] = (dirs, latest_metrics(dirs) if with_metrics else {})
        return tb_cache[out_dir]

    host = socket.gethostname()
    rows = []
    recorded_jobs: dict[str, int] = {}
    latest: dict[str, str] = {}  # job id -> record path of its latest run (requeues rerun)
    for r in records:  # oldest first
        if (r.get("slurm") or {}).get("job_id"):
            latest[r["slurm"]["job_id"]] = r.get("record_path")
    for r in records:
        s = r.get("slurm") or {}
        job = slurm.get(s.get("job_id", "")) if s.get("job_id") else None
        if job is not None and latest.get(s.get("job_id")) != r.get("record_path"):
            job = None  # an earlier start of a requeued job: its own record tells
        for key in (s.get("job_id"), s.get("array_job_id")):
            if key:
                recorded_jobs[key] = recorded_jobs.get(key, 0) + 1
        status = r.get("status", "unknown")
        if job is not None:
            state, source = job.state, job.source if job.source != "scontrol" else "slurm"
            if job.state == "REQUEUED" or (job.state == "PENDING" and status != "running"):
                state = f"{job.state} (record: {status})"
        elif status == "running" and (
            s.get("job_id") or (r.get("host") == host and not _pid_alive(r.get("pid")))
        ):
            # no SLURM job any more (or the local process is gone) but never finalised
            state, source = LOST, "record"
        else:
            state, source = status, "record"
        dirs, metrics = tb(r.get("out_dir", ""))
        rows.append(
            RunStatus(
                stage=r.get("stage", "?"),
                state=state,
                state_source=source,
                job=_record_job(r),
                host=r.get("host", ""),
                start_time=r.get("start_time"),
                end_time=r.get("end_time"),
                out_dir=r.get("out_dir", ""),
                metrics=metrics,
                tensorboard_dirs=dirs,
                record_path=r.get("record_path"),
                error=r.get("error"),
            )
        )
    newest: dict[tuple, str] = {}  # (name, out_dir) -> submit time of its latest submission
    for sub in submissions:
        key = (sub.get("name"), sub.get("out_dir"))
        newest[key] = max(newest.get(key, ""), sub.get("submit_time") or "")
    for sub in submissions:
        job_id = str(sub.get("job_id", ""))
        if recorded_jobs.get(job_id, 0) >= int(sub.get("num_tasks", 1)):
            continue
        states = sorted(
            {j.state for k, j in slurm.items() if k == job_id or j.array_job_id == job_id}
        )
        known = [j for k, j in slurm.items() if k == job_id]
        if recorded_jobs.get(job_id) and states == ["COMPLETED"]:
            continue
        stuck = None
        superseded = newest[(sub.get("name"), sub.get("out_dir"))] > (sub.get("submit_time") or "")
        if not states and superseded:
            continue  # an earlier submission of a stage submitted again since (a rerun)
        if not states:
            state, source = "unknown (not in SLURM any more, no run record)", "submission"
        else:
            state, source = "/".join(states), "slurm"
            if known and known[0].state == "PENDING" and known[0].reason:
                state += f" ({known[0].reason})"
            if known:
                stuck = pending.never_starts(known[0])
                if stuck:
                    state += " NEVER STARTS"
        out_dir = sub.get("out_dir") or ""
        dirs, metrics = tb(out_dir) if out_dir else ([], {})
        rows.append(
            RunStatus(
                stage=sub.get("name", "?"),
                state=state,
                state_source=source,
                job=job_id,
                host="",
                start_time=sub.get("submit_time"),
                end_time=None,
                out_dir=out_dir,
                metrics=metrics,
                tensorboard_dirs=dirs,
                record_path=sub.get("_path"),
                never_starts=stuck,
            )
        )
    rows.sort(key=lambda row: (row.start_time or "", row.job))
    return rows


def _short_metrics(metrics: dict, pattern: str | None, limit: int) -> str:
    items = sorted(metrics.items())
    if pattern:
        items = [(k, v) for k, v in items if re.search(pattern, k)]
    text = " ".join(f"{k}={v:.4g}@{s}" for k, (s, v) in items[:limit])
    return text + (f" (+{len(items) - limit})" if len(items) > limit else "")


def format_table(
    rows: Sequence[RunStatus], root: str = "", metrics: str | None = None, max_metrics: int = 4
) -> str:
    """A fixed-width text table; paths relative to `root` where they lie under it."""

    def rel(path: str) -> str:
        if root and path and os.path.abspath(path) == os.path.abspath(root):
            return "."
        if root and path and os.path.abspath(path).startswith(os.path.abspath(root) + os.sep):
            return os.path.relpath(path, root)
        return path or "-"

    header = ["STAGE", "STATE", "JOB", "HOST", "STARTED", "ELAPSED", "OUT_DIR", "METRICS", "TB"]
    table = [header]
    for r in rows:
        started = (r.start_time or "")[:19].replace("T", " ")
        tbs = ",".join(rel(d) for d in r.tensorboard_dirs)
        table.append(
            [
                r.stage,
                r.state,
                r.job or "-",
                r.host.split(".")[0] or "-",
                started or "-",
                r.elapsed() or "-",
                rel(r.out_dir),
                _short_metrics(r.metrics, metrics, max_metrics) or "-",
                tbs or "-",
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    failed = [r for r in rows if r.error]
    for r in failed:
        lines.append(f"! {r.stage} {r.job or ''}: {r.error}  ({rel(r.record_path or '')})")
    for r in rows:
        if r.never_starts:
            lines.append(f"! {r.stage} {r.job}: {r.never_starts}")
    all_tb = sorted({d for r in rows for d in r.tensorboard_dirs})
    if all_tb:
        lines.append("TensorBoard: tensorboard --logdir " + os.path.commonpath(all_tb))
    return "\n".join(lines)


def to_json(rows: Sequence[RunStatus]) -> str:
    return json.dumps([dataclasses.asdict(r) for r in rows], indent=2)
