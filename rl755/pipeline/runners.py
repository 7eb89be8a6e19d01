"""Running the pipeline's chain of stages: here, one after another, or on SLURM.

    summary = run_local(PRESETS["demo"], out_dir="runs/demo")      # blocking, prints a table
    results = submit_slurm(PRESETS["world_models"], out_dir="/scratch/me/wm")   # afterok chain
    results = submit_slurm(PRESETS["tiny"], "runs/tiny",
                           overrides=parse_overrides({"mem": ["train_controller=4G"]}))

Rerunning with the same out_dir resumes: every stage skips or continues finished work; on
SLURM a rerun submits nothing for the stages that completed (or are still queued).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time

from rl755.common import run_record, sharded_io
from rl755.common.errors import BadInput
from rl755.environments import Environments
from rl755.pipeline.presets import Preset
from rl755.pipeline.report import collect_pictures, format_summary, make_summary
from rl755.pipeline.resources import Overrides, flag_hint, stage_resources
from rl755.pipeline.stages import RUN_FILE, Paths, build_stages, check_preset, stage_environ
from rl755.slurm.instances import ArraySpec, expand_instances

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
    write_run_file(preset, out_dir, seed)
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
        with run_record.record_run(out_dir, report_flags(out_dir), stage="pipeline_report"):
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
    overrides: Overrides | None = None,
    deterministic: bool | None = None,
):
    """Submits the chain to SLURM with afterok dependencies; returns LaunchResults.

    Each stage asks for the preset's resources, changed by the config file and `overrides`
    (`rl755.pipeline.resources`). Before anything is submitted every job is checked against
    the cluster (BadInput naming the stage, its request and what the cluster offers) and
    every stage's flags; a submission failing midway cancels the jobs submitted before it.
    Stages whose run records say they completed with these flags, or still queued from the
    last submission, are not submitted again. The chain ends with the "report" job (the
    summary table and pictures, as `run_local` ends); `scripts/status.py out_dir` sums the
    chain up in one line.
    """
    from rl755.slurm import launcher, site
    from rl755.slurm.chain import submit_chain

    check_preset(preset)
    out_dir = os.path.abspath(out_dir)
    cluster = site.settings()
    stages = build_stages(
        preset,
        out_dir,
        seed=seed,
        resources=lambda name: stage_resources(preset, name, overrides, cluster),
        report=True,
        deterministic=deterministic,
    )
    os.environ.update(stage_environ(out_dir))  # sbatch exports the submitting environment
    run_file = os.path.join(out_dir, RUN_FILE)
    had_run_file = os.path.exists(run_file)

    def before_submitting():  # the report job reads it; written first, as it may start at once
        if not dry_run:
            write_run_file(preset, out_dir, seed)

    try:
        return submit_chain(
            stages,
            dry_run=dry_run,
            python=python,
            skip_done=True,
            record_dir=os.path.join(out_dir, launcher.SLURM_SUBDIR),
            label="pipeline",
            resource_hint=flag_hint(),
            before_submitting=before_submitting,
        )
    except BaseException:
        if not had_run_file and os.path.exists(run_file):
            os.remove(run_file)  # the chain's jobs were cancelled: it never ran
        raise


def report_flags(out_dir: str) -> dict:
    """The flags of the report step (`scripts/pipeline.py --report`), as its run record holds."""
    return {"out_dir": os.path.abspath(out_dir), "report": True}


def write_run_file(preset: Preset, out_dir: str, seed: int) -> None:
    """`<out_dir>/pipeline.json`: the resolved preset and seed (the report job reads them)."""
    data = {"preset": dataclasses.asdict(preset), "seed": seed}
    sharded_io.write_json_atomic(os.path.join(os.path.abspath(out_dir), RUN_FILE), data)


def read_run_file(out_dir: str) -> tuple[Preset, int]:
    path = os.path.join(os.path.abspath(out_dir), RUN_FILE)
    try:
        with open(path) as f:
            data = json.load(f)
        return Preset(**data["preset"]), int(data["seed"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(
            f"{path} is missing or unreadable ({type(e).__name__}: {e}); it is written by "
            "scripts/pipeline.py when a run starts. Run the pipeline on this --out_dir first."
        ) from e


def report_from_records(out_dir: str) -> dict:
    """The end of a SLURM run (its "report" job): the summary table from the stages' run
    records, and the pictures, as `run_local` ends. Returns (and writes) the summary."""
    from rl755.slurm.resume import completed_record

    preset, seed = read_run_file(out_dir)
    out_dir = os.path.abspath(out_dir)
    stages = build_stages(preset, out_dir, seed=seed)
    rows, starts = [], []
    for stage in stages:
        instances = expand_instances(stage.flags, stage.array or ArraySpec())
        records = [
            completed_record(stage_output(stage), flags) for task in instances for flags in task
        ]
        found = [r for r in records if r]
        seconds = sum(_seconds(r) for r in found)
        starts += [r["start_time"] for r in found if r.get("start_time")]
        status = "ok" if len(found) == len(records) else f"{len(found)}/{len(records)} done"
        rows.append(
            {
                "stage": stage.name,
                "seconds": round(seconds, 1),
                "status": status,
                "outputs": stage_output(stage),
            }
        )
    started = min((_epoch(t) for t in starts), default=time.time())
    t0 = time.time()
    with run_record.record_run(out_dir, report_flags(out_dir), stage="pipeline_report"):
        pics = collect_pictures(preset, out_dir)
    env = Environments.from_name(preset.environment)
    rows.append(
        {
            "stage": "pictures",
            "seconds": round(time.time() - t0, 1),
            "status": "ok",
            "outputs": Paths(out_dir, env).pictures_dir,
            "files": pics,
        }
    )
    summary = make_summary(preset, out_dir, rows, started)
    sharded_io.write_json_atomic(os.path.join(out_dir, "pipeline_summary.json"), summary)
    print(format_summary(summary), flush=True)
    return summary


def _epoch(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp()


def _seconds(record: dict) -> float:
    if not record.get("start_time") or not record.get("end_time"):
        return 0.0
    return _epoch(record["end_time"]) - _epoch(record["start_time"])
