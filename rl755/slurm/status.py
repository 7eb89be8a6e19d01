"""What ran, what runs, how it went: a table of the runs under a directory tree.

Sources, per run:
  * run records `<out_dir>/runs/*.json` (`rl755.common.run_record`): stage, flags, host,
    SLURM ids, start/end time, status;
  * submissions `<out_dir>/slurm/job-<id>.json` written by the launcher, so that jobs that
    have not started (PENDING, or CANCELLED because a dependency failed) are listed too;
  * SLURM's view of every job id: `scontrol show job` (the controller keeps finished jobs
    for MinJobAge, 300 s by default), then `sacct` where accounting is enabled (without it
    sacct prints "accounting storage is disabled" and nothing else), else the record;
  * the last value of every scalar in TensorBoard event files under the run's out_dir.

    rows = collect_status("/scratch/me/experiments")
    print(format_table(rows))

`scripts/status.py DIR` prints the table (or JSON with --format=json).
"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import json
import os
import re
import shutil
import socket
import struct
import subprocess
from collections.abc import Iterable, Sequence

from rl755.slurm.launcher import SLURM_SUBDIR

RUNS_SUBDIR = "runs"  # rl755.common.run_record.RUNS_SUBDIR (not imported: it imports TF)
EVENT_GLOB = "events.out.tfevents.*"
# Record states when SLURM no longer knows the job or there is none.
LOST = "LOST"


@dataclasses.dataclass
class SlurmJob:
    job_id: str  # this job's own id (an array task has its own)
    name: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    reason: str
    exit_code: str
    array_job_id: str | None = None
    array_task_id: str | None = None
    source: str = "scontrol"


def _field(line: str, key: str) -> str | None:
    m = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", line)
    return m.group(1) if m else None


def parse_scontrol(text: str) -> list[SlurmJob]:
    """Parses `scontrol show job -o` output (one job per line)."""
    jobs = []
    for line in text.splitlines():
        job_id = _field(line, "JobId")
        if not job_id:
            continue
        array_job = _field(line, "ArrayJobId")
        jobs.append(
            SlurmJob(
                job_id=job_id,
                name=_field(line, "JobName") or "",
                state=_field(line, "JobState") or "UNKNOWN",
                reason=_field(line, "Reason") or "",
                exit_code=_field(line, "ExitCode") or "",
                array_job_id=array_job,
                array_task_id=_field(line, "ArrayTaskId") if array_job else None,
            )
        )
    return jobs


def _run(argv: Sequence[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def query_slurm(job_ids: Iterable[str]) -> dict[str, SlurmJob]:
    """SLURM's view of the given job ids (array task ids like "12_3" work too).

    Keys: the job's own id, and "<array id>_<task>" for array tasks; ids SLURM does not
    know are missing. One `scontrol show job` call for all jobs, `sacct` for the rest.
    """
    wanted = {str(j) for j in job_ids if j}
    found: dict[str, SlurmJob] = {}
    if not wanted:
        return found
    text = _run(["scontrol", "show", "job", "-o"])
    for job in parse_scontrol(text or ""):
        found[job.job_id] = job
        if job.array_job_id and job.array_task_id:
            found[f"{job.array_job_id}_{job.array_task_id}"] = job
    missing = sorted(wanted - set(found))
    if missing:
        out = _run(
            ["sacct", "-n", "-X", "-P", "-o", "JobIDRaw,JobID,JobName,State,ExitCode", "-j"]
            + [",".join(missing)]
        )
        for line in (out or "").splitlines():
            parts = line.split("|")
            if len(parts) != 5:
                continue
            raw, jid, name, state, code = parts
            job = SlurmJob(raw, name, state.split()[0], "", code, source="sacct")
            found.setdefault(raw, job)
            found.setdefault(jid, job)
    return found


# ---------------------------------------------------------------- TensorBoard scalars


def _read_tfrecords(path: str) -> Iterable[bytes]:
    """Records of a TFRecord file (no CRC check); stops at a truncated tail."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                return
            yield data


def last_scalars(event_file: str) -> dict[str, tuple[int, float]]:
    """{tag: (step, value)} of the latest value of every scalar in one event file."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    out: dict[str, tuple[int, float]] = {}
    for data in _read_tfrecords(event_file):
        event = event_pb2.Event()
        try:
            event.ParseFromString(data)
        except Exception:  # a corrupt record: skip it, keep reading
            continue
        for v in event.summary.value:
            if v.HasField("simple_value"):
                value = float(v.simple_value)
            elif v.HasField("tensor") and v.metadata.plugin_data.plugin_name in ("scalars", ""):
                arr = tensor_util.make_ndarray(v.tensor)
                if arr.size != 1 or arr.dtype.kind not in "fiub":
                    continue
                value = float(arr.reshape(()))
            else:
                continue
            if v.tag not in out or event.step >= out[v.tag][0]:
                out[v.tag] = (int(event.step), value)
    return out


def tensorboard_dirs(out_dir: str) -> list[str]:
    """Directories under out_dir (itself included) that hold TensorBoard event files."""
    if not out_dir or not os.path.isdir(out_dir):
        return []
    dirs = set()
    for dirpath, dirnames, filenames in os.walk(out_dir):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if any(n.startswith("events.out.tfevents.") for n in filenames):
            dirs.add(dirpath)
    return sorted(dirs)


def latest_metrics(tb_dirs: Sequence[str]) -> dict[str, tuple[int, float]]:
    """{tag (prefixed by the subdir when there are several): (step, value)}."""
    metrics: dict[str, tuple[int, float]] = {}
    for d in tb_dirs:
        prefix = "" if len(tb_dirs) == 1 else os.path.basename(d) + "/"
        for f in sorted(glob.glob(os.path.join(d, EVENT_GLOB))):
            for tag, (step, value) in last_scalars(f).items():
                key = prefix + tag
                if key not in metrics or step >= metrics[key][0]:
                    metrics[key] = (step, value)
    return metrics


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


def _read_json_files(root: str, subdir: str, pattern: str) -> list[dict]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if os.path.basename(dirpath) != subdir:
            continue
        for name in sorted(filenames):
            if name.startswith(".") or not re.fullmatch(pattern, name):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path) as f:
                    data = json.load(f)
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, dict):
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
    records = [r for r in _read_json_files(root, RUNS_SUBDIR, r".+\.json") if "stage" in r]
    records.sort(key=lambda r: (r.get("start_time") or "", r.get("_path")))
    submissions = _read_json_files(root, SLURM_SUBDIR, r"job-\d+\.json")
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
            latest[r["slurm"]["job_id"]] = r.get("_path")
    for r in records:
        s = r.get("slurm") or {}
        job = slurm.get(s.get("job_id", "")) if s.get("job_id") else None
        if job is not None and latest.get(s.get("job_id")) != r.get("_path"):
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
                record_path=r.get("_path"),
                error=r.get("error"),
            )
        )
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
        if not states:
            state, source = "unknown (not in SLURM any more, no run record)", "submission"
        else:
            state, source = "/".join(states), "slurm"
            if known and known[0].state == "PENDING" and known[0].reason:
                state += f" ({known[0].reason})"
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
    all_tb = sorted({d for r in rows for d in r.tensorboard_dirs})
    if all_tb:
        lines.append("TensorBoard: tensorboard --logdir " + os.path.commonpath(all_tb))
    return "\n".join(lines)


def to_json(rows: Sequence[RunStatus]) -> str:
    return json.dumps([dataclasses.asdict(r) for r in rows], indent=2)
