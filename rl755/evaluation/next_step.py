"""Teacher-forced next-step predictions over every step of held-out rollouts.

    tf_pred = teacher_forced(model, data, chunk_length=32)
    tf_pred.z          # float32 [N, T, Z]  point prediction of z_{t+1} after seeing z_0..z_t
    tf_pred.log_prob   # float32 [N, T]     mixture models: log p(z_{t+1}) per dim; else None
    tf_pred.reward     # float32 [N, T]     or None;  tf_pred.done_prob: [N, T] or None
    next_step_metrics(tf_pred, data)
    # {"z_mse", "z_nll_per_dim" (None unless a mixture), "num_targets"}

Each rollout is cut into consecutive pieces of `chunk_length` steps and each piece runs
from the model's initial state with `step` on the real (z_t, a_t): the same conditions as
training and validation (slices from a fresh state), and every step is scored exactly once.
z_mse is the squared error averaged over Z and over the steps where z_{t+1} exists
(`target_mask`); z_nll_per_dim is -log p(z_{t+1}) averaged the same way (the MDN's training
loss on this data).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from rl755.evaluation.predictions import predict_next
from rl755.evaluation.rollouts import Rollouts, chunk, unchunk


@dataclasses.dataclass
class TeacherForced:
    """Per-step predictions [N, T, ...] aligned with the rollouts (see the module docstring)."""

    z: np.ndarray
    log_prob: np.ndarray | None
    reward: np.ndarray | None
    done_prob: np.ndarray | None


def teacher_forced(
    model, data: Rollouts, chunk_length: int = 32, batch_size: int = 256
) -> TeacherForced:
    """Runs `model.step` over every step of `data` in pieces of `chunk_length` (see module)."""
    if chunk_length < 1:
        raise ValueError(f"chunk_length must be >= 1, got {chunk_length}.")
    n, t = data.z.shape[:2]
    length = min(int(chunk_length), t)
    z, a, z_next = (chunk(x, length) for x in (data.z, data.actions, data.next_z))
    valid = chunk(data.mask, length)
    pieces = np.nonzero(valid[:, 0] > 0)[0]  # pieces holding at least one real step
    m = len(z)
    out_z = np.zeros((m, length, data.representation_size), np.float32)
    extra: dict[str, np.ndarray] = {}  # "log_prob", "reward", "done_prob": [M, length]
    for b in range(0, len(pieces), batch_size):
        sel = pieces[b : b + batch_size]
        state = model.initial_state(len(sel))
        for i in range(length):
            z_t = tf.constant(z[sel, i])
            h, state = model.step(z_t, tf.constant(a[sel, i]), state)
            p = predict_next(model, h, z_t, z_next=tf.constant(z_next[sel, i]))
            out_z[sel, i] = p.z.numpy()
            for key in ("log_prob", "reward", "done_prob"):
                value = getattr(p, key)
                if value is not None:
                    if key not in extra:
                        extra[key] = np.zeros((m, length), np.float32)
                    extra[key][sel, i] = value.numpy()

    def back(x):
        return None if x is None else unchunk(x, n, t)

    return TeacherForced(
        back(out_z),
        back(extra.get("log_prob")),
        back(extra.get("reward")),
        back(extra.get("done_prob")),
    )


def masked_mean(x: np.ndarray, mask: np.ndarray) -> float:
    """Mean of x [N, T] where mask [N, T] is 1 (NaN when nothing is masked in)."""
    count = float(mask.sum())
    return float(np.where(mask > 0, x, 0.0).sum() / count) if count else float("nan")


def next_step_metrics(pred: TeacherForced, data: Rollouts) -> dict:
    """{"z_mse", "z_nll_per_dim" (None unless mixture), "num_targets"} (see module)."""
    target_mask = data.target_mask
    se = np.mean(np.square(pred.z - data.next_z), axis=-1)  # [N, T]
    nll = None if pred.log_prob is None else masked_mean(-pred.log_prob, target_mask)
    return {
        "z_mse": masked_mean(se, target_mask),
        "z_nll_per_dim": nll,
        "num_targets": int(target_mask.sum()),
    }


def copy_last_mse(data: Rollouts) -> float:
    """The baseline "nothing changes": mean squared error of predicting z_{t+1} = z_t."""
    se = np.mean(np.square(data.z - data.next_z), axis=-1)
    return masked_mean(se, data.target_mask)
