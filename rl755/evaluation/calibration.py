"""Episode-end calibration and reward error of teacher-forced predictions (numpy only).

    episode_end_metrics(done_prob, dones, mask)           # [N, T] each
    # {"brier", "brier_base_rate", "predicted_ends", "real_ends", "num_steps",
    #  "reliability": {"bin_edges", "mean_predicted", "observed", "count"},
    #  "hazard": {"step_start", "step_end", "predicted", "real", "at_risk"}}
    reward_metrics(reward_pred, rewards, mask)            # {"mse", "mae", "bias"}

done_prob[i, t] is the model's P(the episode ends after step t) and dones[i, t] is 1 where
it really did (the last step of a terminated rollout); both are scored where mask is 1.

- brier: mean (p - y)^2. brier_base_rate: the Brier score of always predicting the observed
  end frequency, the score to beat.
- predicted_ends / real_ends: sum of p against the number of ends (a calibrated model
  expects as many ends as there are).
- reliability: steps binned by predicted probability (equal-width bins over [0, 1]); per
  bin the mean prediction, the observed end frequency and the number of steps (NaN for an
  empty bin). A calibrated model lies on the diagonal.
- hazard: steps binned by their index in the episode (bins of `hazard_bin_width` steps);
  per bin the real hazard (ends / steps at risk: the chance that an episode alive at that
  step ends there) against the mean predicted probability over the same steps.
"""

from __future__ import annotations

import numpy as np


def _flat(mask: np.ndarray, *arrays: np.ndarray) -> list[np.ndarray]:
    keep = np.asarray(mask) > 0
    return [np.asarray(a, np.float64)[keep] for a in arrays]


def brier_score(p: np.ndarray, y: np.ndarray, mask: np.ndarray) -> float:
    """Mean (p - y)^2 over mask."""
    p, y = _flat(mask, p, y)
    return float(np.mean(np.square(p - y))) if len(p) else float("nan")


def reliability_curve(p: np.ndarray, y: np.ndarray, mask: np.ndarray, num_bins: int = 10) -> dict:
    """{"bin_edges" [B + 1], "mean_predicted" [B], "observed" [B], "count" [B]} (see module)."""
    p, y = _flat(mask, p, y)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1], right=False), 0, num_bins - 1)
    count = np.bincount(which, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, p, num_bins) / count
        observed = np.bincount(which, y, num_bins) / count
    return {
        "bin_edges": edges.tolist(),
        "mean_predicted": _nan_list(mean_p),
        "observed": _nan_list(observed),
        "count": count.astype(int).tolist(),
    }


def hazard_curve(p: np.ndarray, y: np.ndarray, mask: np.ndarray, bin_width: int) -> dict:
    """{"step_start", "step_end" (exclusive), "predicted", "real", "at_risk"} per bin of
    episode steps [k * bin_width, (k + 1) * bin_width) (see module)."""
    bin_width = max(1, int(bin_width))
    steps = np.broadcast_to(np.arange(np.asarray(mask).shape[1])[None, :], np.shape(mask))
    p, y, t = _flat(mask, p, y, steps)
    which = (t // bin_width).astype(int)
    bins = int(which.max()) + 1 if len(which) else 0
    at_risk = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        predicted = np.bincount(which, p, bins) / at_risk
        real = np.bincount(which, y, bins) / at_risk
    start = np.arange(bins) * bin_width
    return {
        "step_start": start.tolist(),
        "step_end": (start + bin_width).tolist(),
        "predicted": _nan_list(predicted),
        "real": _nan_list(real),
        "at_risk": at_risk.astype(int).tolist(),
    }


def episode_end_metrics(
    done_prob: np.ndarray,
    dones: np.ndarray,
    mask: np.ndarray,
    num_bins: int = 10,
    hazard_bin_width: int | None = None,
) -> dict:
    """All episode-end measures (see module); hazard bins default to 1/10 of the longest
    rollout."""
    p, y = _flat(mask, done_prob, dones)
    rate = float(y.mean()) if len(y) else float("nan")
    width = hazard_bin_width or max(1, -(-np.shape(mask)[1] // 10))
    return {
        "brier": brier_score(done_prob, dones, mask),
        "brier_base_rate": float(np.mean(np.square(rate - y))) if len(y) else float("nan"),
        "predicted_ends": float(p.sum()),
        "real_ends": int(y.sum()),
        "num_steps": int(len(y)),
        "reliability": reliability_curve(done_prob, dones, mask, num_bins),
        "hazard": hazard_curve(done_prob, dones, mask, width),
    }


def reward_metrics(reward_pred: np.ndarray, rewards: np.ndarray, mask: np.ndarray) -> dict:
    """{"mse", "mae", "bias" (mean predicted - mean real)} over mask."""
    p, r = _flat(mask, reward_pred, rewards)
    if not len(p):
        return {"mse": float("nan"), "mae": float("nan"), "bias": float("nan")}
    return {
        "mse": float(np.mean(np.square(p - r))),
        "mae": float(np.mean(np.abs(p - r))),
        "bias": float(np.mean(p - r)),
    }


def _nan_list(x: np.ndarray) -> list:
    """A JSON-friendly list: NaN -> None."""
    return [None if not np.isfinite(v) else float(v) for v in x]
