"""Pictures of what the world model learned, as objects a notebook shows and a script saves.

    from rl755 import visualize
    visualize.frames_image(rollout["observations"][:12])        # a row of frames, inline
    visualize.animation(frames, fps=10)                         # an animated GIF, inline
    visualize.reconstructions_image(vae, frames)                # frames above reconstructions
    visualize.dream_animation(vae, mdn_rnn, frames, actions)    # real | dreamed, side by side
    picture.save("episode.gif")                                 # any of them, atomically

Every function returning a picture returns a `Picture` (rl755.common.pictures, whose
functions this module also offers): encoded PNG or GIF bytes that Jupyter displays when a
cell ends with it and that `save(path)` writes atomically. The stages' own pictures (VAE
reconstructions, the controller's episode GIF and learning curve, the pipeline's predicted
frames) are made with the same functions. `find_world_model` finds and loads trained models
for the pictures (the registry's, else a pipeline run's).

Frames go in as uint8 [..., H, W, C] in 0-255 or floats in [0, 1] (what decoders return).
Rows of model pictures:

    real          the environment's frames o_{t+1}
    VAE           decode(encode(o_{t+1})): what the encoder keeps
    one-step      decode(z'_{t+1}), z'_{t+1} = sample_next(step(z_t, a_t)): the model sees the
                  real (z_t, a_t) up to each step (teacher forcing)
    dream         the model conditioned on the real frames up to `start`, then fed its own
                  samples (open loop) with the real actions: multi-step prediction
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rl755.common.pictures import (
    MIN_HEIGHT,
    Picture,
    animation,
    figure,
    frame_grid,
    frames_image,
    from_file,
    image,
    labeled_rows,
    new_figure,
    to_uint8,
)

__all__ = [  # the pictures (rl755.common.pictures) and the world model's pictures
    "MIN_HEIGHT",
    "Picture",
    "animation",
    "as_seen",
    "decode",
    "dream_animation",
    "encode",
    "figure",
    "frame_grid",
    "frames_image",
    "from_file",
    "image",
    "labeled_rows",
    "latent_projection",
    "new_figure",
    "predicted_frames",
    "predicted_frames_for_registry",
    "predictions_image",
    "reconstructions",
    "reconstructions_image",
    "save_png",
    "temperatures_image",
    "to_uint8",
    "world_model_rows",
]


def save_png(path: str, image: np.ndarray, title: str | None = None) -> None:
    """Writes a predicted_frames image (rows real, VAE, one-step) with labels, atomically."""
    h = image.shape[0] // 3
    rows = {label: image[i * h : (i + 1) * h][None] for i, label in enumerate(ROW_LABELS)}
    labeled_rows(rows, title).save(path)


# ---- what the models see and predict ----------------------------------------------------------
ROW_LABELS = ("real", "VAE", "one-step")


def as_seen(encoder, frames) -> np.ndarray:
    """float [N, h, w, C] in [0, 1]: the frames as the encoder sees them (cropped, resized)."""
    from rl755.models.encoders.callbacks import frames_as_seen

    return frames_as_seen(encoder, frames)


def encode(encoder, frames) -> np.ndarray:
    """z [N, Z] of uint8 frames [N, H, W, C] (the posterior mean for VAEs)."""
    import tensorflow as tf

    return np.asarray(encoder.compute_representation(tf.constant(np.asarray(frames))))


def decode(encoder, z) -> np.ndarray:
    """float frames [N, h, w, C] in [0, 1] of z [N, Z]."""
    import tensorflow as tf

    return np.asarray(encoder.decode(tf.constant(np.asarray(z, np.float32))))


def reconstructions(encoder, frames) -> np.ndarray | None:
    """uint8 [2*h, N*w, C]: the frames as the encoder sees them on top, reconstructions below
    (what train_obs_encoder saves at every checkpoint); None for encoders without a decoder."""
    from rl755.models.encoders.callbacks import reconstruction_grid

    return reconstruction_grid(encoder, frames)


def reconstructions_image(encoder, frames) -> Picture:
    """`reconstructions` as an inline picture (scaled up when small)."""
    grid = reconstructions(encoder, frames)
    if grid is None:
        raise ValueError(f"{type(encoder).__name__} has no decoder: nothing to reconstruct.")
    return image(grid)


def _step_latents(sequential_model, z, actions, start, num_steps, open_loop, temperature, seed):
    """z'_{t+1} [num_steps, Z] for t = start .. start + num_steps - 1 (see module docstring)."""
    import tensorflow as tf

    z = np.asarray(z, np.float32)
    actions = np.asarray(actions, np.float32)
    state = sequential_model.initial_state(1)
    out = []
    for t in range(start + num_steps):
        if t <= start or not open_loop:
            current = z[t : t + 1]
        h, state = sequential_model.step(
            tf.constant(current), tf.constant(actions[t : t + 1]), state
        )
        if t >= start:
            nxt = sequential_model.sample_next(
                h,
                temperature=temperature,
                seed=tf.constant([seed, t], tf.int32),
                z=tf.constant(current),
            )
            current = np.asarray(nxt["z"], np.float32)
            out.append(current[0])
    return np.stack(out)


def world_model_rows(
    encoder,
    sequential_model,
    frames,
    actions,
    start: int = 8,
    num_steps: int = 8,
    rows: Sequence[str] = ("real", "VAE", "one-step", "dream"),
    temperature: float = 1e-3,
    seed: int = 0,
) -> dict:
    """{label: float frames [num_steps, h, w, C]} for steps start+1 .. start+num_steps.

    frames: uint8 [T, H, W, C] (T > start + num_steps); actions: float32 [T, A] (as stored).
    Labels from ("real", "VAE", "one-step", "dream"), or "dream T=<temperature>" for a dream
    at another temperature. `temperature` applies to the sampled rows; ~0 is the mode."""
    frames = np.asarray(frames)
    end = start + num_steps
    if len(frames) < end + 1 or len(actions) < end:
        raise ValueError(
            f"Steps {start + 1}..{end} need at least {end + 1} frames and {end} actions, got "
            f"{len(frames)} and {len(actions)}."
        )
    z = encode(encoder, frames[: end + 1])
    out = {}
    for label in rows:
        if label == "real":
            out[label] = as_seen(encoder, frames[start + 1 : end + 1])
        elif label == "VAE":
            out[label] = decode(encoder, z[start + 1 : end + 1])
        elif label in ("one-step", "dream") or label.startswith("dream T="):
            temp = float(label.split("=")[1]) if "=" in label else temperature
            zs = _step_latents(
                sequential_model, z, actions, start, num_steps, label != "one-step", temp, seed
            )
            out[label] = decode(encoder, zs)
        else:
            raise ValueError(f"Unknown row {label!r}; valid: real, VAE, one-step, dream[ T=x].")
    return out


def predicted_frames(
    encoder, sequential_model, frames, actions, start: int = 8, num_steps: int = 8
) -> np.ndarray:
    """Returns a uint8 image [3 * h, num_steps * w, 3] (rows: real, VAE, one-step)."""
    rows = world_model_rows(
        encoder, sequential_model, frames, actions, start, num_steps, ROW_LABELS
    )
    return np.concatenate([frame_grid(rows[k]) for k in ROW_LABELS], axis=0)


def predictions_image(
    encoder, sequential_model, frames, actions, start: int = 8, num_steps: int = 8, **kwargs
) -> Picture:
    """`world_model_rows` as one labeled picture (kwargs: rows, temperature, seed)."""
    rows = world_model_rows(encoder, sequential_model, frames, actions, start, num_steps, **kwargs)
    return labeled_rows(rows, title=f"steps {start + 1}-{start + num_steps}")


def temperatures_image(
    encoder,
    sequential_model,
    frames,
    actions,
    temperatures: Sequence[float] = (0.1, 1.0, 1.5),
    start: int = 8,
    num_steps: int = 8,
    seed: int = 0,
) -> Picture:
    """Real frames above open-loop dreams from the same start at each temperature."""
    rows = ["real"] + [f"dream T={t:g}" for t in temperatures]
    return predictions_image(
        encoder, sequential_model, frames, actions, start, num_steps, rows=rows, seed=seed
    )


def dream_animation(
    encoder,
    sequential_model,
    frames,
    actions,
    start: int = 0,
    num_steps: int | None = None,
    temperature: float = 1.0,
    seed: int = 0,
    fps: float = 8,
) -> Picture:
    """GIF of the real frames (left) beside a dream (right): the model starts from the real
    frame at `start` and follows the real actions on its own samples for `num_steps`."""
    num_steps = num_steps or len(frames) - start - 1
    rows = world_model_rows(
        encoder,
        sequential_model,
        frames,
        actions,
        start,
        num_steps,
        rows=("real", "dream"),
        temperature=temperature,
        seed=seed,
    )
    both = np.concatenate([rows["real"], rows["dream"]], axis=2)  # [T, h, 2w, C]
    return animation(both, fps=fps)


def latent_projection(encoder, frames, color=None, color_label: str = "time step") -> Picture:
    """The frames' z projected on its 2 principal components, coloured by `color` [N]
    (default: the frame index, i.e. time), joined in time order."""
    z = encode(encoder, frames).astype(np.float64)
    centered = z - z.mean(axis=0)
    _, s, vt = np.linalg.svd(centered, full_matrices=False)
    xy = centered @ vt[:2].T
    explained = (s[:2] ** 2) / max((s**2).sum(), 1e-12)
    color = np.arange(len(z)) if color is None else np.asarray(color)
    fig, ax = new_figure(figsize=(6, 4.5))
    ax.plot(xy[:, 0], xy[:, 1], color="0.8", linewidth=0.5, zorder=1)
    points = ax.scatter(xy[:, 0], xy[:, 1], c=color, s=12, cmap="viridis", zorder=2)
    fig.colorbar(points, ax=ax, label=color_label)
    ax.set_xlabel(f"PC 1 ({explained[0]:.0%} of variance)")
    ax.set_ylabel(f"PC 2 ({explained[1]:.0%} of variance)")
    ax.set_title(f"z of {len(z)} frames (Z = {z.shape[1]})", fontsize=9)
    fig.tight_layout()
    return figure(fig)


def predicted_frames_for_registry(
    env, encoder_name: str, sequential_name: str, out_path: str, num_steps: int = 8
) -> str:
    """Draws predicted frames for the first validation rollout with registered models."""
    from rl755 import zoo

    encoder = zoo.get(env, encoder_name, kind=zoo.ENCODER)()
    seq = zoo.get(env, sequential_name, kind=zoo.SEQUENTIAL)()
    return predicted_frames_of_models(env, encoder, seq, out_path, num_steps)


def predicted_frames_of_models(env, encoder, seq, out_path: str, num_steps: int = 8) -> str:
    """Draws predicted frames of loaded models for the first validation rollout (else train)
    of `env`'s RawRollouts with at least 2 * num_steps + 1 steps; returns `out_path`."""
    from rl755.data import registry

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
