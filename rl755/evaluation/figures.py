"""The benchmark's pictures (PNG, written atomically).

    frames_figure(path, report.example_frames, horizons, title)   # real vs dreamed frames
    error_curve_figure(path, [r.summary for r in reports], baseline) # error vs horizon
    calibration_figure(path, [r.summary for r in reports])         # reliability + hazard

Frames: for each example window, a row of the real frames (the decoder's picture of the real
z) and below it the dreamed ones, columns = the last context frame, then each horizon.
"""

from __future__ import annotations

import io

import numpy as np

from rl755.common import sharded_io


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> str:
    plt = _plt()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    with sharded_io.atomic_output(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
    return path


def frames_figure(path: str, example_frames: dict, horizons, title: str = "") -> str:
    """example_frames {"real", "predicted"}: [E, len(horizons) + 1, h, w, c] in [0, 1]."""
    plt = _plt()
    real, pred = example_frames["real"], example_frames["predicted"]
    e, cols = real.shape[:2]
    fig, axes = plt.subplots(2 * e, cols, figsize=(1.3 * cols + 1.2, 1.3 * 2 * e + 0.6))
    axes = np.asarray(axes).reshape(2 * e, cols)
    labels = ["context"] + [f"k={k}" for k in horizons]
    for i in range(e):
        for row, frames, what in ((2 * i, real, "real"), (2 * i + 1, pred, "dreamed")):
            for j in range(cols):
                ax = axes[row, j]
                image = np.clip(frames[i, j], 0.0, 1.0)
                ax.imshow(image.squeeze(), cmap="gray" if image.shape[-1] == 1 else None)
                ax.set_xticks([])
                ax.set_yticks([])
                if row == 0:
                    ax.set_title(labels[j], fontsize=8)
                if j == 0:
                    ax.set_ylabel(f"{what} {i + 1}", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def error_curve_figure(path: str, summaries, baseline: list | None = None) -> str:
    """Open-loop latent MSE (and decoded-frame MSE where there is a decoder) vs horizon."""
    plt = _plt()
    with_frames = any(s["open_loop"]["frame_mse"] is not None for s in summaries)
    fig, axes = plt.subplots(1, 2 if with_frames else 1, figsize=(9 if with_frames else 5, 3.6))
    axes = np.atleast_1d(axes)
    for s in summaries:
        ol = s["open_loop"]
        axes[0].errorbar(
            ol["horizons"], ol["z_mse"], yerr=ol["z_mse_sem"], marker="o", label=s["model"]
        )
        if with_frames and ol["frame_mse"] is not None:
            axes[1].plot(ol["horizons"], ol["frame_mse"], marker="o", label=s["model"])
    if baseline is not None:
        axes[0].plot(summaries[0]["open_loop"]["horizons"], baseline, "k--", label="copy last z")
    axes[0].set_ylabel("latent MSE")
    if with_frames:
        axes[1].set_ylabel("decoded-frame MSE (pixels in [0, 1])")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    horizons = summaries[0]["open_loop"]["horizons"]
    for ax in axes:
        ax.set_xlabel("horizon k (steps after the context)")
        ax.set_xscale("log")
        ax.set_xticks(horizons)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("open-loop error against horizon (mean over windows, +- s.e.)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def calibration_figure(path: str, summaries) -> str:
    """Reliability curve and predicted vs real hazard of the models with an episode-end head."""
    plt = _plt()
    fig, (rel, haz) = plt.subplots(1, 2, figsize=(9, 3.6))
    rel.plot([0, 1], [0, 1], "k:", label="calibrated")
    real_drawn = False
    for s in summaries:
        ee = s.get("episode_end")
        if not ee:
            continue
        r = ee["reliability"]
        pts = [
            (p, o)
            for p, o, c in zip(r["mean_predicted"], r["observed"], r["count"])
            if c and p is not None
        ]
        if pts:
            rel.plot(*zip(*pts), marker="o", label=f"{s['model']} (Brier {ee['brier']:.3g})")
        h = ee["hazard"]
        mid = [(a + b - 1) / 2 for a, b in zip(h["step_start"], h["step_end"])]
        if not real_drawn:
            haz.plot(mid, _nan(h["real"]), "k--", marker="s", label="real")
            real_drawn = True
        haz.plot(mid, _nan(h["predicted"]), marker="o", label=s["model"])
    rel.set_xlabel("predicted P(episode ends)")
    rel.set_ylabel("observed frequency")
    rel.set_title("reliability", fontsize=9)
    haz.set_xlabel("step in episode")
    haz.set_ylabel("hazard (ends per step at risk)")
    haz.set_title("predicted vs real hazard", fontsize=9)
    for ax in (rel, haz):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def _nan(values):
    return [np.nan if v is None else v for v in values]
