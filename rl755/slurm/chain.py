"""Chains of stages: on SLURM with `afterok` dependencies, locally in order.

    from rl755.slurm.chain import Stage, submit_chain
    from rl755.slurm.launcher import ArraySpec
    from rl755.slurm.sbatch import Resources

    stages = [
        Stage("collect", "scripts/data_gen/car_racing/parallel_rollout_main.py",
              {"num_rollouts": 1000, "out_dir": raw_dir, ...},
              Resources(cpus=8, mem="32G", time="8:00:00"),
              array=ArraySpec(num_tasks=10, split=("num_rollouts",))),
        Stage("train_vae", "scripts/models/train.py", {"model_dir": vae_dir, ...},
              Resources(partition="volta-gpu", gpus=1, cpus=4, mem="32G", time="12:00:00")),
        ...
    ]
    results = submit_chain(stages)               # SLURM: returns at once, jobs queued
    results = submit_chain(stages, local=True)   # here, in order, blocking

On SLURM each stage waits for the stages it depends on (by default the previous one;
`after=("collect",)` names others, `after=()` none) to complete successfully. When a stage
fails, SLURM cancels every stage that depends on it, directly or not (the launcher passes
`--kill-on-invalid-dep=yes`), so nothing stays pending forever. Locally the stages run in
list order and the chain stops at the first failure (later results have returncode None).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections.abc import Sequence

from rl755.slurm import launcher
from rl755.slurm.launcher import ArraySpec, LaunchResult
from rl755.slurm.sbatch import Resources

_PREVIOUS = object()


@dataclasses.dataclass(frozen=True)
class Stage:
    """One step of a chain.

    Attributes:
      name: unique in the chain; the SLURM job name.
      script: path of the absl stage script.
      flags: its flags {name: value} (placeholders allowed, see rl755.slurm.launcher).
      resources: what the job (or each array task) asks SLURM for.
      array: shard the stage over an array; None = one job.
      after: names of the stages this one waits for; default: the previous stage.
      requeue: let SLURM requeue it; the stage resumes from its outputs.
      log_dir: default: `<out_dir>/slurm` (see launcher.launch).
    """

    name: str
    script: str
    flags: dict
    resources: Resources = Resources()
    array: ArraySpec | None = None
    after: Sequence[str] | object = _PREVIOUS
    requeue: bool = False
    log_dir: str | None = None


def _dependencies(stages: Sequence[Stage]) -> list[list[str]]:
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ValueError(f"Stage names must be unique, got {names}.")
    deps = []
    for i, stage in enumerate(stages):
        if stage.after is _PREVIOUS:
            deps.append([stages[i - 1].name] if i else [])
            continue
        after = list(stage.after)
        for name in after:
            if name not in names[:i]:
                raise ValueError(
                    f"Stage {stage.name!r} is after {name!r}, which is not an earlier stage "
                    f"(earlier: {names[:i]})."
                )
        deps.append(after)
    return deps


def submit_chain(
    stages: Sequence[Stage],
    *,
    local: bool = False,
    python: str | None = None,
    check: bool = True,
    dry_run: bool = False,
) -> list[LaunchResult]:
    """Submits (or runs locally) `stages` in order; returns one LaunchResult per stage.

    All stages' flags are validated (`check`) before the first one is submitted or run.
    Locally, stages after a failed one are not run (their returncode stays None).
    """
    deps = _dependencies(stages)
    if check:  # all at once: each check starts the stage's interpreter and imports
        firsts = [launcher.expand_instances(s.flags, s.array or ArraySpec())[0][0] for s in stages]
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            futures = [
                pool.submit(launcher.check_stage, s.script, f, python)
                for s, f in zip(stages, firsts)
            ]
            for future in futures:
                future.result()
    results: list[LaunchResult] = []
    job_ids: dict[str, str] = {}
    failed = False
    for stage, after in zip(stages, deps):
        kwargs = dict(
            resources=stage.resources,
            array=stage.array,
            job_name=stage.name,
            log_dir=stage.log_dir,
            requeue=stage.requeue,
            python=python,
            check=False,
            how="rl755.slurm.chain.submit_chain",
        )
        if local:
            result = launcher.launch(
                stage.script, stage.flags, local=True, dry_run=dry_run or failed, **kwargs
            )
            failed = failed or (result.returncode not in (0, None))
        else:
            result = launcher.launch(
                stage.script,
                stage.flags,
                dependencies=[job_ids[n] for n in after if job_ids.get(n)],
                dry_run=dry_run,
                **kwargs,
            )
            if result.job_id:
                job_ids[stage.name] = result.job_id
        results.append(result)
    return results
