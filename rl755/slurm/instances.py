"""How one stage becomes processes: array tasks x instances, and flags <-> command lines.

Placeholders in flag values are replaced per instance (only these names; other braces
are left alone):
    {task_index}          array task index i (0..num_tasks-1)
    {num_tasks}           number of array tasks N
    {instance_index}      instance within the task, 0..K-1 (alias {gpu_index})
    {instances_per_task}  K
    {global_index}        i*K + instance_index (alias {outer_shard_index})
    {num_instances}       N*K (alias {num_outer_shards})
`ArraySpec.split` names integer flags whose value is a total to divide exactly among the
N*K instances (remainders go to the first ones), e.g. --num_rollouts.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

_PLACEHOLDER_RE = re.compile(
    r"\{(task_index|num_tasks|instance_index|gpu_index|instances_per_task|global_index"
    r"|outer_shard_index|num_instances|num_outer_shards)\}"
)


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """How to shard a stage: N array tasks x K concurrent instances per task.

    Attributes:
      num_tasks: N, the number of array tasks (SLURM jobs).
      instances_per_task: K, processes started concurrently in each task (e.g. one per GPU).
      split: integer flags whose value is divided exactly among the N*K instances.
      max_concurrent: at most this many array tasks run at once (`--array=0-N%M`).
    """

    num_tasks: int = 1
    instances_per_task: int = 1
    split: tuple[str, ...] = ()
    max_concurrent: int | None = None

    def __post_init__(self):
        if self.num_tasks < 1 or self.instances_per_task < 1:
            raise ValueError(f"num_tasks and instances_per_task must be >= 1, got {self}.")
        if isinstance(self.split, str):
            object.__setattr__(self, "split", (self.split,))

    @property
    def num_instances(self) -> int:
        return self.num_tasks * self.instances_per_task


def split_evenly(total: int, parts: int) -> list[int]:
    """split_evenly(10, 4) -> [3, 3, 2, 2]: sums to total, sizes differ by at most one."""
    if parts < 1 or total < 0:
        raise ValueError(f"Cannot split {total} into {parts} parts.")
    base, rest = divmod(total, parts)
    return [base + (1 if i < rest else 0) for i in range(parts)]


def flags_to_argv(flags: Mapping[str, object]) -> list[str]:
    """{"n": 3, "shuffle": False, "xs": [1, 2], "skip": None} -> ["--n=3", "--noshuffle", "--xs=1,2"].

    True -> `--name`, False -> `--noname` (absl booleans), lists -> comma-joined, None -> omitted.
    """
    argv = []
    for name, value in flags.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", str(name)):
            raise ValueError(f"{name!r} is not a valid flag name.")
        if value is None:
            continue
        if value is True:
            argv.append(f"--{name}")
        elif value is False:
            argv.append(f"--no{name}")
        elif isinstance(value, (list, tuple)):
            argv.append(f"--{name}={','.join(str(v) for v in value)}")
        else:
            argv.append(f"--{name}={value}")
    return argv


def parse_flag_args(args: Sequence[str]) -> dict[str, object]:
    """["--n=3", "--verbose", "--noshuffle"] -> {"n": "3", "verbose": True, "noshuffle": True}.

    The inverse of `flags_to_argv` on the command line; values stay strings. Requires the
    `--name=value` form so that nothing is ambiguous.
    """
    flags: dict[str, object] = {}
    for arg in args:
        if not arg.startswith("-") or arg in ("-", "--"):
            raise ValueError(f"Stage argument {arg!r} is not a flag; use --name=value.")
        body = arg.lstrip("-")
        if "=" in body:
            name, value = body.split("=", 1)
            flags[name] = value
        else:
            flags[body] = True
    return flags


def _substitute(value: object, values: Mapping[str, int]) -> object:
    if isinstance(value, str):
        return _PLACEHOLDER_RE.sub(lambda m: str(values[m.group(1)]), value)
    if isinstance(value, (list, tuple)):
        return [_substitute(v, values) for v in value]
    return value


def expand_instances(flags: Mapping[str, object], array: ArraySpec) -> list[list[dict]]:
    """Per-instance flags: result[task][instance] = the flags of that process."""
    shares = {}
    for name in array.split:
        if name not in flags:
            raise ValueError(f"Cannot split --{name}: the stage has no such flag in {list(flags)}.")
        try:
            total = int(flags[name])
        except (TypeError, ValueError):
            raise ValueError(f"Cannot split --{name}={flags[name]!r}: not an integer.") from None
        if total < array.num_instances:
            raise ValueError(
                f"--{name}={total} cannot be split over {array.num_instances} instances "
                f"(each needs at least 1); use fewer array tasks."
            )
        shares[name] = split_evenly(total, array.num_instances)
    tasks = []
    for t in range(array.num_tasks):
        instances = []
        for k in range(array.instances_per_task):
            g = t * array.instances_per_task + k
            values = {
                "task_index": t,
                "num_tasks": array.num_tasks,
                "instance_index": k,
                "gpu_index": k,
                "instances_per_task": array.instances_per_task,
                "global_index": g,
                "outer_shard_index": g,
                "num_instances": array.num_instances,
                "num_outer_shards": array.num_instances,
            }
            inst = {name: _substitute(v, values) for name, v in flags.items()}
            for name, share in shares.items():
                inst[name] = share[g]
            instances.append(inst)
        tasks.append(instances)
    return tasks
