"""Stage 2: train an `ObservationEncoder` on raw rollouts (scripts/models/train_obs_encoder.py).

    train_obs_encoder(model_dir="runs/vae", train_steps=10000, environment="CAR_RACING",
                      model="vae.Vae", batch_size=100, representation_size=32,
                      save_every_n_steps=1000, obs_sampled_per_rollout=100, learning_rate=1e-4)

Data: `rl755.data.<env folder>.raw_rollouts.RawRollouts` (or `rollouts_pattern=`), frames
sampled with `random_rollout_observations` (uint8 [H, W, C], `obs_sampled_per_rollout` per
rollout, parallel reads and decodes of only the sampled frames), shuffle buffer 1000, batches
of `batch_size` (uint8 [B, H, W, C]), prefetch. Nothing loads the whole dataset.

Outputs in `model_dir` (every file written to a temporary name, then renamed):
    model-001.weights.h5 (+ optimizer state), model-001.json    every save_every_n_steps
    model-001.reconstructions.png     validation frames (top) and reconstructions (bottom)
    logs/                             TensorBoard: loss/train, loss/validation, reconstructions
    runs/*.json                       run records (flags, git commit, status)

Rerunning with the same `model_dir` resumes from the newest complete checkpoint: weights,
optimizer state and step count, so the continued run equals an uninterrupted one up to
data order. Asking for no more steps than are done returns at once, saying so.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from rl755.common import checkpoints, lookup, pictures, run_record, sharded_io, tf_setup
from rl755.common.errors import NonFiniteLossError  # noqa: F401  (re-exported)
from rl755.common.structs import Rollout
from rl755.environments import Environments
from rl755.models.common.encoder import ObservationEncoder

SHUFFLE_BUFFER = 1000
NUM_IMAGES_IN_PNG = 8


@dataclasses.dataclass
class TrainResult:
    """What a training run did: the final step and checkpoint, and the losses it saw."""

    step: int
    checkpoint: str | None
    train_losses: list[float]
    validation_losses: list[float]
    already_done: bool = False


# ---- building blocks --------------------------------------------------------------------------
def make_encoder(
    environment: Environments | str, model: str, representation_size: int, **kwargs
) -> ObservationEncoder:
    """Resolves `rl755.models.<env folder>.<model>` and calls it (strict lookup)."""
    env = Environments.from_name(environment)
    fn = lookup.resolve(
        env.folder_module("models"), model, base_class=ObservationEncoder, what="model"
    )
    encoder = fn(representation_size=representation_size, **kwargs)
    if not isinstance(encoder, ObservationEncoder):
        raise TypeError(
            f"{env.folder_module('models')}.{model} returned {type(encoder).__name__}, "
            "not an ObservationEncoder (rl755.models.common.encoder)."
        )
    if int(encoder.representation_size) != int(representation_size):
        raise ValueError(
            f"{model} was asked for representation_size={representation_size} but has "
            f"{encoder.representation_size}."
        )
    return encoder


def build_encoder(encoder: ObservationEncoder, observation_shape) -> ObservationEncoder:
    """Creates the weights by running one dummy frame uint8 [1, *observation_shape]."""
    if hasattr(encoder, "build_for_frames"):
        encoder.build_for_frames()
    elif not encoder.built:
        encoder(tf.zeros((1, *observation_shape), tf.uint8), training=False)
    return encoder


def raw_rollouts_builder(environment: Environments | str, rollouts_pattern: str | None = None):
    """`rl755.data.<env folder>.raw_rollouts.RawRollouts(tfrecords_pattern=rollouts_pattern)`."""
    env = Environments.from_name(environment)
    cls = lookup.resolve(env.folder_module("data"), "raw_rollouts.RawRollouts", what="dataset")
    return cls(tfrecords_pattern=rollouts_pattern)


def check_raw_rollouts(builder, split: str, environment: Environments) -> list[str]:
    """Fails fast (before any training) when `split` has no shards or the wrong frames.

    Returns the split's shard files."""
    try:
        files = builder.get_tfrecord_files(split)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{e} Or point --rollouts_pattern at existing shards "
            "(a glob with '{split}', e.g. '/data/raw/rollouts-{split}*.tfrecord-*')."
        ) from e
    first = None
    for path in files:
        ds = tf.data.TFRecordDataset(path, compression_type=sharded_io.detect_compression(path))
        for record in ds.take(1):
            first = Rollout.from_sequence_example(record.numpy())
        if first is not None:
            break
    if first is None:
        raise ValueError(
            f"The '{split}' shards ({len(files)} files, e.g. {files[0]}) hold no rollouts. "
            "Collect rollouts first (README, stage 1)."
        )
    shape = tuple(np.shape(first.obs_l[0]))
    dtype = np.asarray(first.obs_l[0]).dtype
    if shape != tuple(environment.observation_shape) or dtype != np.uint8:
        raise ValueError(
            f"The '{split}' shards hold {dtype} observations of shape {shape}, but "
            f"{environment.name} frames are uint8 {tuple(environment.observation_shape)} "
            f"(first file: {files[0]}). Pass the --environment these rollouts came from, or "
            "point --rollouts_pattern at raw rollouts of this environment."
        )
    return files


def observation_batches(
    builder, split: str, batch_size: int, obs_sampled_per_rollout: int
) -> tf.data.Dataset:
    """(frames, frames) batches, uint8 [B, H, W, C] each, endless, shuffled, prefetched."""
    ds = builder.random_rollout_observations(
        split=split, obs_sampled_per_rollout=obs_sampled_per_rollout, repeat=True
    )
    ds = ds.shuffle(SHUFFLE_BUFFER).batch(batch_size, drop_remainder=True)
    return ds.map(lambda x: (x, x)).prefetch(tf.data.AUTOTUNE)


def frames_as_seen(encoder: ObservationEncoder, frames) -> np.ndarray:
    """float [N, h, w, C] in [0, 1]: uint8 frames [N, H, W, C] as the encoder sees them
    (its `preprocess`: cropped, resized), else resized to its decoder's output size."""
    frames = tf.convert_to_tensor(np.asarray(frames))
    if hasattr(encoder, "preprocess"):
        return np.asarray(encoder.preprocess(frames))
    size = encoder.decode(encoder.compute_representation(frames[:1])).shape[1:3]
    return np.asarray(tf.image.resize(tf.cast(frames, tf.float32) / 255.0, size))


def reconstruction_grid(encoder: ObservationEncoder, frames) -> np.ndarray | None:
    """uint8 [2*h, N*w, C]: the frames as the model sees them on top, reconstructions below.

    None for encoders without a decoder."""
    frames = tf.convert_to_tensor(np.asarray(frames))
    try:
        recon = encoder.decode(encoder.compute_representation(frames))
    except NotImplementedError:
        return None
    rows = [pictures.frame_grid(frames_as_seen(encoder, frames)), pictures.frame_grid(recon)]
    return np.concatenate(rows, axis=0)


class _StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raises NonFiniteLossError when the (running mean) training loss is NaN or inf.

    Checked every `check_every` steps (reading the loss waits for the step, so not every
    step) and at the end of each save period, before the checkpoint is written (this
    callback comes first), so a NaN model is never saved."""

    def __init__(
        self,
        model_dir: str,
        check_every: int = 50,
        train_steps: int | None = None,
        batch_size: int | None = None,
        log_every_s: float = 60.0,
    ):
        super().__init__()
        self.model_dir = model_dir
        self.check_every = check_every
        self.train_steps = train_steps
        self.batch_size = batch_size
        self.log_every_s = log_every_s
        self._last = None  # (time, step) of the last progress line

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.check_every == 0:
            self._check(logs)
            self._progress(logs)

    def _progress(self, logs):
        """Logs 'step X/Y, loss, images/s' at most every log_every_s seconds."""
        now = time.time()
        step = int(self.model.optimizer.iterations.numpy())
        if self._last is None:
            self._last = (now, step)
            return
        if now - self._last[0] < self.log_every_s:
            return
        rate = (step - self._last[1]) / (now - self._last[0])
        logging.info(
            "step %d/%s: loss %.4f (mean this period), %.1f steps/s%s",
            step,
            self.train_steps or "?",
            float((logs or {}).get("loss", float("nan"))),
            rate,
            f", {rate * self.batch_size:.0f} images/s" if self.batch_size else "",
        )
        self._last = (now, step)

    def on_epoch_end(self, epoch, logs=None):
        self._check(logs)

    def _check(self, logs):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            step = int(self.model.optimizer.iterations.numpy())
            ckpt = checkpoints.newest_complete_checkpoint(self.model_dir)
            raise NonFiniteLossError(
                f"The training loss became {float(loss)} by step {step}. Stopped; "
                + (
                    f"the newest good checkpoint is {ckpt.weights_path} (step {ckpt.step}). "
                    if ckpt
                    else "no checkpoint was written yet. "
                )
                + "Lower --learning_rate (or check the data for broken frames) and rerun."
            )


class _SaveEverything(keras.callbacks.Callback):
    """At the end of each fit epoch (= each save period): checkpoint, PNG, TensorBoard."""

    def __init__(self, model_dir, info, sample_frames, writer, result: TrainResult):
        super().__init__()
        self.model_dir = model_dir
        self.info = info
        self.sample_frames = sample_frames
        self.writer = writer
        self.result = result

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        number = epoch + 1
        step = int(self.model.optimizer.iterations.numpy())
        train_loss = float(logs["loss"]) if "loss" in logs else None
        val_loss = float(logs["val_loss"]) if "val_loss" in logs else None
        png_name = f"model-{number:03d}.reconstructions.png"
        grid = reconstruction_grid(self.model, self.sample_frames)
        if grid is not None:
            grid = pictures.upscaled(grid, max(1, 256 // grid.shape[0]))  # frames >= ~128 px
            pictures.image(grid).save(os.path.join(self.model_dir, png_name))
        with self.writer.as_default(step=step):
            if train_loss is not None:
                tf.summary.scalar("loss/train", train_loss)
            if val_loss is not None:
                tf.summary.scalar("loss/validation", val_loss)
            if grid is not None:
                tf.summary.image("reconstructions", grid[None])
        self.writer.flush()
        info = dict(self.info, step=step, train_loss=train_loss, validation_loss=val_loss)
        if grid is not None:
            info["reconstructions_png"] = png_name
        ckpt = checkpoints.save_checkpoint(self.model_dir, number, self.model, info)
        self.result.step = step
        self.result.checkpoint = ckpt.weights_path
        if train_loss is not None:
            self.result.train_losses.append(train_loss)
        if val_loss is not None:
            self.result.validation_losses.append(val_loss)
        logging.info(
            "step %d: saved %s (train loss %s, validation loss %s)",
            step,
            ckpt.weights_path,
            f"{train_loss:.4f}" if train_loss is not None else "-",
            f"{val_loss:.4f}" if val_loss is not None else "-",
        )


# ---- the stage --------------------------------------------------------------------------------
def train_obs_encoder(
    model_dir: str,
    train_steps: int,
    environment: Environments | str,
    model: str,
    batch_size: int,
    representation_size: int,
    save_every_n_steps: int,
    obs_sampled_per_rollout: int,
    learning_rate: float,
    validation_steps: int = 10,
    rollouts_pattern: str | None = None,
    num_threads: int | None = None,
    run_flags: dict | None = None,
    verbose: int | None = None,
) -> TrainResult:
    """Trains (or resumes training) an encoder; see the module docstring.

    Args:
      model_dir: where checkpoints, PNGs, TensorBoard logs and run records go.
      train_steps: total number of batches (including those of earlier runs).
      environment: an `Environments` name, e.g. "CAR_RACING".
      model: dotted name under `rl755.models.<env folder>`, e.g. "vae.Vae".
      validation_steps: batches of the validation split per save; 0 = no validation.
      rollouts_pattern: glob with "{split}" overriding RawRollouts' location.
      num_threads: TF thread pools (None: TF default).
      run_flags: flags for the run record (default: the arguments).
    """
    for name, value in dict(
        train_steps=train_steps,
        batch_size=batch_size,
        representation_size=representation_size,
        save_every_n_steps=save_every_n_steps,
        obs_sampled_per_rollout=obs_sampled_per_rollout,
    ).items():
        if int(value) <= 0:
            raise ValueError(f"--{name} must be a positive integer, got {value}.")
    if not learning_rate > 0:
        raise ValueError(f"--learning_rate must be positive, got {learning_rate}.")
    if validation_steps < 0:
        raise ValueError(f"--validation_steps must be >= 0, got {validation_steps}.")
    tf_setup.limit_threads(num_threads)
    env = Environments.from_name(environment)
    model_dir = os.path.abspath(os.path.expanduser(str(model_dir)))

    # Everything that can fail fails here, before any compute.
    encoder = make_encoder(
        env, model, representation_size, obs_sampled_per_rollout=obs_sampled_per_rollout
    )
    builder = raw_rollouts_builder(env, rollouts_pattern)
    check_raw_rollouts(builder, "train", env)
    if validation_steps:
        try:
            check_raw_rollouts(builder, "validation", env)
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"{e} Or pass --validation_steps=0 to train without a validation loss."
            ) from e
    info = {
        "model": model,
        "environment": env.name,
        "representation_size": int(representation_size),
        "model_class": f"{type(encoder).__module__}.{type(encoder).__qualname__}",
        "obs_sampled_per_rollout": int(obs_sampled_per_rollout),
        "batch_size": int(batch_size),
        "learning_rate": float(learning_rate),
        "rollouts_pattern": builder.tfrecords_pattern(),
    }
    latest = checkpoints.newest_complete_checkpoint(model_dir)
    if latest is not None:
        for key in ("model", "environment", "representation_size"):
            if key in latest.info and latest.info[key] != info[key]:
                raise ValueError(
                    f"{model_dir} holds a checkpoint of {key}={latest.info[key]!r} "
                    f"({latest.weights_path}) but this run asks for {key}={info[key]!r}. "
                    "Use another --model_dir, or the original settings to resume."
                )
    done = latest.step if latest is not None else 0
    result = TrainResult(done, latest.weights_path if latest else None, [], [])
    if done >= train_steps:
        logging.info(
            "%s already holds %d training steps (checkpoint %s) >= --train_steps=%d; nothing "
            "to do. Pass a larger --train_steps to train further.",
            model_dir,
            done,
            latest.weights_path,
            train_steps,
        )
        print(
            f"Nothing to do: {model_dir} already holds {done} steps >= --train_steps={train_steps}."
        )
        result.already_done = True
        return result

    flags = run_flags if run_flags is not None else dict(info, train_steps=train_steps)
    with run_record.record_run(model_dir, flags, stage="train_obs_encoder"):
        build_encoder(encoder, env.observation_shape)
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
        encoder.compile(optimizer=optimizer, loss=encoder.get_loss_fn())
        if latest is not None:
            optimizer.build(encoder.trainable_variables)  # so its state is restored too
            checkpoints.load_weights_checked(encoder, latest.weights_path)
            logging.info("Resuming %s from %s at step %d.", model_dir, latest.weights_path, done)
        train_ds = observation_batches(builder, "train", batch_size, obs_sampled_per_rollout)
        sample_split = "validation" if validation_steps else "train"
        sample_frames = next(
            iter(
                builder.random_rollout_observations(sample_split, obs_sampled_per_rollout=1).batch(
                    NUM_IMAGES_IN_PNG
                )
            )
        ).numpy()
        fit_kwargs = {}
        if validation_steps:
            fit_kwargs = dict(
                validation_data=observation_batches(
                    builder, "validation", batch_size, obs_sampled_per_rollout
                ),
                validation_steps=validation_steps,
            )
        writer = tf.summary.create_file_writer(os.path.join(model_dir, "logs"))
        callbacks = [
            _StopOnNonFiniteLoss(model_dir, train_steps=train_steps, batch_size=batch_size),
            _SaveEverything(model_dir, info, sample_frames, writer, result),
        ]
        if verbose is None:
            verbose = 1 if sys.stdout.isatty() else 2
        first_epoch = latest.number if latest is not None else 0
        remaining = train_steps - done
        full, rest = divmod(remaining, save_every_n_steps)
        logging.info(
            "Training %s on %s for %d steps (step %d -> %d), saving every %d.",
            model,
            env.name,
            remaining,
            done,
            train_steps,
            save_every_n_steps,
        )
        if full:
            encoder.fit(
                train_ds,
                steps_per_epoch=save_every_n_steps,
                initial_epoch=first_epoch,
                epochs=first_epoch + full,
                callbacks=callbacks,
                verbose=verbose,
                shuffle=False,  # the pipeline shuffles
                **fit_kwargs,
            )
        if rest:
            encoder.fit(
                train_ds,
                steps_per_epoch=rest,
                initial_epoch=first_epoch + full,
                epochs=first_epoch + full + 1,
                callbacks=callbacks,
                verbose=verbose,
                shuffle=False,  # the pipeline shuffles
                **fit_kwargs,
            )
        writer.close()
    return result
