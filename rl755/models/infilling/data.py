"""The infilling U-Net's data: windows of raw rollouts, masks and noise.

    ds = frame_windows(RawRollouts(), "train", context_frames=2, windows_per_rollout=16)
    # {"frames": uint8 [K + 1, H, W, C]   frames t-K .. t
    #  "actions": float32 [K, A]}         a_{t-K} .. a_{t-1} (a_j is taken at frame j)
    batch = next(iter(ds.batch(32)))
    inputs = model_inputs(batch, "next_frame", noise_size=8, seed=[0, step])   # unet.py's dict

Masks and noise are stateless functions of a seed pair, so the training step `s` of a run
draws the same ones whether the run was interrupted or not, and an evaluation draws the same
ones for every model it compares.

Tasks (`--task`):
    next_frame   the whole frame t is masked: predict it from the K frames before and the
                 actions (an observation-level world model step)
    region       a rectangle of frame t (each side 1/4 to 1/2 of the frame's, placed
                 uniformly) is masked: fill it from the rest of frame t and the context
"""

from __future__ import annotations

import tensorflow as tf

from rl755.common import determinism
from rl755.common.errors import BadInput
from rl755.common.structs import decode_frames

TASKS = ("next_frame", "region")
REGION_FRACTION = (0.25, 0.5)  # range of a masked rectangle's side, as a fraction of the frame's


def check_task(task: str) -> str:
    if task not in TASKS:
        raise BadInput(f"Unknown --task {task!r}; valid: {', '.join(TASKS)}.")
    return task


def frame_windows(
    builder,
    split: str,
    context_frames: int,
    windows_per_rollout: int,
    repeat: bool = True,
    shuffle_files: bool = True,
    seed: int | None = None,
) -> tf.data.Dataset:
    """Windows of K + 1 consecutive frames and the K actions between them (module docstring).

    `windows_per_rollout` windows per rollout read, starts drawn uniformly with replacement
    (with `seed` and `shuffle_files=False`, the same windows every time: stateless draws keyed
    by (seed, index of the rollout read)); only their frames are decoded. Rollouts with fewer than
    K + 1 frames are skipped. The windows of one rollout arrive together: shuffle downstream.
    """
    if int(context_frames) < 1 or int(windows_per_rollout) < 1:
        raise ValueError(
            f"context_frames ({context_frames}) and windows_per_rollout ({windows_per_rollout}) "
            "must be positive."
        )
    k = int(context_frames)
    shape = tuple(builder.environment.observation_shape)
    # The builder's parser with the frames left encoded (as its random_rollout_observations).
    parse = builder._parser(decode_observations=False)

    def windows(r, stateless_seed=None):
        n = tf.shape(r["actions"])[0]
        if stateless_seed is None:
            u = tf.random.uniform([windows_per_rollout])
        else:
            u = tf.random.stateless_uniform([windows_per_rollout], seed=stateless_seed)
        starts = tf.cast(tf.floor(u * tf.cast(n - k, tf.float32)), tf.int32)
        idx = tf.minimum(starts, n - k - 1)[:, None] + tf.range(k + 1)[None, :]  # [W, K + 1]
        frames = decode_frames(tf.gather(r["observations"], tf.reshape(idx, [-1])), shape)
        return {
            "frames": tf.reshape(frames, [windows_per_rollout, k + 1, *shape]),
            "actions": tf.gather(r["actions"], idx[:, :k]),
        }

    ds = builder._raw_rollouts_ds(split, repeat, shuffle_files)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle_files)
    ds = ds.filter(lambda r: tf.shape(r["actions"])[0] >= k + 1)
    if seed is None:
        ds = ds.map(windows, **determinism.random_map_options(deterministic=not shuffle_files))
    else:  # the i-th rollout read gets the starts of seed pair (seed, i)
        ds = ds.enumerate().map(
            lambda i, r: windows(r, tf.stack([tf.constant(seed, tf.int64), i])),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
    return ds.unbatch()


def masks(task: str, batch_size, frame_shape, seed) -> tf.Tensor:
    """float32 [B, H, W, 1]: 1 where the model fills in (module docstring), from `seed` [2]."""
    h, w = int(frame_shape[0]), int(frame_shape[1])
    if check_task(task) == "next_frame":
        return tf.ones([batch_size, h, w, 1])
    u = tf.random.stateless_uniform([batch_size, 4], seed=seed)
    lo, hi = REGION_FRACTION
    mh = tf.cast(tf.round((lo + (hi - lo) * u[:, 0]) * h), tf.int32)
    mw = tf.cast(tf.round((lo + (hi - lo) * u[:, 1]) * w), tf.int32)
    top = tf.cast(tf.floor(u[:, 2] * tf.cast(h - mh + 1, tf.float32)), tf.int32)
    left = tf.cast(tf.floor(u[:, 3] * tf.cast(w - mw + 1, tf.float32)), tf.int32)
    rows = tf.range(h)[None, :]
    cols = tf.range(w)[None, :]
    in_rows = (rows >= top[:, None]) & (rows < (top + mh)[:, None])  # [B, H]
    in_cols = (cols >= left[:, None]) & (cols < (left + mw)[:, None])  # [B, W]
    inside = in_rows[:, :, None] & in_cols[:, None, :]
    return tf.cast(inside, tf.float32)[..., None]


def noise(batch_size, noise_size: int, seed) -> tf.Tensor:
    """float32 [B, N] standard normal from `seed` [2]."""
    return tf.random.stateless_normal([batch_size, int(noise_size)], seed=seed)


def sub_seed(seed, index: int) -> tf.Tensor:
    """A seed pair for one use (`index`) of the seed pair `seed` (masks 0, noise 1, ...)."""
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    return tf.random.experimental.stateless_fold_in(seed, index)


def model_inputs(batch: dict, task: str, noise_size: int, seed, mask=None) -> dict:
    """A batch of windows ({"frames": uint8 [B, K + 1, H, W, C], "actions": [B, K, A]}) ->
    the generator's inputs (unet.py), with masks and noise drawn from `seed` [2] (or the
    given `mask`)."""
    frames = tf.cast(batch["frames"], tf.float32) / 255.0
    b = tf.shape(frames)[0]
    if mask is None:
        mask = masks(task, b, frames.shape[2:4], sub_seed(seed, 0))
    return {
        "context": frames[:, :-1],
        "target": frames[:, -1],
        "mask": mask,
        "actions": tf.cast(batch["actions"], tf.float32),
        "noise": noise(b, noise_size, sub_seed(seed, 1)),
    }


def sample_draws(generator, batch: dict, task: str, num_draws: int, seed) -> tuple[dict, tf.Tensor]:
    """(inputs, draws float32 [D, B, H, W, C]): the generator's outputs for the same windows
    and masks under D noise vectors (draw d's noise from `sub_seed(seed, 10 + d)`); `inputs`
    holds the first draw's noise."""
    first = model_inputs(batch, task, generator.noise_size, seed)
    b = tf.shape(first["target"])[0]
    inputs, draws = None, []
    for d in range(int(num_draws)):
        this = dict(first, noise=noise(b, generator.noise_size, sub_seed(seed, 10 + d)))
        inputs = inputs or this
        draws.append(generator(this, training=False))
    return inputs, tf.stack(draws)
