"""Measures of infilled frames: error, structure, sharpness and the diversity of samples.

All take float frames in [0, 1], [B, H, W, C], and a mask [B, H, W, 1] (1 = infilled
pixels) and return one value per example ([B]) unless said otherwise:

    masked_mse(pred, real, mask)       squared error per masked pixel and channel
    ssim(pred, real)                   tf.image.ssim of the whole frames (11x11 Gaussian
                                       window, or the frame's side if smaller)
    laplacian_variance(frames, mask)   variance of the 3x3 Laplacian of the grey image over
                                       the masked pixels: blur lowers it
    gradient_energy(frames, mask)      mean of dx^2 + dy^2 (forward differences of the grey
                                       image) over the masked pixels
    sample_diversity(draws, mask)      draws [D, B, H, W, C] from the same inputs: the mean
                                       absolute difference per masked pixel and channel, over
                                       all D (D - 1) / 2 pairs. 0 exactly when every draw is the
                                       same (a deterministic model), larger the more they differ

Sharpness is compared with the same measure of the real frames under the same mask (a ratio
of 1: as sharp as the data; well below 1: blurred).
"""

from __future__ import annotations

import itertools

import numpy as np
import tensorflow as tf

# A numpy array, not a tf.constant: a tensor made while importing would start TensorFlow's
# runtime, after which logical devices can no longer be configured (and a fork of the
# importing process hangs at its first op).
_LAPLACIAN = np.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], np.float32)[:, :, None, None]


def _grey(frames: tf.Tensor) -> tf.Tensor:
    frames = tf.convert_to_tensor(frames, tf.float32)
    if frames.shape[-1] == 3:
        return tf.image.rgb_to_grayscale(frames)
    return tf.reduce_mean(frames, axis=-1, keepdims=True)


def masked_mean(values: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """[B, h, w, c] values, [B, h, w, 1] mask -> [B] mean over the masked positions."""
    mask = tf.broadcast_to(mask, tf.shape(values))
    return tf.reduce_sum(values * mask, [1, 2, 3]) / tf.maximum(tf.reduce_sum(mask, [1, 2, 3]), 1)


def masked_mse(pred, real, mask) -> tf.Tensor:
    pred, real = tf.convert_to_tensor(pred, tf.float32), tf.convert_to_tensor(real, tf.float32)
    return masked_mean(tf.square(pred - real), tf.convert_to_tensor(mask, tf.float32))


def ssim(pred, real) -> tf.Tensor:
    pred, real = tf.convert_to_tensor(pred, tf.float32), tf.convert_to_tensor(real, tf.float32)
    size = min(11, int(pred.shape[1]), int(pred.shape[2]))
    return tf.image.ssim(pred, real, max_val=1.0, filter_size=size)


def laplacian_variance(frames, mask) -> tf.Tensor:
    lap = tf.nn.conv2d(_grey(frames), _LAPLACIAN, strides=1, padding="VALID")  # [B, H-2, W-2, 1]
    inner = tf.convert_to_tensor(mask, tf.float32)[:, 1:-1, 1:-1]
    mean = masked_mean(lap, inner)
    return masked_mean(tf.square(lap - mean[:, None, None, None]), inner)


def gradient_energy(frames, mask) -> tf.Tensor:
    grey = _grey(frames)
    dx = grey[:, :-1, :-1] - grey[:, :-1, 1:]
    dy = grey[:, :-1, :-1] - grey[:, 1:, :-1]
    inner = tf.convert_to_tensor(mask, tf.float32)[:, :-1, :-1]
    return masked_mean(tf.square(dx) + tf.square(dy), inner)


def sample_diversity(draws, mask) -> tf.Tensor:
    draws = tf.convert_to_tensor(draws, tf.float32)
    if draws.shape[0] is None or draws.shape[0] < 2:
        raise ValueError(f"sample_diversity needs at least 2 draws, got shape {draws.shape}.")
    mask = tf.convert_to_tensor(mask, tf.float32)
    pairs = itertools.combinations(range(draws.shape[0]), 2)
    values = [masked_mean(tf.abs(draws[i] - draws[j]), mask) for i, j in pairs]
    return tf.reduce_mean(tf.stack(values), axis=0)


def frame_measures(draws, real, mask) -> dict[str, tf.Tensor]:
    """{name: [B]} of every measure for draws [D, B, H, W, C] against the real frames:
    the first draw's error and sharpness, the best draw's error (the lowest of D; equal to
    the first for a deterministic model), the error of the draws' mean, the diversity
    (D >= 2), and the real frames' sharpness."""
    draws = tf.convert_to_tensor(draws, tf.float32)
    real = tf.convert_to_tensor(real, tf.float32)
    mask = tf.convert_to_tensor(mask, tf.float32)
    errors = tf.stack([masked_mse(d, real, mask) for d in draws])  # [D, B]
    out = {
        "mse": errors[0],
        "best_of_draws_mse": tf.reduce_min(errors, axis=0),
        "mse_of_mean": masked_mse(tf.reduce_mean(draws, axis=0), real, mask),
        "ssim": ssim(draws[0], real),
        "laplacian_variance": laplacian_variance(draws[0], mask),
        "gradient_energy": gradient_energy(draws[0], mask),
        "real_laplacian_variance": laplacian_variance(real, mask),
        "real_gradient_energy": gradient_energy(real, mask),
    }
    if draws.shape[0] >= 2:
        out["sample_diversity"] = sample_diversity(draws, mask)
    return out


def summarize(measures: dict[str, tf.Tensor]) -> dict[str, float]:
    """Means over the examples, and the sharpness ratios (model / real, of the means)."""
    out = {k: float(tf.reduce_mean(v)) for k, v in measures.items()}
    for name in ("laplacian_variance", "gradient_energy"):
        real = out[f"real_{name}"]
        out[f"{name}_ratio"] = out[name] / real if real > 0 else float("nan")
    return out
