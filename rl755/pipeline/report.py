"""The pipeline's report: the closing table (stage, wall time, status, outputs, scores) and
the pictures worth looking at, collected in `<out_dir>/pictures`."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time

from rl755.common import sharded_io
from rl755.environments import Environments
from rl755.pipeline.presets import Preset
from rl755.pipeline.stages import Paths


def make_summary(
    preset: Preset, out_dir: str, rows: list[dict], started: float, run: dict | None = None
) -> dict:
    """The summary of a run; `run` ({"seed", "deterministic"}) is stored as it is."""
    env = Environments.from_name(preset.environment)
    evaluation = sharded_io.read_json_or_none(
        os.path.join(Paths(out_dir, env).evaluation_dir, "evaluation.json")
    )
    scores = None
    if evaluation:
        scores = {"controller": {k: evaluation.get(k) for k in ("mean", "std")}}
        rnd = evaluation.get("random_policy")
        if rnd:
            scores["random_policy"] = {k: rnd.get(k) for k in ("mean", "std")}
        scores["episodes"] = len(evaluation.get("returns", []))
    return {
        "preset": dataclasses.asdict(preset),
        "out_dir": out_dir,
        "stages": rows,
        "total_seconds": round(time.time() - started, 1),
        "scores": scores,
        **(run or {}),
    }


def format_summary(summary: dict) -> str:
    """The closing table: stage, wall time, status, outputs; then the scores."""
    rows = summary["stages"]
    width = max([len(r["stage"]) for r in rows] + [5])
    lines = [
        "",
        f"{'stage':<{width}}  {'wall time':>10}  {'status':<8}  outputs",
        f"{'-' * width}  {'-' * 10}  {'-' * 8}  {'-' * 40}",
    ]
    for r in rows:
        lines.append(
            f"{r['stage']:<{width}}  {_fmt_seconds(r['seconds']):>10}  {r['status']:<8}  "
            f"{os.path.relpath(r['outputs'], summary['out_dir']) if r['outputs'] else ''}"
        )
    lines.append(f"{'total':<{width}}  {_fmt_seconds(summary['total_seconds']):>10}")
    scores = summary.get("scores")
    if scores:
        c = scores["controller"]
        lines.append("")
        lines.append(
            f"Real-environment score over {scores['episodes']} fixed-seed episodes: "
            f"controller {c['mean']:.1f} ± {c['std']:.1f}"
            + (
                f"  vs  random policy {scores['random_policy']['mean']:.1f} ± "
                f"{scores['random_policy']['std']:.1f}"
                if "random_policy" in scores
                else ""
            )
        )
    for r in rows:
        for f in r.get("files", []):
            lines.append(f"picture: {f}")
    lines.append(f"summary: {os.path.join(summary['out_dir'], 'pipeline_summary.json')}")
    return "\n".join(lines)


def _fmt_seconds(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


# ---- pictures ---------------------------------------------------------------------------------
def _newest(directory: str, suffix: str) -> str | None:
    if not os.path.isdir(directory):
        return None
    files = [
        os.path.join(directory, f)
        for f in os.listdir(directory)
        if f.endswith(suffix) and not sharded_io.is_tmp_path(f)
    ]
    return max(files, key=os.path.getmtime) if files else None


def collect_pictures(preset: Preset, out_dir: str) -> list[str]:
    """Copies the stages' pictures into <out_dir>/pictures and draws predicted frames."""
    env = Environments.from_name(preset.environment)
    paths = Paths(out_dir, env)
    os.makedirs(paths.pictures_dir, exist_ok=True)
    made = []
    sources = {
        "vae_reconstructions.png": _newest(paths.model_dir(preset.encoder_name), ".png"),
        "controller_learning_curve.png": _newest(paths.model_dir(preset.controller_name), ".png"),
        "episode.gif": _newest(paths.evaluation_dir, ".gif"),
    }
    for name, src in sources.items():
        if src:
            dst = os.path.join(paths.pictures_dir, name)
            shutil.copyfile(src, dst)
            made.append(dst)
    try:
        from rl755 import visualize

        dst = os.path.join(paths.pictures_dir, "predicted_frames.png")
        if preset.connect == "directories":
            from rl755.controller.resolve import EncoderFromDir, SequentialModelFromDir

            encoder = EncoderFromDir(
                env.name,
                preset.train_encoder["model"],
                paths.model_dir(preset.encoder_name),
                int(preset.train_encoder["representation_size"]),
            )()
            seq = SequentialModelFromDir(paths.model_dir(preset.sequential_name))()
            visualize.predicted_frames_of_models(env, encoder, seq, dst)
        else:
            visualize.predicted_frames_for_registry(
                env, preset.encoder_name, preset.sequential_name, dst
            )
        made.append(dst)
    except Exception as e:  # pictures must never fail a finished pipeline
        print(f"(predicted frames not drawn: {type(e).__name__}: {e})", file=sys.stderr)
    return made
