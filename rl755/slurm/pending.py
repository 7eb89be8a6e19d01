"""Pending jobs that will never start, said plainly, with what to change.

SLURM keeps such a job PENDING with a reason that reads like any other
("PartitionConfig", "Resources"). `never_starts(job)` tells them apart:

  * reasons that never clear by waiting: the request is beyond the partition's limits
    (PartitionConfig, PartitionTimeLimit, PartitionNodeLimit), beyond a QOS/association's
    per-job limit, an invalid account/QOS/feature, or a dependency that failed
    (DependencyNeverSatisfied);
  * any reason (even "Resources") when the request is larger than every node of its
    partition (`rl755.slurm.cluster`).

    why = never_starts(job)   # None, or "... will never start: ... Change: ..."
"""

from __future__ import annotations

from rl755.slurm import cluster as cluster_info
from rl755.slurm.job_state import SlurmJob
from rl755.slurm.sbatch import Resources

_CANCEL = "cancel it (scancel {job}) and submit again"
_SMALLER = (
    _CANCEL + " asking for less (scripts/pipeline.py: --cpus/--mem/--gpus/--time=STAGE=VALUE; "
    "scripts/launch.py: --cpus/--mem/--gpus/--time) or another partition (--partition, "
    "--gpu_partition)"
)
NEVER_CLEARS = {
    "PartitionConfig": ("the request exceeds what its partition allows", _SMALLER),
    "PartitionTimeLimit": ("its time limit is beyond the partition's", _SMALLER),
    "PartitionNodeLimit": ("it asks for more nodes than the partition allows", _SMALLER),
    "BadConstraints": ("its constraints (features, nodes) match no node", _SMALLER),
    "DependencyNeverSatisfied": (
        "a job it waits for (afterok) failed or was cancelled",
        _CANCEL + " after fixing that job (rerun the pipeline: finished stages are kept)",
    ),
    "InvalidAccount": ("its account is not valid here", _CANCEL + " with another --account"),
    "InvalidQOS": ("its QOS is not valid here", _CANCEL + " with another --qos"),
}
# QOS / association limits per job (not per user or group, which clear as jobs end).
for _limit in (
    "MaxCpuPerJobLimit",
    "MaxGRESPerJob",
    "MaxMemoryPerJob",
    "MaxMemPerJob",
    "MaxNodePerJobLimit",
    "MaxWallDurationPerJobLimit",
):
    for _who in ("QOS", "Assoc"):
        NEVER_CLEARS[_who + _limit] = (f"it is beyond the {_who} limit {_limit}", _SMALLER)


def requested(job: SlurmJob) -> Resources | None:
    """What a pending job asks for per node, as Resources (None if scontrol did not say)."""
    if job.num_cpus is None or not job.min_memory:
        return None
    mem = job.min_memory.rstrip("B")
    if not mem[:-1].isdigit() and not mem.isdigit():
        return None
    time = job.time_limit if job.time_limit and job.time_limit[0].isdigit() else "1"
    return Resources(
        partition=job.partition,
        cpus=max(1, job.num_cpus),
        mem=mem,
        gpus=job.gpus or 0,
        nodes=job.num_nodes or 1,
        time=time,
    )


def never_starts(job: SlurmJob, cluster: cluster_info.Cluster | None = None) -> str | None:
    """Why a PENDING job will never start and what to change; None if it may start."""
    if job.state != "PENDING":
        return None
    reason = (job.reason or "").split(",")[0].strip()
    known = NEVER_CLEARS.get(reason)
    too_big = None
    res = requested(job)
    if res is not None:
        cluster = cluster or cluster_info.read_cluster()
        if cluster is not None and cluster.get(res.partition) is not None:
            too_big = cluster.problem(res)
            part = cluster.get(res.partition)
            if too_big:
                too_big += f" (the partition offers: {part.describe()})"
    if known is None and too_big is None:
        return None
    what, change = known or ("its request is larger than any node", _SMALLER)
    why = f"{what}: {too_big}" if too_big else what
    return (
        f"pending ({reason or 'no reason'}) and will never start: {why}. Change: "
        + change.format(job=job.job_id)
        + "."
    )
