"""Running the pipeline's chain of stages: here, one after another, or on SLURM.

    summary = run_local(PRESETS["demo"], out_dir="runs/demo")      # blocking, prints a table
    results = submit_slurm(PRESETS["world_models"], out_dir="/pine/scr/me/wm")   # afterok chain

Rerunning with the same out_dir resumes: every stage skips or continues finished work.
"""

from __future__ import annotations

import json
import os
import time

from rl755.common import sharded_io
from rl755.environments import Environments
from rl755.pipeline.presets import Preset
from rl755.pipeline.report import collect_pictures, format_summary, make_summary
from rl755.pipeline.stages import Paths, build_stages, check_preset, stage_environ

SUMMARY = "pipeline_summary.json"


def run_local(
    preset: Preset,
    out_dir: str,
    seed: int = 0,
    stages: list[str] | None = None,
    threads: int | None = None,
    pictures: bool = True,
    python: str | None = None,
    deterministic: bool | None = None,
) -> dict:
    """Runs the chain here, stage after stage; returns (and writes) the summary.

    `deterministic` (None: each stage's default, on without a GPU) goes to every stage; see
    `build_stages` and rl755.common.determinism."""
    from rl755.slurm import launcher

    check_preset(preset)
    out_dir = os.path.abspath(out_dir)
    check_same_seed(out_dir, seed)
    os.makedirs(out_dir, exist_ok=True)
    run = {"seed": int(seed), "deterministic": deterministic}
    all_stages = build_stages(
        preset, out_dir, seed=seed, threads=threads, deterministic=deterministic
    )
    names = [s.name for s in all_stages]
    if stages:
        unknown = sorted(set(stages) - set(names))
        if unknown:
            raise ValueError(f"Unknown stages {unknown}; valid: {', '.join(names)}.")
    for stage in all_stages:
        launcher.check_stage(stage.script, stage.flags, python)
    os.environ.update(stage_environ(out_dir))
    rows = []
    started = time.time()
    # Written first so a later run on this directory knows its seed even if this one dies.
    summary = make_summary(preset, out_dir, rows, started, run)
    sharded_io.write_json_atomic(os.path.join(out_dir, SUMMARY), summary)
    for i, stage in enumerate(all_stages):
        if stages and stage.name not in stages:
            continue
        print(f"\n=== [{i + 1}/{len(all_stages)}] {stage.name} ===", flush=True)
        t0 = time.time()
        result = launcher.launch(
            stage.script, stage.flags, local=True, job_name=stage.name, python=python, check=False
        )
        seconds = time.time() - t0
        rows.append(
            {
                "stage": stage.name,
                "seconds": round(seconds, 1),
                "status": "ok" if result.returncode == 0 else f"exit {result.returncode}",
                "outputs": stage_output(stage),
            }
        )
        if result.returncode != 0:
            summary = make_summary(preset, out_dir, rows, started, run)
            sharded_io.write_json_atomic(os.path.join(out_dir, SUMMARY), summary)
            print(format_summary(summary))
            raise RuntimeError(
                f"Stage {stage.name} failed (exit {result.returncode}); see its output above. "
                "Fix the cause and rerun the same command: finished work is kept."
            )
    if pictures:
        t0 = time.time()
        pics = collect_pictures(preset, out_dir)
        rows.append(
            {
                "stage": "pictures",
                "seconds": round(time.time() - t0, 1),
                "status": "ok",
                "outputs": Paths(out_dir, Environments.from_name(preset.environment)).pictures_dir,
                "files": pics,
            }
        )
    summary = make_summary(preset, out_dir, rows, started, run)
    path = os.path.join(out_dir, SUMMARY)
    sharded_io.write_json_atomic(path, summary)
    print(format_summary(summary), flush=True)
    return summary


def check_same_seed(out_dir: str, seed: int) -> None:
    """Fails if `out_dir` holds a pipeline run of another --seed: resuming it would mix the
    two runs' rollouts and checkpoints."""
    path = os.path.join(out_dir, SUMMARY)
    try:
        with open(path) as f:
            previous = json.load(f).get("seed")
    except (OSError, ValueError):
        return
    if previous is not None and int(previous) != int(seed):
        raise ValueError(
            f"{out_dir} holds a pipeline run with --seed={previous} ({path}); rerun with "
            f"--seed={previous} to resume it, or pass another --out_dir for --seed={seed}."
        )


def stage_output(stage) -> str:
    for key in ("out_dir", "model_dir"):
        if key in stage.flags:
            return str(stage.flags[key])
    return ""


def submit_slurm(
    preset: Preset,
    out_dir: str,
    seed: int = 0,
    dry_run: bool = False,
    python=None,
    deterministic: bool | None = None,
):
    """Submits the chain to SLURM with afterok dependencies; returns LaunchResults."""
    from rl755.slurm.chain import submit_chain

    check_preset(preset)
    os.environ.update(stage_environ(out_dir))  # sbatch exports the submitting environment
    stages = build_stages(preset, os.path.abspath(out_dir), seed=seed, deterministic=deterministic)
    return submit_chain(stages, dry_run=dry_run, python=python)
