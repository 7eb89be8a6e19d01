"""Run any stage script locally or as a SLURM job (or job array), with one API.

A stage script is an absl script (`scripts/...py --flag=value ...`). `launch` runs it:

    from rl755.slurm.launcher import ArraySpec, launch
    from rl755.slurm.sbatch import Resources

    # 100 rollouts split over 4 array tasks (25 each) into one out_dir:
    launch("scripts/data_gen/collect_rollouts.py",
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

Placeholders in flag values ({task_index}, {gpu_index}, {outer_shard_index}, ...) and
`ArraySpec.split` are explained in `rl755.slurm.instances`.

On SLURM the array is one `sbatch --array` submission; locally the tasks run one after
another, each task's instances concurrently, and the first failure stops the run.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence

from rl755.common.errors import BadInput
from rl755.common.sharded_io import write_json_atomic, write_text_atomic
from rl755.slurm import cluster, sbatch
from rl755.slurm.instances import (  # noqa: F401  (re-exported: the launcher's API)
    _PLACEHOLDER_RE,
    ArraySpec,
    expand_instances,
    flags_to_argv,
    parse_flag_args,
    split_evenly,
)
from rl755.slurm.sbatch import Resources

OUT_DIR_FLAGS = ("out_dir", "output_dir", "model_dir")
RAY_ON_SLURM = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "scripts",
    "ray_on_slurm.sh",
)
SLURM_SUBDIR = "slurm"


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


def check_can_start(
    requests: Sequence[tuple[str, Resources, int]],
    hint: str = "Ask for less (--cpus, --mem, --gpus, --time) or another --partition.",
) -> None:
    """Raises BadInput (before anything is submitted) if a (name, resources, num_tasks) job
    can never start on this cluster: its partition's limits, then `sbatch --test-only`.
    Checks nothing where there is no SLURM."""
    if not sbatch.have_slurm():
        return
    found = cluster.read_cluster()
    problems = cluster.check_requests(requests, found)
    if problems:
        raise BadInput(cluster.refusal_message(problems, found, hint))


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
    note: str | None = None  # not submitted by this call: "done already", "still queued"

    @property
    def log_paths(self) -> tuple[str, str] | None:
        """(stdout, stderr) log path patterns of the SLURM job; None for local runs."""
        if self.job_id is None:
            return None
        stem = f"logs-{self.job_id}_%a" if len(self.commands) > 1 else f"logs-{self.job_id}"
        return tuple(os.path.join(self.log_dir, stem + ext) for ext in (".out", ".err"))

    def summary(self) -> str:
        lines = []
        if self.note:
            job = f" (job {self.job_id})" if self.job_id else ""
            lines.append(f"Not submitted {self.name}{job}: {self.note}")
            return "\n".join(lines + ([f"  outputs:       {self.out_dir}"] if self.out_dir else []))
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
      check: validate the flags with the script (`--only_check_args`) and, on SLURM, that
        the cluster can ever run the request (`check_can_start`) before launching.
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
      ValueError / FileNotFoundError on bad input, BadInput if the cluster can never run the
      request, before anything runs;
      sbatch.SlurmError if sbatch fails.
    """
    resources = resources or Resources()
    array = array or ArraySpec()
    resources.validate()
    name = job_name or os.path.splitext(os.path.basename(script))[0]
    per_instance = expand_instances(flags, array)
    commands = [[stage_argv(script, f, python) for f in task] for task in per_instance]
    if check and not local:
        check_can_start([(name, resources, len(commands))])
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
