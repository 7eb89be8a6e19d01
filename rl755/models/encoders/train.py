"""Stage 2: train an `ObservationEncoder` on raw rollouts (scripts/models/train_obs_encoder.py).

    train_obs_encoder(model_dir="runs/vae", train_steps=10000, environment="CAR_RACING",
                      model="vae.Vae", batch_size=100, representation_size=32,
                      save_every_n_steps=1000, obs_sampled_per_rollout=100, learning_rate=1e-4)

Frames are sampled from the environment's `RawRollouts` (or `rollouts_pattern=`), streamed.
Rerunning with the same `model_dir` resumes from the newest complete checkpoint, exactly: each
checkpoint segment reseeds with `seed + step` and makes its datasets and traced steps anew. Bad input
(a broken shard, a bad flag) fails before any output, naming the file or flag.
docs/architecture.md describes what a model dir holds.
"""

from __future__ import annotations

import dataclasses
import os
import sys

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from rl755.common import checkpoints, determinism, run_record, shard_checks, sharded_io, tf_setup
from rl755.common.errors import (
    MissingData,
    NonFiniteLossError,  # noqa: F401  (re-exported)
)
from rl755.common.results import Result
from rl755.common.structs import Rollout
from rl755.common.tensorboard import TrainingLogs
from rl755.data import registry
from rl755.environments import Environments
from rl755.models import catalogue
from rl755.models.common.encoder import ObservationEncoder
from rl755.models.encoders.callbacks import SaveEveryPeriod, StopOnNonFiniteLoss

SHUFFLE_BUFFER = 1000
# What a resumed or warm-started run must share with the checkpoint it starts from.
IDENTITY_KEYS = ("model", "environment", "representation_size")
NUM_IMAGES_IN_PNG = 8


@dataclasses.dataclass
class TrainResult(Result):
    """What a stage-2 training run did (`train_obs_encoder`).

    Attributes:
      step: the step it ended at (counting earlier runs of the model dir).
      checkpoint: the newest checkpoint's weights file, or None.
      train_losses: the mean training loss of each save period of this run.
      validation_losses: the validation loss at each save of this run.
      already_done: True when the model dir was trained as far as asked (nothing ran).
    """

    step: int
    checkpoint: str | None
    train_losses: list[float]
    validation_losses: list[float]
    already_done: bool = False


# ---- building blocks --------------------------------------------------------------------------
def resolve_encoder_fn(environment: Environments | str, model: str):
    """The constructor that `--model` names for `environment` (strict lookup); it takes
    `representation_size=` and gives an ObservationEncoder."""
    return catalogue.model_fn(environment, model, kind=catalogue.ENCODER)


def make_encoder(
    environment: Environments | str, model: str, representation_size: int, **kwargs
) -> ObservationEncoder:
    """`resolve_encoder_fn(environment, model)(representation_size=..., **kwargs)`, checked."""
    fn = resolve_encoder_fn(environment, model)
    encoder = fn(representation_size=representation_size, **kwargs)
    if not isinstance(encoder, ObservationEncoder):
        raise TypeError(
            f"--model={model} returned {type(encoder).__name__}, "
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
    """The environment's `RawRollouts(tfrecords_pattern=rollouts_pattern)` (rl755.data.registry)."""
    return registry.raw_rollouts_class(environment)(tfrecords_pattern=rollouts_pattern)


def check_raw_rollouts(builder, split: str, environment: Environments) -> list[str]:
    """Fails fast (before any training) when `split` has no shards, a shard that does not
    read to the end (BadInput naming it), or the wrong frames.

    Returns the split's shard files."""
    try:
        files = builder.check_shards(split)
    except FileNotFoundError as e:
        raise MissingData(
            f"{e} Or point --rollouts_pattern at existing shards "
            "(a glob with '{split}', e.g. '/data/raw/rollouts-{split}*.tfrecord-*')."
        ) from e
    first = None
    for path in files:
        ds = tf.data.TFRecordDataset(path, compression_type=sharded_io.detect_compression(path))
        with shard_checks.naming_bad_shards([path], path):
            for record in ds.take(1):
                first = Rollout.from_sequence_example(record.numpy())
        if first is not None:
            break
    if first is None:
        raise ValueError(
            f"The '{split}' shards ({len(files)} files, e.g. {files[0]}) hold no rollouts. "
            "Collect rollouts first (docs/stages/collect.md)."
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
    seed: int = 0,
    deterministic: bool | None = None,
    keep_checkpoints: int = checkpoints.KEEP_CHECKPOINTS,
    initial_weights: str | None = None,
) -> TrainResult:
    """Trains (or resumes training) an encoder; see the module docstring.

    Args:
      model_dir: where checkpoints, PNGs, TensorBoard logs and run records go.
      train_steps: total number of batches (including those of earlier runs).
      environment: an `Environments` name, e.g. "CAR_RACING".
      model: an encoder name of rl755.models.catalogue, e.g. "vae.Vae".
      validation_steps: batches of the validation split per save; 0 = no validation.
      rollouts_pattern: glob with "{split}" overriding RawRollouts' location.
      num_threads: TF thread pools (None: TF default).
      seed: seeds the weights' initial values, frame sampling and shuffling, and the VAE's
        posterior samples (`rl755.common.determinism.configure`).
      deterministic: TensorFlow op determinism; None: on without a GPU.
      run_flags: flags for the run record and TensorBoard (default: the arguments).
      keep_checkpoints: rl755.common.checkpoints.KEEP_HELP.
      initial_weights: a warm start: another run's model_dir or a shipped folder whose
        newest checkpoint holds the same model (model, environment, representation size);
        its weights start this run at step 0 with a new optimizer. Unused when `model_dir`
        holds a checkpoint (the run resumes from it).

    Raises:
      FileNotFoundError: `initial_weights` holds no complete checkpoint.
      ValueError: a bad flag, or `initial_weights` or `model_dir` holding another model.
    """
    for name, value in dict(
        train_steps=train_steps,
        batch_size=batch_size,
        representation_size=representation_size,
        save_every_n_steps=save_every_n_steps,
        obs_sampled_per_rollout=obs_sampled_per_rollout,
        keep_checkpoints=keep_checkpoints,
    ).items():
        if int(value) <= 0:
            raise ValueError(f"--{name} must be a positive integer, got {value}.")
    if not learning_rate > 0:
        raise ValueError(f"--learning_rate must be positive, got {learning_rate}.")
    if validation_steps < 0:
        raise ValueError(f"--validation_steps must be >= 0, got {validation_steps}.")
    tf_setup.limit_threads(num_threads)
    determinism.configure(seed, deterministic)  # before any layer draws its initializer seed
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
            raise MissingData(
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
    checkpoints.check_same_run(latest, info, IDENTITY_KEYS, model_dir)
    init = checkpoints.warm_start(
        latest,
        initial_weights,
        info,
        IDENTITY_KEYS,
        model_dir,
        "a train_obs_encoder.py --model_dir or a shipped folder, e.g. "
        "rl755/zoo/shipped/<env>/<name>",
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
    splits = ("train", "validation") if validation_steps else ("train",)
    with (
        run_record.record_run(model_dir, flags, stage="train_obs_encoder"),
        run_record.removed_on_failure(model_dir, is_progress=checkpoints.is_marker),
        builder.naming_bad_shards(*splits),
    ):
        build_encoder(encoder, env.observation_shape)
        if init is not None:  # before compile: the checkpoint's optimizer state stays unused
            checkpoints.load_weights_checked(encoder, init.weights_path)
            logging.info(
                "Starting from the weights of %s (its step %d); step 0 here, a new optimizer.",
                init.weights_path,
                init.step,
            )
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
        encoder.compile(optimizer=optimizer, loss=encoder.get_loss_fn())
        if latest is not None:
            optimizer.build(encoder.trainable_variables)  # so its state is restored too
            checkpoints.load_weights_checked(encoder, latest.weights_path)
            logging.info("Resuming %s from %s at step %d.", model_dir, latest.weights_path, done)
        determinism.reseed_segment(seed, 0)  # the pictures' frames: the same in every run
        sample_split = "validation" if validation_steps else "train"
        sample_frames = next(
            iter(
                builder.random_rollout_observations(sample_split, obs_sampled_per_rollout=1).batch(
                    NUM_IMAGES_IN_PNG
                )
            )
        ).numpy()
        logs = TrainingLogs(model_dir)
        logs.hparams(flags, step=done)
        callbacks = [
            StopOnNonFiniteLoss(model_dir, train_steps=train_steps, batch_size=batch_size),
            SaveEveryPeriod(
                model_dir, info, sample_frames, logs, result, batch_size, keep_checkpoints
            ),
        ]
        if verbose is None:
            verbose = 1 if sys.stdout.isatty() else 2
        epoch = latest.number if latest is not None else 0
        logging.info(
            "Training %s on %s for %d steps (step %d -> %d), saving every %d.",
            model,
            env.name,
            train_steps - done,
            done,
            train_steps,
            save_every_n_steps,
        )
        try:
            step = done
            while step < train_steps:
                end = min((step // save_every_n_steps + 1) * save_every_n_steps, train_steps)
                _fit_segment(
                    encoder, builder, seed, step, end - step, epoch, batch_size,
                    obs_sampled_per_rollout, validation_steps, callbacks=callbacks,
                    verbose=verbose,
                )  # fmt: skip
                step, epoch = end, epoch + 1
        finally:
            logs.close()
    return result


def _fit_segment(
    encoder, builder, seed, step, steps, epoch, batch_size, obs_sampled_per_rollout,
    validation_steps, **fit_kwargs,
) -> None:  # fmt: skip
    """One checkpoint segment (one fit epoch) of `steps` steps from `step`. Its draws (frames,
    shuffles, the VAE's posterior samples) are a function of (seed, step): reseeded, new
    datasets, and traced steps anew (so that stateful random ops start afresh), as a run
    resumed at `step` makes them."""
    determinism.reseed_segment(seed, step, encoder)
    encoder.make_train_function(force=True)
    encoder.make_test_function(force=True)
    train_ds = observation_batches(builder, "train", batch_size, obs_sampled_per_rollout)
    if validation_steps:
        fit_kwargs.update(
            validation_data=observation_batches(
                builder, "validation", batch_size, obs_sampled_per_rollout
            ),
            validation_steps=validation_steps,
        )
    encoder.fit(
        train_ds,
        steps_per_epoch=steps,
        initial_epoch=epoch,
        epochs=epoch + 1,
        shuffle=False,  # the pipeline shuffles
        **fit_kwargs,
    )
