"""Stage 4: train a sequential model on encoded rollouts (scripts/models/train_sequential_model.py),
and load the trained model back.

    train_sequential_model(model_dir="runs/mdn", train_steps=20000, environment="CAR_RACING",
                           model="mdn_rnn.mdn_rnn", rollouts_dataset="VaeEncodedRollouts",
                           batch_size=100, sequence_length=32, learning_rate=1e-3)
    model = load_trained_model("runs/mdn")          # newest checkpoint, weights loaded

The names resolve strictly (`resolve_model_fn`, `resolve_rollouts_dataset`, the `task`); the
data's Z and A are checked against the model's before any training. A model with data of its
own beside the weights (a retrieval model's index) builds it here, before training
(`SequentialModel.build_extras`, resumable), and loads it back in `load_trained_model`. The loop, the devices, the
checkpoints and the TensorBoard layout are in `rl755.models.sequential.loop`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from absl import logging

from rl755.common import checkpoints, determinism, devices, run_record, tf_setup
from rl755.environments import Environments
from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential import data, loop, resume, sharding
from rl755.models.sequential.results import TrainingResult


# ---- names -------------------------------------------------------------------------------------
def resolve_model_fn(environment: Environments | str, model: str) -> Callable[[], SequentialModel]:
    """The no-argument constructor that `--model` names for `environment`: a sequential model
    of rl755.models.catalogue sized by the environment's presets (strict lookup)."""
    from rl755.models import catalogue

    return catalogue.model_fn(environment, model, kind=catalogue.SEQUENTIAL)


def resolve_rollouts_dataset(environment: Environments | str, rollouts_dataset: str):
    """The `EncodedRolloutDatasetBuilder` class that `--rollouts_dataset` names
    (rl755.data.registry: VaeEncodedRollouts or the CamelCase name of a zoo encoder)."""
    from rl755.data import registry

    return registry.encoded_rollouts_class(environment, rollouts_dataset)


# ---- the stage ---------------------------------------------------------------------------------
def train_sequential_model(
    model_dir: str,
    train_steps: int,
    environment: str,
    model: str,
    rollouts_dataset: str,
    batch_size: int,
    sequence_length: int,
    learning_rate: float,
    sample_observations: bool = False,
    difference_targets: bool = False,
    slice_start: str = "uniform",
    save_every_n_steps: int = 1000,
    validation_steps: int = 10,
    check_numerics: bool = False,
    rollouts_pattern: str | None = None,
    num_threads: int | None = None,
    run_flags: dict | None = None,
    task: str = "autoregressive",
    seed: int = 0,
    deterministic: bool | None = None,
    initial_weights: str | None = None,
    learning_rate_decay: float = 1.0,
    min_learning_rate: float = 0.0,
    clip_norm: float = 0.0,
    batch_shards: int | None = None,
    keep_checkpoints: int = checkpoints.KEEP_CHECKPOINTS,
) -> TrainingResult:
    """What scripts/models/train_sequential_model.py runs: resolves the names strictly,
    checks that the dataset's Z and A match the model's (before any training), records the
    run in `<model_dir>/runs/` and trains (`loop.fit_sequential_model`).

    `model` names a no-argument function or class giving a SequentialModel
    (`resolve_model_fn`), `rollouts_dataset` an EncodedRolloutDatasetBuilder
    (`resolve_rollouts_dataset`), constructed with `tfrecords_pattern=rollouts_pattern` when
    given (a glob with "{split}"). `task`: "autoregressive", "infill" or "mixed"
    (rl755.models.sequential.tasks). `run_flags` go into the run record and TensorBoard
    (default: the arguments). `seed` and `deterministic`: `rl755.common.determinism.configure`
    (initial weights, slice starts, z samples of `sample_observations`, shuffling).
    `initial_weights`: a new run starts from that model dir's (or shipped folder's) weights
    (`fit_sequential_model`). `learning_rate_decay`, `min_learning_rate`, `clip_norm`: Adam's
    schedule and gradient clipping (`fit_sequential_model`; defaults: constant, none).
    `batch_shards`: parts of each replica's batch run in parallel (`fit_sequential_model`;
    None: by cores). `keep_checkpoints`: rl755.common.checkpoints.KEEP_HELP. Returns
    `fit_sequential_model`'s `TrainingResult`."""
    from rl755.data.common.rollout_datasets import EncodedRolloutDatasetBuilder
    from rl755.models.sequential import tasks

    tf_setup.limit_threads(num_threads)
    # First: a multi-worker strategy must be created before TensorFlow initializes.
    strategy = devices.make_strategy()
    determinism.configure(seed, deterministic)  # before any layer draws its initializer seed
    env = Environments.from_name(environment)
    model_fn = resolve_model_fn(env, model)
    dataset_cls = resolve_rollouts_dataset(env, rollouts_dataset)
    for name, value in dict(
        sequence_length=sequence_length, train_steps=train_steps, keep_checkpoints=keep_checkpoints
    ).items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
    training_task = tasks.resolve_task(task)
    builder = dataset_cls(tfrecords_pattern=rollouts_pattern) if rollouts_pattern else dataset_cls()
    if not isinstance(builder, EncodedRolloutDatasetBuilder):
        raise TypeError(f"{rollouts_dataset} is not an EncodedRolloutDatasetBuilder.")
    builder.check_shards("train")  # fails fast: how to create the data, or which file is broken
    splits = ("train",)
    if validation_steps:
        with contextlib.suppress(FileNotFoundError):  # (the loop explains a missing split)
            builder.check_shards("validation")
            splits = ("train", "validation")
    probe = model_fn()
    if not isinstance(probe, SequentialModel):
        raise TypeError(f"--model={model} gives {type(probe).__name__}, not a SequentialModel.")
    data.check_sizes(
        probe,
        builder.representation_size(),
        builder.action_size,
        f"Dataset {rollouts_dataset} ({builder.tfrecords_pattern()})",
    )
    tasks.check_model_trains_on(probe, training_task)
    if batch_shards is not None:  # (a requested count is checked before anything is written)
        sharding.choose_batch_shards(
            batch_shards, batch_size // strategy.num_replicas_in_sync, True, training_task
        )
    rollout_ids = bool(probe.needs_rollout_ids)
    logging.info("Training on %d replica(s).", strategy.num_replicas_in_sync)
    info = dict(
        environment=env.name,
        model=model,
        rollouts_dataset=rollouts_dataset,
        sequence_length=int(sequence_length),
        sample_observations=bool(sample_observations),
        slice_start=slice_start,
    )
    if run_flags is None:
        run_flags = dict(
            info,
            model_dir=model_dir,
            train_steps=train_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            learning_rate_decay=learning_rate_decay,
            min_learning_rate=min_learning_rate,
            clip_norm=clip_norm,
            batch_shards=batch_shards,
            keep_checkpoints=keep_checkpoints,
            difference_targets=difference_targets,
            save_every_n_steps=save_every_n_steps,
            validation_steps=validation_steps,
            rollouts_pattern=rollouts_pattern,
            task=task,
        )
    single_process = int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) <= 1
    with (
        run_record.record_run(model_dir, run_flags, stage="train_sequential_model"),
        # (several workers share model_dir: only a lone process cleans up after itself)
        (
            run_record.removed_on_failure(model_dir, checkpoints.is_marker)
            if single_process
            else contextlib.nullcontext()
        ),
        builder.naming_bad_shards(*splits),
    ):
        if devices.is_chief(strategy):
            data.warn_if_episodes_are_cut(builder, sequence_length, slice_start)
            probe.build_extras(model_dir, builder)
        else:  # other workers wait for the chief's (one writer per file)
            _wait_for_extras(probe, model_dir)
        del probe
        return loop.fit_sequential_model(
            model_fn=model_fn,
            dataset_fn=data.autoregressive_dataset_fn(
                builder,
                sequence_length,
                sample_observations,
                difference_targets,
                slice_start=slice_start,
                rollout_ids=rollout_ids,
            ),
            model_dir=model_dir,
            train_steps=train_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            save_every_n_steps=save_every_n_steps,
            validation_steps=validation_steps,
            difference_targets=difference_targets,
            check_numerics=check_numerics,
            strategy=strategy,
            model_info=info,
            hparams=run_flags,
            task=training_task,
            seed=seed,
            initial_weights=initial_weights,
            learning_rate_decay=learning_rate_decay,
            min_learning_rate=min_learning_rate,
            clip_norm=clip_norm,
            batch_shards=batch_shards,
            keep_checkpoints=keep_checkpoints,
        )


def _wait_for_extras(model: SequentialModel, model_dir: str, poll_seconds: float = 10.0) -> None:
    import time

    waited = 0.0
    while True:
        try:
            model.load_extras(model_dir)
            return
        except FileNotFoundError:
            if waited % 600 < poll_seconds:
                logging.info(
                    "Waiting for the chief to build %s's extras (%.0f s).", model_dir, waited
                )
            time.sleep(poll_seconds)
            waited += poll_seconds


# ---- loading -----------------------------------------------------------------------------------
def _checkpoint(model_dir: str, step: int | None) -> checkpoints.Checkpoint:
    ckpts = checkpoints.list_complete_checkpoints(model_dir) or _old_format_checkpoints(model_dir)
    return checkpoints.checkpoint_at(
        model_dir, step, "it holds no trained sequential model.", ckpts
    )


def _old_format_checkpoints(model_dir: str) -> list[checkpoints.Checkpoint]:
    """Checkpoints of the format before rl755.common.checkpoints, for loading only:
    sequential_model.json + model-<step>.weights.h5 beside model-<step>.optimizer.npz."""
    import glob
    import json
    import os
    import re

    info_path = os.path.join(model_dir, resume.OLD_FORMAT_FILE)
    if not os.path.exists(info_path):
        return []
    with open(info_path) as f:
        info = json.load(f)
    out = []
    for path in glob.glob(os.path.join(model_dir, "model-*.weights.h5")):
        m = re.fullmatch(r"model-(\d+)\.weights\.h5", os.path.basename(path))
        if m and os.path.exists(path[: -len(".weights.h5")] + ".optimizer.npz"):
            step = int(m.group(1))
            out.append(checkpoints.Checkpoint(step, {"weights": path}, dict(info, step=step)))
    return sorted(out, key=lambda c: c.number)


def read_model_info(model_dir: str, step: int | None = None) -> dict:
    """What was trained in `model_dir` (the newest checkpoint's marker, or the one at `step`):
    environment, model, rollouts_dataset, representation_size, difference_targets, step..."""
    return dict(_checkpoint(model_dir, step).info)


def load_trained_model(
    model_dir: str, model_fn: Callable[[], SequentialModel] | None = None, step: int | None = None
) -> SequentialModel:
    """The model trained in `model_dir` with its weights loaded (newest checkpoint, or the
    one after `step` steps). `model_fn` defaults to the model named in the checkpoint's
    marker; `difference_targets` is restored from there too, and what the model keeps beside
    its weights is loaded (`load_extras`: a retrieval model's index)."""
    ckpt = _checkpoint(model_dir, step)
    if model_fn is None:
        model_fn = resolve_model_fn(ckpt.info["environment"], ckpt.info["model"])
    model = model_fn()
    model.difference_targets = bool(ckpt.info.get("difference_targets", False))
    model.load_extras(model_dir)
    model.ensure_built()
    model.load_weights(ckpt.weights_path)
    return model
