"""The world-model benchmark for one model, and the side-by-side table of several.

    settings = Settings(horizons=(1, 5, 15, 50), context_length=16, num_starts=256)
    report = evaluate_world_model("mdn_rnn", model, data, settings, decode_fn=encoder.decode,
                                  gap_fn=lambda: gap.model_dream_gap(...))
    report.summary       # JSON-able, see below
    print(format_table([report, ...], baselines(data, settings)))

summary = {
  "model", "params", "mixture", "difference_targets", "has_reward_head", "has_done_head",
  "next_step":   {"z_mse", "z_nll_per_dim" (mixtures, else None), "num_targets"}   next_step.py
  "open_loop":   {"horizons", "z_mse", "z_mse_sem", "frame_mse", "num_windows", ...} open_loop.py
  "episode_end": calibration.episode_end_metrics(...), or None without a done head
  "reward":      calibration.reward_metrics(...), or None without a reward head
  "dream_gap":   gap.summarize_gap(...), or None when not asked for
  "seconds":     wall time of this model's evaluation
  "training":    (when the caller adds it) {"train_steps", "task", "cpu_seconds", ...}: the
                 table shows it, to compare models at equal compute
}
Every model is scored on the same rollouts, the same open-loop windows (sampled from
`settings.seed`) and, for the dream gap, the same seeds.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from rl755.evaluation import calibration, next_step, open_loop, predictions
from rl755.evaluation.rollouts import Rollouts


@dataclasses.dataclass(frozen=True)
class Settings:
    """How models are scored (the same for every model of one comparison).

    Attributes:
      horizons: open-loop horizons k, in steps after the context (1 = one-step prediction).
      context_length: real steps fed before the model runs free.
      num_starts: open-loop windows (all of them when fewer fit).
      chunk_length: length of the teacher-forced pieces (use the training sequence length).
      temperature: open loop feeds point predictions at 0, samples at > 0.
      seed: seeds the window sampling and the samples.
      num_examples: windows drawn as frames.
      hazard_bin_width: episode steps per hazard bin (None: 1/10 of the longest rollout).
    """

    horizons: tuple[int, ...] = (1, 5, 15, 50)
    context_length: int = 16
    num_starts: int = 256
    chunk_length: int = 32
    temperature: float = 0.0
    seed: int = 0
    num_examples: int = 3
    hazard_bin_width: int | None = None

    def windows(self, data: Rollouts) -> np.ndarray:
        """The open-loop windows [S, 2] every model is scored on."""
        return open_loop.sample_windows(
            data.lengths, self.context_length, max(self.horizons), self.num_starts, self.seed
        )


@dataclasses.dataclass
class Report:
    """One model's results: `summary` (JSON-able) and the example frames for pictures
    ({"real", "predicted"}: [E, len(horizons) + 1, h, w, c], or None without a decoder)."""

    name: str
    summary: dict
    example_frames: dict | None = None


def _count_params(model) -> int | None:
    try:
        return int(model.count_params())
    except ValueError:  # an unbuilt model without weights
        return None


def evaluate_world_model(
    name: str,
    model,
    data: Rollouts,
    settings: Settings | None = None,
    decode_fn: Callable | None = None,
    gap_fn: Callable[[], dict] | None = None,
) -> Report:
    """Scores one `SequentialModel` on `data` (see the module docstring).

    decode_fn: z [B, Z] -> frames in [0, 1] (the encoder's decode), for frame errors.
    gap_fn: () -> `gap.summarize_gap` dict, or None to skip the dream gap.
    """
    settings = settings or Settings()
    start = time.perf_counter()
    tf_pred = next_step.teacher_forced(model, data, settings.chunk_length)
    windows = settings.windows(data)
    ol = open_loop.open_loop(
        model,
        data,
        windows,
        settings.context_length,
        settings.horizons,
        temperature=settings.temperature,
        seed=settings.seed,
        decode_fn=decode_fn,
        num_examples=settings.num_examples,
    )
    summary = {
        "model": name,
        "params": _count_params(model),
        "mixture": predictions.is_mixture(model),
        "difference_targets": bool(model.difference_targets),
        "has_reward_head": bool(model.has_reward_head),
        "has_done_head": bool(model.has_done_head),
        "next_step": next_step.next_step_metrics(tf_pred, data),
        "open_loop": ol.summary(),
        "episode_end": None,
        "reward": None,
        "dream_gap": None,
    }
    if tf_pred.done_prob is not None:
        summary["episode_end"] = calibration.episode_end_metrics(
            tf_pred.done_prob, data.dones, data.mask, hazard_bin_width=settings.hazard_bin_width
        )
    if tf_pred.reward is not None:
        summary["reward"] = calibration.reward_metrics(tf_pred.reward, data.rewards, data.mask)
    if gap_fn is not None:
        summary["dream_gap"] = gap_fn()
    summary["seconds"] = time.perf_counter() - start
    return Report(name, summary, ol.example_frames)


def baselines(data: Rollouts, settings: Settings) -> dict:
    """What holding the last z scores ("nothing changes"), on the same steps and windows."""
    return {
        "next_step_z_mse": next_step.copy_last_mse(data),
        "open_loop_z_mse": open_loop.copy_last_z_mse(
            data, settings.windows(data), settings.context_length, settings.horizons
        ),
    }


def _fmt(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return f"{value:,d}"
    return f"{value:.{digits}g}"


def table_rows(reports: Sequence[Report], base: dict | None = None) -> list[list[str]]:
    """[[metric, model 1, ..., model M, baseline]] (strings)."""
    s = [r.summary for r in reports]
    horizons = s[0]["open_loop"]["horizons"]

    def get(path, m):
        v = m
        for k in path:
            if v is None:
                return None
            v = v[k]
        return v

    rows = [["params"] + [_fmt(m["params"]) for m in s] + [""]]
    if any(m.get("training") for m in s):  # what each model was trained with (equal compute?)
        for key, label in (("train_steps", "training steps"), ("task", "  task")):
            rows.append([label] + [_fmt((m.get("training") or {}).get(key)) for m in s] + [""])
        if any((m.get("training") or {}).get("cpu_seconds") for m in s):
            rows.append(
                ["  training CPU s"]
                + [_fmt((m.get("training") or {}).get("cpu_seconds"), 3) for m in s]
                + [""]
            )
    rows.append(
        ["next-step z MSE"]
        + [_fmt(m["next_step"]["z_mse"]) for m in s]
        + [_fmt(base["next_step_z_mse"]) if base else ""]
    )
    rows.append(["next-step z NLL/dim"] + [_fmt(m["next_step"]["z_nll_per_dim"]) for m in s] + [""])
    for i, k in enumerate(horizons):
        rows.append(
            [f"open-loop z MSE k={k}"]
            + [_fmt(m["open_loop"]["z_mse"][i]) for m in s]
            + [_fmt(base["open_loop_z_mse"][i]) if base else ""]
        )
    for i, k in enumerate(horizons):
        rows.append(
            [f"decoded frame MSE k={k}"]
            + [_fmt(get(("open_loop", "frame_mse", i), m)) for m in s]
            + [""]
        )
    rows.append(["episode-end Brier"] + [_fmt(get(("episode_end", "brier"), m)) for m in s] + [""])
    rows.append(
        ["  Brier of the base rate"]
        + [_fmt(get(("episode_end", "brier_base_rate"), m)) for m in s]
        + [""]
    )
    rows.append(
        ["  predicted / real ends"]
        + [
            (
                f"{m['episode_end']['predicted_ends']:.1f} / {m['episode_end']['real_ends']}"
                if m["episode_end"]
                else "-"
            )
            for m in s
        ]
        + [""]
    )
    rows.append(["reward MSE"] + [_fmt(get(("reward", "mse"), m)) for m in s] + [""])
    rows.append(
        ["dream gap mean |D-R|"] + [_fmt(get(("dream_gap", "mean_abs_gap"), m)) for m in s] + [""]
    )
    rows.append(
        ["  relative to mean |R|"] + [_fmt(get(("dream_gap", "relative_gap"), m)) for m in s] + [""]
    )
    rows.append(["seconds"] + [f"{m['seconds']:.1f}" for m in s] + [""])
    return rows


def format_table(reports: Sequence[Report], base: dict | None = None) -> str:
    """A plain-text table: one column per model, and the copy-last-z baseline."""
    header = ["metric"] + [r.name for r in reports] + (["copy z_t"] if base else [""])
    rows = [header] + table_rows(reports, base)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for j, r in enumerate(rows):
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)
