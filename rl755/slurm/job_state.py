"""SLURM's view of jobs: `scontrol show job` (the controller keeps finished jobs for
MinJobAge, 300 s by default), then `sacct` where accounting is enabled (without it sacct
prints "accounting storage is disabled" and nothing else).

    jobs = query_slurm(["123", "124_3"])     # {job id: SlurmJob}; unknown ids are missing
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence


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
    # What the job asks for (scontrol only; None when unknown), to tell whether it can start:
    partition: str | None = None
    num_nodes: int | None = None
    num_cpus: int | None = None  # CPUs per node
    min_memory: str | None = None  # per node, e.g. "32G", "50000M"
    gpus: int | None = None  # per node
    time_limit: str | None = None


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
        nodes = _int(_field(line, "NumNodes"))
        cpus = _int(_field(line, "NumCPUs"))
        per_task = _int(_field(line, "CPUs/Task"))
        if cpus is not None and nodes:
            cpus = max(cpus // nodes, per_task or 1)
        jobs.append(
            SlurmJob(
                job_id=job_id,
                name=_field(line, "JobName") or "",
                state=_field(line, "JobState") or "UNKNOWN",
                reason=_field(line, "Reason") or "",
                exit_code=_field(line, "ExitCode") or "",
                array_job_id=array_job,
                array_task_id=_field(line, "ArrayTaskId") if array_job else None,
                partition=_field(line, "Partition"),
                num_nodes=nodes,
                num_cpus=cpus,
                min_memory=_field(line, "MinMemoryNode"),
                gpus=_gpus(_field(line, "TresPerNode") or _field(line, "Gres") or ""),
                time_limit=_field(line, "TimeLimit"),
            )
        )
    return jobs


def _int(text: str | None) -> int | None:
    m = re.match(r"\d+", text or "")
    return int(m.group(0)) if m else None


def _gpus(tres: str) -> int:
    """'gres:gpu:2', 'gres/gpu:v100=1', 'gpu:2' -> 2, 1, 2; '' -> 0."""
    m = re.search(r"gpu(?:[:/][^:=,]+)?[:=](\d+)", tres)
    return int(m.group(1)) if m else 0


def command_output(argv: Sequence[str]) -> str | None:
    """The stdout of a SLURM command, or None where it is not installed, fails or hangs
    (60 s)."""
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
    text = command_output(["scontrol", "show", "job", "-o"])
    for job in parse_scontrol(text or ""):
        found[job.job_id] = job
        if job.array_job_id and job.array_task_id:
            found[f"{job.array_job_id}_{job.array_task_id}"] = job
    missing = sorted(wanted - set(found))
    if missing:
        out = command_output(
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
