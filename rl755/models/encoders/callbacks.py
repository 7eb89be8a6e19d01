"""Keras callbacks of the encoder trainer (rl755.models.encoders.train): a non-finite
loss check, and everything done at the end of each save period (checkpoint, reconstruction
picture, TensorBoard)."""

from __future__ import annotations

import math
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from rl755.common import checkpoints, pictures
from rl755.common.errors import NonFiniteLossError
from rl755.common.tensorboard import TrainingLogs
from rl755.models.common.encoder import ObservationEncoder


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


class StopOnNonFiniteLoss(keras.callbacks.Callback):
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


class SaveEveryPeriod(keras.callbacks.Callback):
    """At the end of each fit epoch (= each save period): checkpoint, PNG, TensorBoard.

    `result` (a train_encoder.TrainResult) collects the steps, losses and checkpoints."""

    def __init__(self, model_dir, info, sample_frames, logs: TrainingLogs, result, batch_size: int):
        super().__init__()
        self.model_dir = model_dir
        self.info = info
        self.sample_frames = sample_frames
        self.logs = logs
        self.result = result
        self.batch_size = batch_size
        self._start = None  # (time, step) at the start of the period
        self._last_batch_time = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = (time.perf_counter(), int(self.model.optimizer.iterations.numpy()))

    def on_train_batch_end(self, batch, logs=None):
        self._last_batch_time = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        number = epoch + 1
        step = int(self.model.optimizer.iterations.numpy())
        train_loss = float(logs["loss"]) if "loss" in logs else None
        val_loss = float(logs["val_loss"]) if "val_loss" in logs else None
        png_name = checkpoints.file_name(number, ".reconstructions.png")
        grid = reconstruction_grid(self.model, self.sample_frames)
        if grid is not None:
            grid = pictures.upscaled(grid, max(1, 256 // grid.shape[0]))  # frames >= ~128 px
            pictures.image(grid).save(os.path.join(self.model_dir, png_name))
        scalars = {} if train_loss is None else {"losses/total": train_loss}
        if self._start is not None and self._last_batch_time is not None:
            seconds = max(self._last_batch_time - self._start[0], 1e-9)
            steps_per_second = (step - self._start[1]) / seconds
            scalars["perf/steps_per_second"] = steps_per_second
            scalars["perf/images_per_second"] = steps_per_second * self.batch_size
        self.logs.scalars("train", step, scalars)
        if val_loss is not None:
            self.logs.scalars("validation", step, {"losses/total": val_loss})
        if grid is not None:
            self.logs.image("validation", step, "images/reconstructions", grid)
        self.logs.flush()
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
