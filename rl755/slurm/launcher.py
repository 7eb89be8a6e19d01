"""Run any stage script locally or as a SLURM job (or job array), with one API.

A stage script is an absl script (`scripts/...py --flag=value ...`). `launch` runs it:

    from rl755.slurm.launcher import ArraySpec, launch
    from rl755.slurm.sbatch import Resources

    # 100 rollouts split over 4 array tasks (25 each) into one out_dir:
    launch("scripts/data_gen/car_racing/parallel_rollout_main.py",
           {"num_rollouts": 100, "parallelism": 4, "out_dir": "/data/raw"},
           resources=Resources(cpus=4, mem="16G", time="8:00:00"),
           array=ArraySpec(num_tasks=4, split=("num_rollouts",)))

    # encoding: 12 outer shards = 3 array tasks x 4 GPUs; task i runs 4 instances with
    # --outer_shard_index=4i..4i+3 and --gpu_index=0..3:
    launch("scripts/data_gen/encode_raw_rollouts.py",
           {"num_outer_shards": 12, "outer_shard_index": "{outer_shard_index}",
            "gpu_index": "{gpu_index}", ...},
           resources=Resources(partition="volta-gpu", gpus=4, cpus=8, mem="64G"),
           array=ArraySpec(num_tasks=3, instances_per_task=4))

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

On SLURM the array is one `sbatch --array` submission; locally the tasks run one after
another, each task's instances concurrently, and the first failure stops the run.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence

from rl755.common.sharded_io import write_json_atomic, write_text_atomic
from rl755.slurm import sbatch
from rl755.slurm.sbatch import Resources

_PLACEHOLDER_RE = re.compile(
    r"\{(task_index|num_tasks|instance_index|gpu_index|instances_per_task|global_index"
    r"|outer_shard_index|num_instances|num_outer_shards)\}"
)
OUT_DIR_FLAGS = ("out_dir", "output_dir", "model_dir")
RAY_ON_SLURM = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "scripts",
    "ray_on_slurm.sh",
)
SLURM_SUBDIR = "slurm"


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


def stage_argv(script: str, flags: Mapping[str, object], python: str | None = None) -> list[str]:
    return [python or sys.executable, os.path.abspath(script)] + flags_to_argv(flags)


def check_stage(script: str, flags: Mapping[str, object], python: str | None = None) -> None:
    """Fails fast (before anything is submitted) on a missing script or flags it rejects.

    Runs the script with absl's `--only_check_args`, which parses and validates the flags
    (unknown names, types, required flags) and exits before `main`.
    """
    if not os.path.isfile(script):
        raise FileNotFoundError(f"Stage script {script} does not exist.")
    argv = stage_argv(script, flags, python) + ["--only_check_args"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        err = "\n".join(proc.stderr.strip().splitlines()[-15:])
        raise ValueError(f"{script} rejects its flags ({quote(argv)}):\n{err}")


def quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


def default_out_dir(flags: Mapping[str, object]) -> str | None:
    for name in OUT_DIR_FLAGS:
        value = flags.get(name)
        if isinstance(value, str) and value and not _PLACEHOLDER_RE.search(value):
            return os.path.abspath(value)
    return None


@dataclasses.dataclass
class LaunchResult:
    """What `launch` did. job_id is None for local runs; returncode None for SLURM jobs."""

    name: str
    commands: list[list[list[str]]]  # [task][instance] -> argv
    out_dir: str | None
    log_dir: str
    job_id: str | None = None
    sbatch_script: str | None = None
    returncode: int | None = None

    @property
    def log_paths(self) -> tuple[str, str] | None:
        """(stdout, stderr) log path patterns of the SLURM job; None for local runs."""
        if self.job_id is None:
            return None
        stem = f"logs-{self.job_id}_%a" if len(self.commands) > 1 else f"logs-{self.job_id}"
        return tuple(os.path.join(self.log_dir, stem + ext) for ext in (".out", ".err"))

    def summary(self) -> str:
        lines = []
        if self.job_id is None and self.returncode is None and self.sbatch_script:
            lines.append(f"Wrote {self.sbatch_script} (not submitted; submit: sbatch <it>)")
        elif self.job_id is None and self.returncode is None:
            lines.append(f"Would run {self.name} locally: {quote(self.commands[0][0])}")
        elif self.job_id is not None:
            kind = f"array of {len(self.commands)} tasks" if len(self.commands) > 1 else "job"
            lines.append(f"Submitted {self.name}: {kind} {self.job_id}")
            lines.append(f"  sbatch script: {self.sbatch_script}")
            lines.append(f"  logs:          {self.log_paths[0]}  (and .err)")
        else:
            lines.append(f"Ran {self.name} locally: exit code {self.returncode}")
        if self.out_dir:
            lines.append(f"  outputs:       {self.out_dir}")
            lines.append(f"  status:        scripts/status.py {self.out_dir}")
        if self.job_id is not None:
            lines.append(f"  cancel:        scancel {self.job_id}")
        return "\n".join(lines)


def run_local(commands: Sequence[Sequence[Sequence[str]]], env: Mapping | None = None) -> int:
    """Runs tasks one after another, each task's instances concurrently; stops at a failure.

    Returns 0 or the first non-zero exit code.
    """
    for t, task in enumerate(commands):
        procs = []
        for k, argv in enumerate(task):
            proc_env = dict(os.environ if env is None else env)
            if len(commands) > 1:
                proc_env["SLURM_ARRAY_TASK_ID"] = str(t)
            proc_env["RL755_INSTANCE_INDEX"] = str(k)
            procs.append(subprocess.Popen(list(argv), env=proc_env))
        codes = [p.wait() for p in procs]
        failed = [c for c in codes if c != 0]
        if failed:
            return failed[0]
    return 0


def launch(
    script: str,
    flags: Mapping[str, object],
    *,
    resources: Resources | None = None,
    array: ArraySpec | None = None,
    local: bool = False,
    job_name: str | None = None,
    log_dir: str | None = None,
    dependencies: Sequence[str] = (),
    requeue: bool = False,
    python: str | None = None,
    check: bool = True,
    dry_run: bool = False,
    ray: bool = False,
    srun: bool = False,
    how: str = "rl755.slurm.launcher.launch",
) -> LaunchResult:
    """Runs `script` with `flags` locally, or submits it to SLURM.

    Args:
      script: path of an absl stage script.
      flags: the stage's flags {name: value}; values may hold placeholders (module doc).
      resources: what each job / array task asks for (SLURM only).
      array: shard the stage over an array (SLURM) or a sequence of local runs.
      local: run here (blocking) instead of submitting.
      job_name: default: the script's name without ".py".
      log_dir: where the sbatch script and `logs-%j.out/.err` go; default
        `<out_dir>/slurm` (out_dir from the --out_dir/--output_dir/--model_dir flag),
        else `./slurm`.
      dependencies: job ids that must complete successfully first (afterok); if one fails,
        SLURM cancels this job.
      requeue: let SLURM requeue the job; the stage resumes from its outputs.
      python: interpreter for the stage; default: this one (the venv's).
      check: validate the flags with the script (`--only_check_args`) before launching.
      dry_run: write the sbatch script but do not submit it (nor run anything locally).
      ray: on SLURM, run the stage under scripts/ray_on_slurm.sh: a Ray cluster over the
        job's nodes, the stage getting --ray_address (it must define that flag).
      srun: on SLURM, start the stage with `srun` (one process per node, SLURM_STEP_* and
        SLURM_PROCID set), as tf.distribute's SlurmClusterResolver needs for multi-worker
        training over `resources.nodes` nodes.
      how: who launched, for the sbatch header comment.
    Returns:
      A LaunchResult; `.summary()` says where logs and outputs go.
    Raises:
      ValueError / FileNotFoundError on bad input, before anything runs;
      sbatch.SlurmError if sbatch fails.
    """
    resources = resources or Resources()
    array = array or ArraySpec()
    resources.validate()
    name = job_name or os.path.splitext(os.path.basename(script))[0]
    per_instance = expand_instances(flags, array)
    commands = [[stage_argv(script, f, python) for f in task] for task in per_instance]
    if check:
        check_stage(script, per_instance[0][0], python)
    out_dir = default_out_dir(flags)
    log_dir = os.path.abspath(log_dir or os.path.join(out_dir or os.getcwd(), SLURM_SUBDIR))
    result = LaunchResult(name=name, commands=commands, out_dir=out_dir, log_dir=log_dir)
    if local:
        if not dry_run:
            result.returncode = run_local(commands)
        return result
    if ray and srun:
        raise ValueError("Choose ray or srun: ray_on_slurm.sh starts its own srun steps.")
    if srun:
        commands = [[["srun", "--kill-on-bad-exit=1"] + argv for argv in task] for task in commands]
        result.commands = commands
    if ray:
        if "ray_address" in flags:
            raise ValueError("With ray=True the launcher sets --ray_address; do not pass it.")
        if not os.path.isfile(RAY_ON_SLURM):
            raise FileNotFoundError(f"{RAY_ON_SLURM} not found (needs the rl755 repository).")
        commands = [[["bash", RAY_ON_SLURM, "--"] + argv for argv in task] for task in commands]
        result.commands = commands

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    script_path = os.path.join(log_dir, f"{name}-{stamp}.sbatch")
    text = sbatch.render_sbatch_script(
        commands,
        job_name=name,
        resources=resources,
        log_dir=log_dir,
        how=how,
        dependencies=dependencies,
        requeue=requeue,
        max_concurrent=array.max_concurrent,
        chdir=os.getcwd(),
        description=[
            f"Launched with: {quote([os.path.basename(sys.argv[0])] + sys.argv[1:])}",
            f"Stage: {script}",
            f"Outputs: {out_dir or '(none given)'}",
        ],
    )
    write_text_atomic(script_path, text)
    result.sbatch_script = script_path
    if dry_run:
        return result
    result.job_id = sbatch.submit(script_path)
    _write_submission(result, dependencies)
    return result


def _write_submission(result: LaunchResult, dependencies: Sequence[str]) -> None:
    """`<log_dir>/job-<id>.json`: lets `status` show jobs that have not started (yet)."""
    info = {
        "job_id": result.job_id,
        "name": result.name,
        "num_tasks": len(result.commands),
        "out_dir": result.out_dir,
        "log_dir": result.log_dir,
        "sbatch_script": result.sbatch_script,
        "dependencies": list(dependencies),
        "submit_time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    path = os.path.join(result.log_dir, f"job-{result.job_id}.json")
    write_json_atomic(path, info)
