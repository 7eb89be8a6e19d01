"""Running a recipe (`rl755.pipeline.recipes`): here, step after step, or on SLURM.

    summary = run_recipe("doom_dream", out_dir="runs/doom")          # blocking, prints a table
    results = submit_recipe("doom_dream", out_dir="/scratch/me/doom")   # afterok chain

Rerunning with the same out_dir resumes: a step whose run records say it completed with its
flags is skipped (`rl755.slurm.resume.stage_done`), any other runs again and continues from
what it left (checkpoints, shards). `<out_dir>/recipe.json` names the recipe, its --seed and
the code version (git commit) that started the run; `<out_dir>/recipe_summary.json` has per
step the status, wall time and code version from its run records, and each evaluation's
scores: what a results-page row needs.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import statistics
import time

from rl755.common import run_record, sharded_io
from rl755.common.errors import BadInput
from rl755.pipeline.recipe_book import get_recipe
from rl755.pipeline.recipes import RECIPE_FILE, Recipe, build_recipe_stages, output_dir
from rl755.pipeline.stages import PIPELINE_SCRIPT, REPO_ROOT, stage_environ
from rl755.slurm import resume

SUMMARY = "recipe_summary.json"


def read_recipe_file(out_dir: str) -> dict | None:
    """`<out_dir>/recipe.json` ({"recipe", "seed", "deterministic", "code"}) or None."""
    try:
        with open(os.path.join(out_dir, RECIPE_FILE)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise BadInput(f"{os.path.join(out_dir, RECIPE_FILE)} is unreadable: {e}.") from e


def _start(name: str, out_dir: str, seed: int, deterministic: bool | None) -> Recipe:
    """The recipe, after checking that out_dir holds no other run; writes recipe.json."""
    recipe = get_recipe(name)
    out_dir = os.path.abspath(out_dir)
    previous = read_recipe_file(out_dir)
    if previous and (previous.get("recipe"), previous.get("seed")) != (name, int(seed)):
        raise BadInput(
            f"--out_dir {out_dir} holds a run of --preset={previous.get('recipe')} "
            f"--seed={previous.get('seed')} ({RECIPE_FILE}); rerun that command to resume it, "
            "or pass another --out_dir."
        )
    if os.path.exists(os.path.join(out_dir, "pipeline.json")):
        raise BadInput(
            f"--out_dir {out_dir} holds a run of a pipeline preset (pipeline.json); pass "
            "another --out_dir for a recipe."
        )
    return recipe


def _write_recipe_file(name: str, out_dir: str, seed: int, deterministic: bool | None) -> None:
    path = os.path.join(out_dir, RECIPE_FILE)
    if os.path.exists(path):
        return  # the code version that started the run stays; each step records its own
    data = {
        "recipe": name,
        "seed": int(seed),
        "deterministic": deterministic,
        "code": run_record.git_info(),
        "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    sharded_io.write_json_atomic(path, data)


def _check_flags(stages, python: str | None) -> None:
    """Every stage script's flags, four at a time (each check starts an interpreter)."""
    from rl755.slurm import launcher

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(launcher.check_stage, s.script, s.flags, python) for s in stages]
        for future in futures:
            future.result()


def _done(stage) -> bool:
    return resume.stage_done(resume_dir(stage), [[stage.flags]])


def resume_dir(stage) -> str:
    from rl755.slurm import launcher

    return launcher.default_out_dir(stage.flags)


def run_recipe(
    name: str,
    out_dir: str,
    seed: int = 0,
    deterministic: bool | None = None,
    python: str | None = None,
    until: str | None = None,
) -> dict:
    """Runs recipe `name` here, step after step, skipping finished steps; returns (and
    writes) the summary. `until`: stop after this step (e.g. to try the first steps).

    Raises BadInput (out_dir holds another run), ValueError (a step's flags rejected by its
    script, an unknown `until`), RuntimeError (a step failed: rerun to continue)."""
    from rl755.slurm import launcher

    recipe = _start(name, out_dir, seed, deterministic)
    out_dir = os.path.abspath(out_dir)
    stages = build_recipe_stages(recipe, out_dir, seed=seed, deterministic=deterministic)
    stages = _until(recipe, stages, until)
    todo = [s for s in stages if not _done(s)]
    _check_flags(todo, python)
    os.makedirs(out_dir, exist_ok=True)
    _write_recipe_file(name, out_dir, seed, deterministic)
    os.environ.update(stage_environ(out_dir))
    for i, stage in enumerate(stages):
        header = f"\n=== [{i + 1}/{len(recipe.steps)}] {stage.name} ==="
        if stage not in todo:
            print(f"{header} done already (its run records match these flags)", flush=True)
            continue
        print(header, flush=True)
        result = launcher.launch(
            stage.script, stage.flags, local=True, job_name=stage.name, python=python, check=False
        )
        if result.returncode != 0:
            summary = write_summary(out_dir)
            print(format_summary(summary), flush=True)
            raise RuntimeError(
                f"Step {stage.name} failed (exit {result.returncode}); see its output above. "
                "Fix the cause and rerun the same command: finished steps are kept."
            )
    summary = write_summary(out_dir)
    print(format_summary(summary), flush=True)
    return summary


def _until(recipe, stages: list, until: str | None) -> list:
    """The stages up to step `until` (all if None); ValueError names the valid steps."""
    if until is None:
        return stages
    recipe.step(until)
    return stages[: [s.name for s in stages].index(until) + 1]


def submit_recipe(
    name: str,
    out_dir: str,
    seed: int = 0,
    dry_run: bool = False,
    python: str | None = None,
    overrides=None,
    deterministic: bool | None = None,
    until: str | None = None,
):
    """Submits recipe `name` to SLURM as an afterok chain (steps wait only for the steps
    they need), ending with a report job that writes the summary; returns LaunchResults.
    Steps done already or still queued are not submitted again (`submit_chain`). `until`:
    submit the steps up to this one (and the report); raises ValueError if unknown."""
    from rl755.pipeline.resources import flag_hint, stage_resources
    from rl755.slurm import launcher, site
    from rl755.slurm.chain import Stage, submit_chain

    recipe = _start(name, out_dir, seed, deterministic)
    out_dir = os.path.abspath(out_dir)
    cluster = site.settings()

    def resources(kind):
        return stage_resources(recipe, kind, overrides, cluster)

    stages = build_recipe_stages(recipe, out_dir, seed, resources, deterministic)
    stages = _until(recipe, stages, until)
    stages.append(
        Stage(
            "report",
            os.path.join(REPO_ROOT, PIPELINE_SCRIPT),
            {"out_dir": out_dir, "report": True},
            resources("report"),
            after=tuple(s.name for s in stages),
        )
    )
    os.environ.update(stage_environ(out_dir))  # sbatch exports the submitting environment

    def before_submitting():
        if not dry_run:
            os.makedirs(out_dir, exist_ok=True)
            _write_recipe_file(name, out_dir, seed, deterministic)

    return submit_chain(
        stages,
        dry_run=dry_run,
        python=python,
        skip_done=True,
        record_dir=os.path.join(out_dir, launcher.SLURM_SUBDIR),
        label=f"recipe {name}",
        resource_hint=flag_hint(),
        before_submitting=before_submitting,
    )


# ---- the summary ------------------------------------------------------------------------------
def _scores(evaluation_dir: str) -> dict | None:
    try:
        with open(os.path.join(evaluation_dir, "evaluation.json")) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None

    def stats(returns):
        return {
            "mean": statistics.fmean(returns),
            "std": statistics.pstdev(returns),
            "median": statistics.median(returns),
        }

    out = {"episodes": len(data["returns"]), "seeds": data.get("seeds"), **stats(data["returns"])}
    if data.get("random_policy"):
        out["random_policy"] = stats(data["random_policy"]["returns"])
    return out


def _seconds(record: dict) -> float:
    import datetime

    if not record.get("start_time") or not record.get("end_time"):
        return 0.0
    start, end = (datetime.datetime.fromisoformat(record[k]) for k in ("start_time", "end_time"))
    return (end - start).total_seconds()


def write_summary(out_dir: str) -> dict:
    """`<out_dir>/recipe_summary.json` from the run's recipe.json and its steps' run records:
    per step the status ("ok" or "not done"), wall time and the code version it ran with;
    per evaluation step its scores. Raises BadInput if out_dir holds no recipe run."""
    out_dir = os.path.abspath(out_dir)
    run = read_recipe_file(out_dir)
    if run is None:
        raise BadInput(f"{out_dir} holds no recipe run ({RECIPE_FILE}); start one first.")
    recipe = get_recipe(run["recipe"])
    stages = build_recipe_stages(recipe, out_dir, run["seed"], deterministic=run["deterministic"])
    rows, scores = [], {}
    for step, stage in zip(recipe.steps, stages):
        record = resume.completed_record(resume_dir(stage), stage.flags)
        git = (record or {}).get("git") or {}
        rows.append(
            {
                "step": step.name,
                "status": "ok" if record else "not done",
                "seconds": round(_seconds(record), 1) if record else 0.0,
                "outputs": output_dir(recipe, step, out_dir),
                "code": git.get("commit"),
            }
        )
        if step.stage == "evaluate" and record:
            scores[step.name] = _scores(output_dir(recipe, step, out_dir))
    summary = {
        "recipe": run["recipe"],
        "seed": run["seed"],
        "code": run.get("code"),
        "out_dir": out_dir,
        "steps": rows,
        "total_seconds": round(sum(r["seconds"] for r in rows), 1),
        "scores": scores,
    }
    sharded_io.write_json_atomic(os.path.join(out_dir, SUMMARY), summary)
    return summary


def report(out_dir: str) -> dict:
    """The summary of a recipe run (SLURM's last job), recorded like a step."""
    flags = {"out_dir": os.path.abspath(out_dir), "report": True}
    with run_record.record_run(os.path.abspath(out_dir), flags, stage="recipe_report"):
        summary = write_summary(out_dir)
    print(format_summary(summary), flush=True)
    return summary


def format_summary(summary: dict) -> str:
    """The closing table (step, wall time, status, outputs), then each evaluation's scores
    with the recipe's name and code version, as a results-page row quotes them."""
    rows = summary["steps"]
    width = max([len(r["step"]) for r in rows] + [5])
    lines = ["", f"{'step':<{width}}  {'wall time':>10}  {'status':<8}  outputs"]
    for r in rows:
        rel = os.path.relpath(r["outputs"], summary["out_dir"])
        lines.append(f"{r['step']:<{width}}  {r['seconds']:>8.1f} s  {r['status']:<8}  {rel}")
    lines.append(f"{'total':<{width}}  {summary['total_seconds']:>8.1f} s")
    code = summary.get("code") or {}
    version = (code.get("commit") or "unknown")[:12] + (
        " (uncommitted changes)" * bool(code.get("dirty"))
    )
    for name, s in summary["scores"].items():
        if not s:
            continue
        line = (
            f"{name}: {s['mean']:.1f} ± {s['std']:.1f} (median {s['median']:.1f}) over "
            f"{s['episodes']} episodes"
        )
        if s.get("random_policy"):
            r = s["random_policy"]
            line += f"; random policy on the same seeds {r['mean']:.1f} ± {r['std']:.1f}"
        lines.append(line)
    lines.append(f"recipe {summary['recipe']} (--seed={summary['seed']}), code {version}")
    lines.append(f"summary: {os.path.join(summary['out_dir'], SUMMARY)}")
    return "\n".join(lines)
