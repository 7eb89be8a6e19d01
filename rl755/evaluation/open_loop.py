"""Open-loop (free-running) prediction error against the horizon.

    windows = sample_windows(data.lengths, context_length=16, max_horizon=50, num_starts=256)
    ol = open_loop(model, data, windows, context_length=16, horizons=(1, 5, 15, 50),
                   decode_fn=encoder.decode)
    ol.summary()
    # {"horizons": [1, 5, 15, 50], "z_mse": [..], "z_mse_sem": [..], "frame_mse": [..] or None,
    #  "num_windows": 256, "context_length": 16, "temperature": 0.0}

A window (rollout i, start s) gives the model the real (z_t, a_t) for t = s .. s+C-1 (the
context, C = context_length) from its initial state; from then on it is fed its own
prediction of z and the real logged actions. Horizon k is its prediction of z_{s+C+k-1}:
k = 1 is a one-step prediction from the context, k = 50 is 49 of its own steps later. Every
horizon is averaged over the same windows, sampled uniformly (seeded) among all positions
where the context and the largest horizon fit inside one rollout.

z_mse[k]: squared error averaged over Z and windows; z_mse_sem: its standard error over
windows. frame_mse[k]: the encoder's decoding of the prediction against the decoding of the
real z_{s+C+k-1}, squared error per pixel in [0, 1] (encoded datasets hold no frames, so this
is the latent error as the decoder shows it, not the encoder's own reconstruction error).
`copy_last_z_mse` gives the same windows' error of holding the last context z (a baseline).

At temperature 0 the model feeds itself its point prediction (the mixture mean for mixture
models); at temperature > 0 a sample (`sample_next`, stateless seeds), as in a dream.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from rl755.common.errors import BadInput
from rl755.evaluation.predictions import sample_or_predict
from rl755.evaluation.rollouts import Rollouts


def sample_windows(
    lengths: np.ndarray, context_length: int, max_horizon: int, num_starts: int, seed: int = 0
) -> np.ndarray:
    """int64 [S, 2] (rollout index, start), S = min(num_starts, all fitting windows), sorted.

    A window needs context_length + max_horizon observations of one rollout."""
    need = int(context_length) + int(max_horizon)
    per_rollout = np.maximum(np.asarray(lengths, np.int64) - need + 1, 0)  # starts per rollout
    total = int(per_rollout.sum())
    if total == 0:
        raise BadInput(
            f"No rollout is long enough for a context of {context_length} steps plus horizon "
            f"{max_horizon} ({need} steps; the longest has {int(np.max(lengths))}). Lower "
            "--context_length or the largest of --horizons."
        )
    rng = np.random.default_rng(seed)
    flat = np.arange(total) if total <= num_starts else rng.choice(total, num_starts, False)
    flat = np.sort(flat)
    ends = np.cumsum(per_rollout)
    rollout = np.searchsorted(ends, flat, side="right")
    start = flat - (ends[rollout] - per_rollout[rollout])
    return np.stack([rollout, start], axis=1).astype(np.int64)


@dataclasses.dataclass
class OpenLoop:
    """Open-loop results; `predicted`/`real` hold every window's trajectory.

    Attributes:
      horizons: the horizons k reported (1-based).
      context_length: C.
      temperature: 0 for point predictions, else the sampling temperature.
      predicted: float32 [S, K, Z], the model's z at horizons 1..K (K = max horizon).
      real: float32 [S, C + K, Z], the real z of each window (context, then targets).
      frame_mse: [len(horizons)] or None (no decoder).
      example_frames: {"real": [E, len(horizons) + 1, h, w, c], "predicted": same} or None:
        the first E windows decoded, column 0 the last context frame, then each horizon.
    """

    horizons: tuple[int, ...]
    context_length: int
    temperature: float
    predicted: np.ndarray
    real: np.ndarray
    frame_mse: list[float] | None = None
    example_frames: dict | None = None

    def _errors(self, predicted: np.ndarray) -> tuple[list[float], list[float]]:
        c = self.context_length
        means, sems = [], []
        for k in self.horizons:
            se = np.mean(np.square(predicted[:, k - 1] - self.real[:, c + k - 1]), axis=-1)  # [S]
            means.append(float(se.mean()))
            sems.append(float(se.std(ddof=1) / np.sqrt(len(se))) if len(se) > 1 else 0.0)
        return means, sems

    def summary(self) -> dict:
        mse, sem = self._errors(self.predicted)
        return {
            "horizons": list(self.horizons),
            "z_mse": mse,
            "z_mse_sem": sem,
            "frame_mse": self.frame_mse,
            "num_windows": int(len(self.predicted)),
            "context_length": int(self.context_length),
            "temperature": float(self.temperature),
        }


def open_loop(
    model,
    data: Rollouts,
    windows: np.ndarray,
    context_length: int,
    horizons=(1, 5, 15, 50),
    temperature: float = 0.0,
    seed: int = 0,
    decode_fn=None,
    num_examples: int = 3,
    batch_size: int = 256,
) -> OpenLoop:
    """Free-runs `model` from each window's context (see the module docstring).

    windows: int [S, 2] from `sample_windows` (with max_horizon >= max(horizons)).
    decode_fn: z [B, Z] -> frames [B, h, w, c] in [0, 1] (`ObservationEncoder.decode`), or None.
    """
    horizons = tuple(sorted({int(k) for k in horizons}))
    if not horizons or horizons[0] < 1:
        raise BadInput(f"--horizons must be positive integers, got {list(horizons)}.")
    c, k_max = int(context_length), horizons[-1]
    if c < 1:
        raise BadInput(f"--context_length must be >= 1, got {context_length}.")
    span = np.arange(c + k_max)
    idx_r, idx_t = windows[:, :1], windows[:, 1:] + span[None, :]  # [S, 1], [S, C + K]
    if np.any(idx_t >= data.lengths[windows[:, 0]][:, None]):
        raise ValueError("A window runs past the end of its rollout; use sample_windows.")
    real_z = data.z[idx_r, idx_t]  # [S, C + K, Z]
    actions = data.actions[idx_r, idx_t]  # [S, C + K, A] (the last one is unused)
    predicted = np.zeros((len(windows), k_max, data.representation_size), np.float32)
    for b in range(0, len(windows), batch_size):
        sl = slice(b, b + batch_size)
        state = model.initial_state(len(real_z[sl]))
        for t in range(c + k_max - 1):
            z_t = real_z[sl, t] if t < c else predicted[sl, t - c]
            z_t = tf.constant(z_t)
            h, state = model.step(z_t, tf.constant(actions[sl, t]), state)
            if t >= c - 1:
                step_seed = tf.constant([seed, b * (c + k_max) + t], tf.int32)
                nxt = sample_or_predict(model, h, z_t, temperature, step_seed)
                predicted[sl, t - c + 1] = nxt.numpy()
    result = OpenLoop(horizons, c, float(temperature), predicted, real_z)
    if decode_fn is not None:
        _add_frames(result, decode_fn, num_examples, batch_size)
    return result


def copy_last_z_mse(data: Rollouts, windows: np.ndarray, context_length: int, horizons) -> list:
    """z_mse per horizon of the baseline that holds the last context z (no model)."""
    horizons = tuple(sorted({int(k) for k in horizons}))
    c = int(context_length)
    span = np.arange(c + horizons[-1])
    real = data.z[windows[:, :1], windows[:, 1:] + span[None, :]]
    held = np.repeat(real[:, c - 1 : c], horizons[-1], axis=1)
    return OpenLoop(horizons, c, 0.0, held, real).summary()["z_mse"]


def _decode(decode_fn, z: np.ndarray, batch_size: int) -> np.ndarray:
    parts = [
        np.asarray(decode_fn(tf.constant(z[i : i + batch_size])), np.float32)
        for i in range(0, len(z), batch_size)
    ]
    return np.clip(np.concatenate(parts), 0.0, 1.0)


def _add_frames(result: OpenLoop, decode_fn, num_examples: int, batch_size: int) -> None:
    c = result.context_length
    frame_mse = []
    for k in result.horizons:
        pred = _decode(decode_fn, result.predicted[:, k - 1], batch_size)
        real = _decode(decode_fn, result.real[:, c + k - 1], batch_size)
        frame_mse.append(float(np.mean(np.square(pred - real))))
    result.frame_mse = frame_mse
    e = min(int(num_examples), len(result.predicted))
    if e < 1:
        return
    cols_real = [result.real[:e, c - 1]] + [result.real[:e, c + k - 1] for k in result.horizons]
    cols_pred = [result.real[:e, c - 1]] + [result.predicted[:e, k - 1] for k in result.horizons]

    def frames(cols):
        z = np.concatenate(cols)  # [(H + 1) * E, Z], column-major
        f = _decode(decode_fn, z, batch_size)
        return np.swapaxes(f.reshape((len(cols), e) + f.shape[1:]), 0, 1)  # [E, H + 1, ...]

    result.example_frames = {"real": frames(cols_real), "predicted": frames(cols_pred)}
