"""What a sequential model predicts from one hidden state, read through the SequentialModel
interface (rl755/models/common/sequential.py) only.

    h, state = model.step(z_t, a_t, state)                       # [B, H]
    p = predict_next(model, h, z_t, z_next=z_t1)
    p.z           # [B, Z]  point prediction of z_{t+1}: the deterministic prediction, or the
                  #         mixture's mean for mixture models
    p.log_prob    # [B]     mixture models: log p(z_{t+1}) averaged over Z (nats); else None
    p.reward      # [B]     predicted reward_t, or None without a reward head
    p.done_prob   # [B]     P(the episode ends after step t) (calibrated: `done_probability`),
                  #         or None without an episode-end head

`predict_from_hidden` gives the prediction dict ("z", or "mdn_logits"/"mdn_locs"/
"mdn_scales" [B, Z, K]; "reward"; "done_logits"). A model without it (e.g. the exact fake
model of rl755.testing.fake_world_model) is read through `sample_next`, whose "z" is then the
point prediction (exact for deterministic models, one sample for stochastic ones). With
`difference_targets` the prediction dict holds z_{t+1} - z_t; `z` here is always z_{t+1}.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclasses.dataclass
class NextStep:
    """One step's predictions (see the module docstring); tensors, batch first."""

    z: tf.Tensor
    log_prob: tf.Tensor | None = None
    reward: tf.Tensor | None = None
    done_prob: tf.Tensor | None = None


def mixture_log_prob(outputs: dict, x: tf.Tensor) -> tf.Tensor:
    """log p(x) [..., Z] under the per-dimension Gaussian mixture of `outputs`
    ("mdn_logits", "mdn_locs", "mdn_scales", each [..., Z, K]); x: [..., Z]."""
    x = tf.cast(x, tf.float32)[..., None]  # [..., Z, 1]
    locs, scales = outputs["mdn_locs"], outputs["mdn_scales"]
    log_w = tf.nn.log_softmax(outputs["mdn_logits"], axis=-1)
    log_normal = -0.5 * tf.square((x - locs) / scales) - tf.math.log(scales) - _LOG_SQRT_2PI
    return tf.reduce_logsumexp(log_w + log_normal, axis=-1)


def mixture_mean(outputs: dict) -> tf.Tensor:
    """The mixture's mean [..., Z]."""
    w = tf.nn.softmax(outputs["mdn_logits"], axis=-1)
    return tf.reduce_sum(w * outputs["mdn_locs"], axis=-1)


def is_mixture(model) -> bool:
    """True when `predict_from_hidden` gives a Gaussian mixture over z."""
    out = _prediction_dict(model, tf.zeros([1, model.hidden_size]))
    return out is not None and "mdn_logits" in out


def _prediction_dict(model, hidden) -> dict | None:
    try:
        return model.predict_from_hidden(hidden)
    except NotImplementedError:
        return None


def predict_next(model, hidden, z_t, z_next=None) -> NextStep:
    """hidden [B, H], z_t [B, Z] (the z fed at this step), z_next [B, Z] (the real z_{t+1},
    only for the mixture log-probability) -> `NextStep`."""
    z_t = tf.cast(z_t, tf.float32)
    out = _prediction_dict(model, hidden)
    if out is None:
        nxt = model.sample_next(hidden, temperature=1.0, z=z_t)
        return NextStep(
            z=nxt["z"],
            reward=nxt["reward"] if model.has_reward_head else None,
            done_prob=nxt["done_prob"] if model.has_done_head else None,
        )
    offset = z_t if model.difference_targets else 0.0
    log_prob = None
    if "z" in out:
        z = out["z"] + offset
    elif "mdn_logits" in out:
        z = mixture_mean(out) + offset
        if z_next is not None:
            log_prob = tf.reduce_mean(mixture_log_prob(out, z_next - offset), axis=-1)
    else:
        raise ValueError(
            f"{model.name}.predict_from_hidden gives {sorted(out)}: neither 'z' (deterministic) "
            "nor 'mdn_logits'/'mdn_locs'/'mdn_scales' (mixture); see sequential.py."
        )
    done = model.done_probability(out["done_logits"]) if "done_logits" in out else None
    return NextStep(z=z, log_prob=log_prob, reward=out.get("reward"), done_prob=done)


def sample_or_predict(model, hidden, z_t, temperature: float, seed=None) -> tf.Tensor:
    """The z_{t+1} [B, Z] a free-running model feeds itself: the point prediction at
    temperature 0, else `sample_next` at `temperature` (stateless with `seed` [2])."""
    if temperature <= 0:
        return predict_next(model, hidden, z_t).z
    return model.sample_next(hidden, temperature=temperature, seed=seed, z=z_t)["z"]
