"""Pictures of what the world model learned.

`predicted_frames(encoder, sequential_model, rollout)` lays out, for a few steps of a real
rollout, three rows of frames:

    real          the environment's frames o_{t+1}
    VAE           decode(encode(o_{t+1})): what the encoder keeps
    predicted     decode(z'_{t+1}) where z'_{t+1} = sample_next(step(z_t, a_t)) at temperature ~0

The sequential model sees the real (z_t, a_t) up to each step (teacher forcing), so each
predicted frame is a one-step prediction: the row shows whether the model knows what the
next frame looks like given the action.
"""

from __future__ import annotations

import io

import numpy as np

from rl755.common import sharded_io


def predicted_frames(
    encoder, sequential_model, frames, actions, start: int = 8, num_steps: int = 8
) -> np.ndarray:
    """Returns a uint8 image [3 * h, num_steps * w, 3] (rows: real, VAE, predicted).

    frames: uint8 [T, H, W, C] (T > start + num_steps); actions: float32 [T, A] (as stored).
    """
    import tensorflow as tf

    frames = np.asarray(frames)
    actions = np.asarray(actions, np.float32)
    end = start + num_steps
    if len(frames) < end + 1:
        raise ValueError(f"Need at least {end + 1} frames, got {len(frames)}.")
    z = encoder.compute_representation(tf.constant(frames[: end + 1])).numpy()  # [T, Z]
    state = sequential_model.initial_state(1)
    predicted = []
    for t in range(end):
        a = tf.constant(actions[t : t + 1])
        h, state = sequential_model.step(tf.constant(z[t : t + 1]), a, state)
        if t >= start:
            nxt = sequential_model.sample_next(h, temperature=1e-3, z=tf.constant(z[t : t + 1]))
            predicted.append(nxt["z"].numpy()[0])
    real = tf.constant(frames[start + 1 : end + 1])
    recon = encoder.decode(tf.constant(z[start + 1 : end + 1])).numpy()
    pred = encoder.decode(tf.constant(np.stack(predicted))).numpy()
    if hasattr(encoder, "preprocess"):  # the frame as the encoder sees it (cropped, resized)
        real = encoder.preprocess(real).numpy()
    else:
        real = tf.image.resize(real, recon.shape[1:3]).numpy() / 255.0
    rows = [np.concatenate(list(r), axis=1) for r in (real, recon, pred)]
    image = np.concatenate(rows, axis=0)
    return (np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)


def save_png(path: str, image: np.ndarray, title: str | None = None) -> None:
    """Writes an RGB uint8 image [H, W, 3] (scaled up for small frames) atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h, w = image.shape[:2]
    scale = max(1.0, 300.0 / h)
    fig, ax = plt.subplots(figsize=(w * scale / 100 + 1.2, h * scale / 100 + 0.6), dpi=100)
    ax.imshow(image, interpolation="nearest")
    ax.set_xticks([])
    rows = 3
    ax.set_yticks([(i + 0.5) * h / rows for i in range(rows)])
    ax.set_yticklabels(["real", "VAE", "predicted"])
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    with sharded_io.atomic_output(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())


def predicted_frames_for_registry(
    env, encoder_name: str, sequential_name: str, out_path: str, num_steps: int = 8
) -> str:
    """Draws predicted frames for the first validation rollout with registered models."""
    from rl755 import zoo
    from rl755.data import registry

    encoder = zoo.get(env, encoder_name, kind=zoo.ENCODER)()
    seq = zoo.get(env, sequential_name, kind=zoo.SEQUENTIAL)()
    raw = registry.raw_rollouts_class(env)()
    rollout = None
    for split in ("validation", "train"):
        try:
            ds = raw.rollouts_ds(split, shuffle_files=False)
        except FileNotFoundError:
            continue
        for r in ds.take(8).as_numpy_iterator():
            if len(r["actions"]) >= 2 * num_steps + 1:
                rollout = r
                break
        if rollout is not None:
            break
    if rollout is None:
        raise ValueError(f"No rollout with at least {2 * num_steps + 1} steps to draw.")
    start = min(len(rollout["actions"]) - num_steps - 1, max(num_steps, 50))
    image = predicted_frames(
        encoder, seq, rollout["observations"], rollout["actions"], start, num_steps
    )
    save_png(
        out_path,
        image,
        title=f"{env.name}: steps {start + 1}-{start + num_steps} (one-step predictions)",
    )
    return out_path
