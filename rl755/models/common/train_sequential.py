"""Stage 4: train a sequential model on encoded rollouts (scripts/models/train_sequential_model.py),
and load the trained model back.

    train_sequential_model(model_dir="runs/mdn", train_steps=20000, environment="CAR_RACING",
                           model="mdn_rnn.mdn_rnn", rollouts_dataset="VaeEncodedRollouts",
                           batch_size=100, sequence_length=32, learning_rate=1e-3)
    model = load_trained_model("runs/mdn")          # newest checkpoint, weights loaded

The names resolve strictly (`resolve_model_fn`, `resolve_rollouts_dataset`); the data's Z
and A are checked against the model's before any training. The loop, the devices, the
checkpoints and the TensorBoard layout are in `rl755.models.common.sequential_loop`.
"""

from __future__ import annotations

from collections.abc import Callable

from absl import logging

from rl755.common import checkpoints, determinism, devices, run_record, tf_setup
from rl755.environments import Environments
from rl755.models.common import sequential_loop
from rl755.models.common.sequential import SequentialModel


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
    save_every_n_steps: int = 1000,
    validation_steps: int = 10,
    check_numerics: bool = False,
    rollouts_pattern: str | None = None,
    num_threads: int | None = None,
    run_flags: dict | None = None,
    seed: int = 0,
    deterministic: bool | None = None,
) -> dict:
    """What scripts/models/train_sequential_model.py runs: resolves the names strictly,
    checks that the dataset's Z and A match the model's (before any training), records the
    run in `<model_dir>/runs/` and trains (`sequential_loop.fit_sequential_model`).

    `model` names a no-argument function or class giving a SequentialModel
    (`resolve_model_fn`), `rollouts_dataset` an EncodedRolloutDatasetBuilder
    (`resolve_rollouts_dataset`), constructed with `tfrecords_pattern=rollouts_pattern` when
    given (a glob with "{split}"). `run_flags` go into the run record and TensorBoard
    (default: the arguments). `seed` and `deterministic`: `rl755.common.determinism.configure`
    (initial weights, slice starts, z samples of `sample_observations`, shuffling). Returns
    `fit_sequential_model`'s result."""
    from rl755.data.common.rollout_datasets import EncodedRolloutDatasetBuilder

    tf_setup.limit_threads(num_threads)
    # First: a multi-worker strategy must be created before TensorFlow initializes.
    strategy = devices.make_strategy()
    determinism.configure(seed, deterministic)  # before any layer draws its initializer seed
    env = Environments.from_name(environment)
    model_fn = resolve_model_fn(env, model)
    dataset_cls = resolve_rollouts_dataset(env, rollouts_dataset)
    for name, value in dict(sequence_length=sequence_length, train_steps=train_steps).items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
    builder = dataset_cls(tfrecords_pattern=rollouts_pattern) if rollouts_pattern else dataset_cls()
    if not isinstance(builder, EncodedRolloutDatasetBuilder):
        raise TypeError(f"{rollouts_dataset} is not an EncodedRolloutDatasetBuilder.")
    builder.get_tfrecord_files("train")  # fails fast, saying how to create the data
    probe = model_fn()
    if not isinstance(probe, SequentialModel):
        raise TypeError(f"--model={model} gives {type(probe).__name__}, not a SequentialModel.")
    sequential_loop.check_sizes(
        probe,
        builder.representation_size(),
        builder.action_size,
        f"Dataset {rollouts_dataset} ({builder.tfrecords_pattern()})",
    )
    del probe
    logging.info("Training on %d replica(s).", strategy.num_replicas_in_sync)
    info = dict(
        environment=env.name,
        model=model,
        rollouts_dataset=rollouts_dataset,
        sequence_length=int(sequence_length),
        sample_observations=bool(sample_observations),
    )
    if run_flags is None:
        run_flags = dict(
            info,
            model_dir=model_dir,
            train_steps=train_steps,
            batch_size=batch_size,
            learning_rate=learning_rate,
            difference_targets=difference_targets,
            save_every_n_steps=save_every_n_steps,
            validation_steps=validation_steps,
            rollouts_pattern=rollouts_pattern,
        )
    with run_record.record_run(model_dir, run_flags, stage="train_sequential_model"):
        return sequential_loop.fit_sequential_model(
            model_fn=model_fn,
            dataset_fn=sequential_loop.autoregressive_dataset_fn(
                builder, sequence_length, sample_observations, difference_targets
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
            seed=seed,
        )


# ---- loading -----------------------------------------------------------------------------------
def _checkpoint(model_dir: str, step: int | None) -> checkpoints.Checkpoint:
    ckpts = checkpoints.list_complete_checkpoints(model_dir) or _old_format_checkpoints(model_dir)
    if step is not None:
        ckpts = [c for c in ckpts if c.step == int(step)]
    if not ckpts:
        raise FileNotFoundError(
            f"No complete checkpoint in {model_dir}"
            + (f" after step {step}" if step is not None else "")
            + ": it holds no trained sequential model."
        )
    return ckpts[-1]


def _old_format_checkpoints(model_dir: str) -> list[checkpoints.Checkpoint]:
    """Checkpoints of the format before rl755.common.checkpoints, for loading only:
    sequential_model.json + model-<step>.weights.h5 beside model-<step>.optimizer.npz."""
    import glob
    import json
    import os
    import re

    info_path = os.path.join(model_dir, sequential_loop.OLD_FORMAT_FILE)
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
    marker; `difference_targets` is restored from there too."""
    ckpt = _checkpoint(model_dir, step)
    if model_fn is None:
        model_fn = resolve_model_fn(ckpt.info["environment"], ckpt.info["model"])
    model = model_fn()
    model.difference_targets = bool(ckpt.info.get("difference_targets", False))
    model.ensure_built()
    model.load_weights(ckpt.weights_path)
    return model
