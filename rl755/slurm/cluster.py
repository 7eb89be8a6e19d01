"""What the cluster offers, and whether a request can ever start there (before submitting).

    cluster = read_cluster()                       # scontrol show partition / node
    problem = cluster.problem(Resources(cpus=4, mem="32G", gpus=1, partition="gpu"))
    # "asks for 4 CPUs (largest node: 2) per node in partition gpu", or None if it fits
    print(cluster.describe())                      # every partition: nodes, limits

`check_requests` runs both checks for every job of a chain before the first one is
submitted: the partition limits read here (nodes' CPUs, memory, GPUs; the partition's
MaxTime, MaxNodes, MaxCPUsPerNode, MaxMemPerNode), then `sbatch --test-only`
(`sbatch_test_only`), which catches what is not modelled here (accounts, QOS, features...).
Without SLURM tools it checks nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shutil
import subprocess
from collections.abc import Sequence

from rl755.slurm.job_state import command_output
from rl755.slurm.sbatch import Resources


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    mem_mb: int
    gpus: int
    state: str = ""


@dataclasses.dataclass(frozen=True)
class Partition:
    name: str
    default: bool
    state: str
    max_time_min: int | None  # None = unlimited
    max_nodes: int | None
    max_cpus_per_node: int | None
    max_mem_per_node_mb: int | None
    nodes: tuple[Node, ...]

    def describe(self) -> str:
        """'general (default, up): 1 node; per node up to 2 CPUs, 23.5G, 2 GPUs; time unlimited'"""
        head = f"{self.name} ({'default, ' if self.default else ''}{self.state.lower()})"
        if not self.nodes:
            return f"{head}: no nodes"
        cpus = _cap(max(n.cpus for n in self.nodes), self.max_cpus_per_node)
        mem = _cap(max(n.mem_mb for n in self.nodes), self.max_mem_per_node_mb)
        gpus = max(n.gpus for n in self.nodes)
        time = "unlimited" if self.max_time_min is None else format_minutes(self.max_time_min)
        count = len(self.nodes)
        return (
            f"{head}: {count} node{'s' if count > 1 else ''}; per node up to {cpus} CPUs, "
            f"{format_mb(mem)} memory, {gpus} GPUs; time limit {time}"
        )


def _cap(value: int, limit: int | None) -> int:
    return value if limit is None else min(value, limit)


@dataclasses.dataclass(frozen=True)
class Cluster:
    partitions: tuple[Partition, ...]

    def get(self, name: str | None) -> Partition | None:
        for p in self.partitions:
            if (name is None and p.default) or p.name == name:
                return p
        return None

    def describe(self) -> str:
        return "; ".join(p.describe() for p in self.partitions) or "no partitions"

    def problem(self, res: Resources) -> str | None:
        """Why `res` can never start on this cluster, or None if some nodes can run it.

        A list of partitions ("a,b", as sbatch takes it) fits if one of them does."""
        if res.partition and "," in res.partition:
            problems = [
                self.problem(dataclasses.replace(res, partition=name))
                for name in res.partition.split(",")
            ]
            return None if None in problems else "; ".join(problems)
        part = self.get(res.partition)
        if part is None:
            if res.partition is None:
                return "asks for the default partition, and the cluster has none; give a partition"
            names = ", ".join(p.name for p in self.partitions)
            return (
                f"asks for partition {res.partition!r}, which does not exist (partitions: {names})"
            )
        where = f"partition {part.name}"
        asked_min = time_to_minutes(res.time)
        if part.max_time_min is not None and (asked_min is None or asked_min > part.max_time_min):
            return f"asks for time {res.time}; {where} allows at most {format_minutes(part.max_time_min)}"
        if part.max_nodes is not None and res.nodes > part.max_nodes:
            return f"asks for {res.nodes} nodes; {where} allows at most {part.max_nodes} per job"
        mem = mem_to_mb(res.mem)
        fits = [
            n
            for n in part.nodes
            if n.cpus >= res.cpus and n.gpus >= res.gpus and (mem == 0 or n.mem_mb >= mem)
        ]
        per_node_limits = []
        if part.max_cpus_per_node is not None and res.cpus > part.max_cpus_per_node:
            per_node_limits.append(
                f"{res.cpus} CPUs per node; {where} allows at most {part.max_cpus_per_node}"
            )
        if part.max_mem_per_node_mb is not None and mem > part.max_mem_per_node_mb:
            per_node_limits.append(
                f"{res.mem} memory per node; {where} allows at most "
                f"{format_mb(part.max_mem_per_node_mb)}"
            )
        if per_node_limits:
            return "asks for " + " and ".join(per_node_limits)
        if len(fits) >= res.nodes:
            return None
        if not part.nodes:
            return f"asks for {where}, which has no nodes"
        too_big = []
        if res.cpus > max(n.cpus for n in part.nodes):
            too_big.append(f"{res.cpus} CPUs (largest node: {max(n.cpus for n in part.nodes)})")
        if mem > max(n.mem_mb for n in part.nodes):
            too_big.append(
                f"{res.mem} memory (largest node: {format_mb(max(n.mem_mb for n in part.nodes))})"
            )
        if res.gpus > max(n.gpus for n in part.nodes):
            most = max(n.gpus for n in part.nodes)
            too_big.append(f"{res.gpus} GPUs (largest node: {most})")
        if too_big:
            return f"asks for {' and '.join(too_big)} per node in {where}"
        return (
            f"asks for {res.nodes} nodes with {res.cpus} CPUs, {res.mem}, {res.gpus} GPUs each; "
            f"{where} has {len(fits)} such nodes"
        )


# ------------------------------------------------------------------ units
def mem_to_mb(mem: str) -> int:
    """SLURM memory ("16G", "500M", "2T", "1024" = MB) -> MB."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", str(mem).strip(), re.IGNORECASE)
    if not m:
        raise ValueError(f"{mem!r} is not SLURM memory syntax (e.g. 16G, 500M).")
    value, unit = int(m.group(1)), (m.group(2) or "M").upper()
    return {"K": value // 1024, "M": value, "G": value * 1024, "T": value * 1024 * 1024}[unit]


def format_mb(mb: int) -> str:
    return f"{mb / 1024:.1f}G" if mb >= 1024 else f"{mb}M"


def time_to_minutes(text: str) -> int | None:
    """SLURM time ("30", "1:00:00", "2-00:00:00", "1-12", "UNLIMITED") -> minutes (None = no limit)."""
    text = str(text).strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "NONE", "N/A", ""):
        return None
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
        parts = [int(p) for p in text.split(":")]  # hours[:minutes[:seconds]]
        parts += [0] * (3 - len(parts))
        h, m, s = parts
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:  # minutes
            h, m, s = 0, parts[0], 0
        elif len(parts) == 2:  # minutes:seconds
            h, m, s = 0, parts[0], parts[1]
        else:
            h, m, s = parts
    return days * 1440 + h * 60 + m + (1 if s else 0)


def format_minutes(minutes: int) -> str:
    d, rest = divmod(minutes, 1440)
    return f"{d}-{rest // 60:02d}:{rest % 60:02d}:00" if d else f"{rest // 60}:{rest % 60:02d}:00"


def gpus_in_gres(gres: str) -> int:
    """'gpu:2', 'gpu:v100:4(S:0-1)', 'gpu:a100:2,gpu:v100:1' -> 2, 4, 3; '(null)' -> 0."""
    total = 0
    for item in str(gres).split(","):
        m = re.match(r"\s*gpu(?::[^:,(]+)?:(\d+)", item)
        if m:
            total += int(m.group(1))
    return total


# ------------------------------------------------------------------ reading
def _fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(?:^|\s)([A-Za-z/:]+)=(\S*)", line))


def _limit(value: str | None) -> int | None:
    if value is None or not value.isdigit():
        return None
    return int(value)


def parse_cluster(partitions_text: str, nodes_text: str) -> Cluster:
    """From `scontrol show partition -o` and `scontrol show node -o`."""
    nodes_by_partition: dict[str, list[Node]] = {}
    for line in nodes_text.splitlines():
        f = _fields(line)
        if "NodeName" not in f:
            continue
        node = Node(
            name=f["NodeName"],
            cpus=int(f.get("CPUEfctv") or f.get("CPUTot") or 0),
            mem_mb=int(f.get("RealMemory") or 0) - int(_limit(f.get("MemSpecLimit")) or 0),
            gpus=gpus_in_gres(f.get("Gres", "")),
            state=f.get("State", ""),
        )
        for name in f.get("Partitions", "").split(","):
            if name:
                nodes_by_partition.setdefault(name, []).append(node)
    partitions = []
    for line in partitions_text.splitlines():
        f = _fields(line)
        if "PartitionName" not in f:
            continue
        name = f["PartitionName"]
        partitions.append(
            Partition(
                name=name,
                default=f.get("Default") == "YES",
                state=f.get("State", "UP"),
                max_time_min=time_to_minutes(f.get("MaxTime", "UNLIMITED")),
                max_nodes=_limit(f.get("MaxNodes")),
                max_cpus_per_node=_limit(f.get("MaxCPUsPerNode")),
                max_mem_per_node_mb=_limit(f.get("MaxMemPerNode")),
                nodes=tuple(nodes_by_partition.get(name, [])),
            )
        )
    return Cluster(tuple(partitions))


@functools.lru_cache(maxsize=1)
def _read_cluster_cached() -> Cluster | None:
    parts = command_output(["scontrol", "show", "partition", "-o"])
    nodes = command_output(["scontrol", "show", "node", "-o"])
    if parts is None or nodes is None:
        return None
    return parse_cluster(parts, nodes)


def read_cluster(fresh: bool = False) -> Cluster | None:
    """The cluster's partitions and nodes; None without SLURM (or if scontrol fails)."""
    if fresh:
        _read_cluster_cached.cache_clear()
    return _read_cluster_cached()


# ------------------------------------------------------------------ checking
def sbatch_test_only(res: Resources, job_name: str = "check", num_tasks: int = 1) -> str | None:
    """`sbatch --test-only` with these resources: None if accepted, else sbatch's message."""
    if shutil.which("sbatch") is None:
        return None
    argv = ["sbatch", "--test-only", f"--job-name={job_name}", *res.sbatch_options()]
    if num_tasks > 1:
        argv.append(f"--array=0-{num_tasks - 1}")
    argv += ["--output=/dev/null", "--wrap=true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"sbatch --test-only could not run: {e}"
    if proc.returncode == 0:
        return None
    text = " ".join((proc.stderr or proc.stdout).split())
    return text.replace("sbatch: error: ", "") or f"exit code {proc.returncode}"


def describe_request(res: Resources) -> str:
    """'--partition=gpu --cpus-per-task=4 --mem=32G --gres=gpu:1 --time=2:00:00' (as sbatch sees it)."""
    skip = ("--ntasks-per-node=1", "--nodes=1")
    return " ".join(o for o in res.sbatch_options() if o not in skip)


def check_requests(
    requests: Sequence[tuple[str, Resources, int]], cluster: Cluster | None = None
) -> list[str]:
    """Problems of (name, resources, num_tasks) requests, one line each; [] if all can start.

    Each line names the job, what it asked for and why it can never start; the caller adds
    what the cluster offers (`Cluster.describe`). Runs `sbatch --test-only` only for the
    requests that pass the limits check (it is slower and its messages are vaguer).
    """
    cluster = cluster or read_cluster()
    problems = []
    for name, res, num_tasks in requests:
        why = cluster.problem(res) if cluster is not None else None
        if why is None:
            refused = sbatch_test_only(res, name, num_tasks)
            if refused:
                why = f"refused by sbatch --test-only: {refused}"
        if why:
            problems.append(f"{name} ({describe_request(res)}) {why}")
    return problems


def refusal_message(problems: Sequence[str], cluster: Cluster | None, hint: str) -> str:
    """The error of a refused submission: each job's problem, what the cluster offers, a hint."""
    lines = [
        f"Nothing was submitted: {len(problems)} job{'s' if len(problems) > 1 else ''} "
        "can never start on this cluster:"
    ]
    lines += [f"  - {p}" for p in problems]
    if cluster is not None:
        lines.append("The cluster offers (partition: nodes; per node; time limit):")
        lines += [f"  {p.describe()}" for p in cluster.partitions]
    lines.append(hint)
    return "\n".join(lines)
