"""Chains of stages: on SLURM with `afterok` dependencies, locally in order.

    from rl755.slurm.chain import Stage, submit_chain
    from rl755.slurm.launcher import ArraySpec
    from rl755.slurm.sbatch import Resources

    stages = [
        Stage("collect", "scripts/data_gen/collect_rollouts.py",
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
`--kill-on-invalid-dep=yes`), so nothing stays pending forever. Nothing is submitted unless
every job can start on the cluster and every stage's flags parse; a submission that still
fails midway cancels the chain's jobs submitted before it. With `skip_done=True` a rerun
submits only what is not done yet. Locally the stages run in list order and the chain
stops at the first failure (later results have returncode None).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Sequence

from rl755.common.errors import BadInput
from rl755.slurm import job_state, launcher, resume, sbatch
from rl755.slurm.instances import flags_to_argv
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


def _fingerprint(stage: Stage, instances: list[list[dict]]) -> str:
    """What makes two submissions of a stage the same job: its processes' flags and resources."""
    text = json.dumps(
        {
            "script": os.path.abspath(stage.script),
            "instances": [[flags_to_argv(f) for f in task] for task in instances],
            "resources": dataclasses.asdict(stage.resources),
        },
        sort_keys=True,
    )
    return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclasses.dataclass
class _Plan:
    stage: Stage
    after: list[str]
    instances: list[list[dict]]
    out_dir: str | None
    fingerprint: str
    action: str = "submit"  # "submit", "done" (run records say so), "queued" (job still there)
    job_id: str | None = None


def plan_chain(
    stages: Sequence[Stage], skip_done: bool = True, record_dir: str | None = None
) -> list[_Plan]:
    """What a submission of `stages` does per stage: submit, or not ("done" / "queued").

    A stage is "done" when its run records say every process completed with these flags
    (`rl755.slurm.resume`) and so are the stages it waits for; "queued" when the chain's last
    record (in `record_dir`) has a job of it with the same flags and resources that SLURM still
    runs or holds, and the stages it waits for are done or queued.
    """
    deps = _dependencies(stages)
    previous = resume.latest_chain_record(record_dir) if skip_done else None
    before = {e.get("name"): e for e in (previous or {}).get("stages", [])}
    active_ids = [e["job_id"] for e in before.values() if e.get("job_id")]
    slurm = job_state.query_slurm(active_ids) if active_ids else {}
    plans: dict[str, _Plan] = {}
    for stage, after in zip(stages, deps):
        instances = launcher.expand_instances(stage.flags, stage.array or ArraySpec())
        plan = _Plan(
            stage,
            after,
            instances,
            launcher.default_out_dir(stage.flags),
            _fingerprint(stage, instances),
        )
        if skip_done:
            ready = [plans[n].action for n in after]
            old = before.get(stage.name) or {}
            job = slurm.get(str(old.get("job_id")))
            tasks = [j for j in slurm.values() if j.array_job_id == old.get("job_id")]
            states = {j.state for j in ([job] if job else []) + tasks}
            if all(a == "done" for a in ready) and resume.stage_done(plan.out_dir, instances):
                plan.action = "done"
            elif (
                states & set(resume.ACTIVE_STATES)
                and old.get("fingerprint") == plan.fingerprint
                and all(a in ("done", "queued") for a in ready)
            ):
                plan.action, plan.job_id = "queued", str(old["job_id"])
            elif states & set(resume.ACTIVE_STATES):
                raise BadInput(
                    f"Stage {stage.name}'s job {old['job_id']} from the last submission "
                    f"({previous['_path']}) is still {'/'.join(sorted(states))}, with other flags or "
                    f"resources (or after stages that must run again). Cancel it "
                    f"(scancel {old['job_id']}) or let it finish, then submit again."
                )
        plans[stage.name] = plan
    return list(plans.values())


def submit_chain(
    stages: Sequence[Stage],
    *,
    local: bool = False,
    python: str | None = None,
    check: bool = True,
    dry_run: bool = False,
    skip_done: bool = False,
    record_dir: str | None = None,
    label: str = "chain",
    resource_hint: str = "Ask for less or another partition (the stages' Resources).",
    before_submitting=None,
) -> list[LaunchResult]:
    """Submits (or runs locally) `stages` in order; returns one LaunchResult per stage.

    On SLURM, before the first submission (`check`): every job's request is checked against
    the cluster (partition limits and `sbatch --test-only`; one BadInput names every job that
    could never start, what it asked for and what the cluster offers, plus `resource_hint`),
    then every stage's flags (`--only_check_args`). If a submission still fails, the jobs
    already submitted for this chain are cancelled (all or nothing) and SlurmError says so.

    skip_done: do not submit stages whose run records say they completed with these flags,
      nor stages still queued from the last submission recorded in `record_dir` (`plan_chain`);
      their results have a `note` instead of a new job id.
    record_dir: where `chain-<time>.json` (the stages in order with their job ids) is
      written after a SLURM submission; `scripts/status.py` sums a chain up from it,
      starting the line with `label`.
    before_submitting: called once the checks passed, before the first submission (e.g. to
      write a file the jobs read); not called when nothing is to be submitted.
    Locally, stages after a failed one are not run (their returncode stays None).
    """
    if local:
        return _run_local_chain(stages, python=python, check=check, dry_run=dry_run)
    plans = plan_chain(stages, skip_done=skip_done, record_dir=record_dir)
    todo = [p for p in plans if p.action == "submit"]
    if check and todo:
        launcher.check_can_start(
            [(p.stage.name, p.stage.resources, len(p.instances)) for p in todo], resource_hint
        )
        _check_flags([(p.stage, p.instances[0][0]) for p in todo], python)
    if todo and before_submitting is not None:
        before_submitting()
    results: list[LaunchResult] = []
    job_ids: dict[str, str] = {p.stage.name: p.job_id for p in plans if p.job_id}
    submitted: list[LaunchResult] = []
    for plan in plans:
        stage = plan.stage
        if plan.action != "submit":
            note = {
                "done": "completed already (its run records match these flags)",
                "queued": "still queued from the last submission",
            }[plan.action]
            results.append(
                LaunchResult(
                    name=stage.name,
                    commands=[],
                    out_dir=plan.out_dir,
                    log_dir="",
                    job_id=plan.job_id,
                    note=note,
                )
            )
            continue
        try:
            result = launcher.launch(
                stage.script,
                stage.flags,
                dependencies=[job_ids[n] for n in plan.after if job_ids.get(n)],
                dry_run=dry_run,
                **_launch_kwargs(stage, python),
            )
        except BaseException as e:  # Ctrl-C too: nothing of a half-submitted chain stays
            message = _undo(submitted, stage.name, e)
            if not isinstance(e, Exception):
                print(message, file=sys.stderr)
                raise
            raise sbatch.SlurmError(message) from e
        if result.job_id:
            job_ids[stage.name] = result.job_id
            submitted.append(result)
        results.append(result)
    if record_dir and submitted:
        resume.write_chain_record(
            record_dir,
            [
                {
                    "name": p.stage.name,
                    "job_id": job_ids.get(p.stage.name),
                    "action": p.action,
                    "out_dir": p.out_dir,
                    "num_tasks": len(p.instances),
                    "after": p.after,
                    "fingerprint": p.fingerprint,
                }
                for p in plans
            ],
            label=label,
        )
    return results


def _launch_kwargs(stage: Stage, python: str | None) -> dict:
    return dict(
        resources=stage.resources,
        array=stage.array,
        job_name=stage.name,
        log_dir=stage.log_dir,
        requeue=stage.requeue,
        python=python,
        check=False,
        how="rl755.slurm.chain.submit_chain",
    )


def _check_flags(stage_flags: Sequence[tuple[Stage, dict]], python: str | None) -> None:
    """Every stage's flags at once: each check starts the stage's interpreter and imports."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(launcher.check_stage, s.script, f, python) for s, f in stage_flags]
        for future in futures:
            future.result()


def _undo(submitted: Sequence[LaunchResult], failed: str, error: Exception) -> str:
    """Cancels the chain's jobs submitted so far; the message says what happened."""
    ids = [r.job_id for r in submitted]
    head = f"Submitting stage {failed} failed: {error}"
    if not ids:
        return head + "\nNothing of this chain was submitted."
    complaint = sbatch.cancel(ids)
    for r in submitted:  # status must not list jobs that were never meant to run
        with contextlib.suppress(OSError):
            os.remove(os.path.join(r.log_dir, f"job-{r.job_id}.json"))
    names = ", ".join(f"{r.name} ({r.job_id})" for r in submitted)
    jobs = f"{len(ids)} job{'s' if len(ids) > 1 else ''}"
    if complaint:
        return (
            f"{head}\nCancelling the {jobs} already submitted for this chain failed "
            f"({complaint}); cancel them yourself: scancel {' '.join(ids)}  [{names}]"
        )
    return (
        f"{head}\nCancelled the {jobs} already submitted for this chain ({names}): "
        "nothing of it is left in the queue. Fix the cause and submit again."
    )


def _run_local_chain(stages, *, python, check, dry_run) -> list[LaunchResult]:
    _dependencies(stages)
    if check:
        firsts = [launcher.expand_instances(s.flags, s.array or ArraySpec())[0][0] for s in stages]
        _check_flags(list(zip(stages, firsts)), python)
    results, failed = [], False
    for stage in stages:
        result = launcher.launch(
            stage.script,
            stage.flags,
            local=True,
            dry_run=dry_run or failed,
            **_launch_kwargs(stage, python),
        )
        failed = failed or (result.returncode not in (0, None))
        results.append(result)
    return results
