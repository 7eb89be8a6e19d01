"""Training sequential models on encoded rollouts (stage 4), on one or many devices.

    from rl755.models.common import train_sequential as ts
    ts.train_sequential_model(
        model_fn=catalogue.model_fn("FAKE_PIXELS", "lstm.deterministic_lstm"),  # () -> model
        dataset_fn=ts.autoregressive_dataset_fn(builder, sequence_length=32),
        model_dir="/tmp/lstm", train_steps=1000, batch_size=64, learning_rate=1e-3)

`dataset_fn(split)` returns unbatched slice dicts as from
`EncodedRolloutDatasetBuilder.get_autoregressive_slices` ("inputs" [L, Z + A], "targets"
[L, Z], "rewards", "dones", "mask", "target_mask" [L]), repeating.

Devices: `make_strategy()` picks `MultiWorkerMirroredStrategy` (TF's SlurmClusterResolver)
when the process is one of several `srun` tasks (SLURM_STEP_NUM_TASKS > 1), otherwise a
`MirroredStrategy` over the visible GPUs (or over the logical CPUs when there is no GPU;
tests split the CPU in two). `batch_size` is the global batch, split across replicas; the
loss is the masked mean over the whole global batch (counts are summed across replicas),
so N devices compute the same loss and gradients as one.

`model_dir` layout (rerunning with the same model_dir resumes):
    model-{step:03d}.weights.h5        model weights after `step` steps (Keras format)
    model-{step:03d}.optimizer.npz     optimizer state + step, for an exact resume
    sequential_model.json              what was trained (environment, model, dataset, targets)
    train/, validation/                TensorBoard: loss and each loss term
    runs/*.json                        run records (flags, git commit, SLURM ids)
Each file is written under a temporary name and renamed when complete; the optimizer file
is written first, so a weights file whose optimizer file exists is a complete checkpoint.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from rl755.common import sharded_io
from rl755.common.errors import NonFiniteLossError  # noqa: F401  (re-exported)
from rl755.models.common.sequential import SequentialModel

CHECKPOINT_RE = re.compile(r"^model-(\d+)\.weights\.h5$")
MODEL_INFO = "sequential_model.json"
# What a resumed run must share with the run that made the checkpoints (the dataset, sequence
# length and observation sampling may change, e.g. for a curriculum).
_IDENTITY_KEYS = (
    "environment",
    "model",
    "model_class",
    "representation_size",
    "action_size",
    "difference_targets",
)


# ---- devices -----------------------------------------------------------------------------------
def make_strategy() -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy under a multi-task `srun`, else MirroredStrategy.

    Call before any other TensorFlow op (multi-worker collectives are set up at creation)."""
    if int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
        resolver = _slurm_resolver()
        cluster = resolver.cluster_spec().as_dict()  # also sets task_type and task_id
        logging.info(
            "Multi-worker training: task %s of %s (%s)",
            resolver.task_id,
            os.environ.get("SLURM_STEP_NUM_TASKS"),
            cluster,
        )
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return tf.distribute.MirroredStrategy([d.name for d in gpus])
    return cpu_strategy(len(tf.config.list_logical_devices("CPU")))


def cpu_strategy(num_devices: int) -> tf.distribute.MirroredStrategy:
    """MirroredStrategy over the first `num_devices` logical CPUs (tests without GPUs).

    Reduces through one device: CPU collective ops of several strategies in one process
    can collide on their instance keys."""
    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:num_devices]]
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
    )


def _slurm_resolver():
    """TF's SlurmClusterResolver, without initializing TensorFlow first.

    With GPUs (CUDA_VISIBLE_DEVICES or nvidia-smi) it splits each node's GPUs among the
    node's tasks. Without any, the default raises (gpus_per_node=0, or no nvidia-smi) and it
    checks tasks_per_node * gpus_per_task <= gpus_per_node: CPU-only nodes get one pretend
    GPU per task and auto_set_gpu=False, so CUDA_VISIBLE_DEVICES is left alone."""
    slurm_cluster_resolver = tf.distribute.cluster_resolver.SlurmClusterResolver
    try:
        resolver = slurm_cluster_resolver()
        if resolver.num_accelerators().get("GPU", 0) > 0:
            resolver.cluster_spec()
            return resolver
    except (RuntimeError, ValueError, OSError) as e:
        logging.info("No GPUs for SlurmClusterResolver (%s); using CPUs.", e)
    num_tasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
    return slurm_cluster_resolver(gpus_per_node=num_tasks, gpus_per_task=1, auto_set_gpu=False)


def _is_chief(strategy: tf.distribute.Strategy) -> bool:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in (None, "chief") or (
        resolver.task_type == "worker" and resolver.task_id == 0
    )


# ---- data --------------------------------------------------------------------------------------
def autoregressive_dataset_fn(
    builder,
    sequence_length: int,
    sample_observations: bool = False,
    difference_targets: bool = False,
    shuffle_buffer: int = 256,
) -> Callable[[str], tf.data.Dataset]:
    """`split -> get_autoregressive_slices(...)` with a shuffle buffer over slices."""

    def dataset_fn(split: str) -> tf.data.Dataset:
        ds = builder.get_autoregressive_slices(
            sequence_length,
            split=split,
            sample_observations=sample_observations,
            difference_targets=difference_targets,
            repeat=True,
        )
        return ds.shuffle(shuffle_buffer) if shuffle_buffer > 1 else ds

    return dataset_fn


def check_sizes(model: SequentialModel, representation_size: int, action_size: int, what: str):
    """Fails fast when the data's Z or A differ from the model's."""
    if (model.representation_size, model.action_size) != (representation_size, action_size):
        raise ValueError(
            f"{what} holds representations of size {representation_size} and actions of size "
            f"{action_size}, but model {model.name} expects Z={model.representation_size}, "
            f"A={model.action_size}. Pick a model built for this dataset (e.g. pass "
            "representation_size= to its constructor) or another dataset."
        )


def _check_element_spec(model: SequentialModel, ds: tf.data.Dataset) -> None:
    spec = ds.element_spec
    missing = {"inputs", "targets", "mask"} - set(spec)
    if missing:
        raise ValueError(f"dataset elements lack keys {sorted(missing)}; got {sorted(spec)}.")
    z = spec["targets"].shape[-1]
    a = spec["inputs"].shape[-1] - z
    check_sizes(model, int(z), int(a), "The dataset")


# ---- checkpoints ---------------------------------------------------------------------------------
def checkpoint_path(model_dir: str, step: int) -> str:
    return os.path.join(model_dir, f"model-{step:03d}.weights.h5")


def _optimizer_path(weights_path: str) -> str:
    return weights_path[: -len(".weights.h5")] + ".optimizer.npz"


def list_checkpoints(model_dir: str) -> list[tuple[int, str]]:
    """Complete checkpoints [(step, weights path)], oldest first."""
    found = []
    for path in glob.glob(os.path.join(model_dir, "model-*.weights.h5")):
        m = CHECKPOINT_RE.match(os.path.basename(path))
        if m and os.path.exists(_optimizer_path(path)):
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest_checkpoint(model_dir: str) -> str | None:
    ckpts = list_checkpoints(model_dir)
    return ckpts[-1][1] if ckpts else None


def _save_checkpoint(model, optimizer, model_dir: str, step: int) -> str:
    path = checkpoint_path(model_dir, step)
    opt_values = {f"v{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(optimizer.variables)}
    with sharded_io.atomic_output(_optimizer_path(path)) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, step=np.int64(step), **opt_values)
    # Keras insists on the ".weights.h5" suffix, so the temporary name keeps it.
    tmp = sharded_io.tmp_path_for(path, ".weights.h5")
    try:
        model.save_weights(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def _restore_checkpoint(model, optimizer, weights_path: str) -> int:
    model.load_weights(weights_path)
    with np.load(_optimizer_path(weights_path)) as data:
        step = int(data["step"])
        values = [data[k] for k in sorted(k for k in data.files if k.startswith("v"))]
    if len(values) != len(optimizer.variables):
        raise ValueError(
            f"{_optimizer_path(weights_path)} holds {len(values)} optimizer variables, the "
            f"optimizer has {len(optimizer.variables)}: was it written for another model?"
        )
    for var, value in zip(optimizer.variables, values):
        var.assign(value)
    return step


def _write_model_info(model_dir: str, info: dict) -> None:
    """Writes sequential_model.json, or checks that a resumed run trains the same thing."""
    path = os.path.join(model_dir, MODEL_INFO)
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        diff = {
            k: (old.get(k), v)
            for k, v in info.items()
            if k in _IDENTITY_KEYS and k in old and old.get(k) != v
        }
        if diff:
            raise ValueError(
                f"{model_dir} already holds a run with different settings (existing vs now): "
                f"{diff}. Use another --model_dir, or the same settings to resume."
            )
        return
    sharded_io.write_json_atomic(path, info)


def read_model_info(model_dir: str) -> dict:
    path = os.path.join(model_dir, MODEL_INFO)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist: {model_dir} holds no sequential model.")
    with open(path) as f:
        return json.load(f)


def load_trained_model(
    model_dir: str, model_fn: Callable[[], SequentialModel] | None = None, step: int | None = None
) -> SequentialModel:
    """The model trained in `model_dir` with its weights loaded (latest checkpoint, or the
    one after `step` steps). `model_fn` defaults to the function named in
    sequential_model.json; `difference_targets` is restored from there too."""
    info = read_model_info(model_dir)
    if model_fn is None:
        from rl755.models import catalogue

        model_fn = catalogue.model_fn(info["environment"], info["model"])
    path = checkpoint_path(model_dir, step) if step is not None else latest_checkpoint(model_dir)
    if path is None or not os.path.exists(path):
        raise FileNotFoundError(f"No complete checkpoint in {model_dir} (step={step}).")
    model = model_fn()
    model.difference_targets = bool(info.get("difference_targets", False))
    model.ensure_built()
    model.load_weights(path)
    return model


# ---- training ------------------------------------------------------------------------------------
def _nonfinite_message(step: int, terms: dict, loss: float, model_dir: str) -> str:
    bad = [k for k, v in terms.items() if not math.isfinite(v)]
    last = latest_checkpoint(model_dir)
    return (
        f"Non-finite loss at training step {step}: loss term(s) {', '.join(bad) or 'total'} "
        f"not finite ({', '.join(f'{k}={v:.6g}' for k, v in terms.items())}; total {loss}). Training "
        f"stopped; the last good checkpoint is {last or 'none'}. Rerun with --check_numerics "
        "(tf.debugging.enable_check_numerics) to stop at the first operation that produces "
        "a NaN/Inf, and check the data (NaN/Inf in the encoded rollouts) and the learning rate."
    )


def train_sequential_model(
    model_fn: Callable[[], SequentialModel],
    dataset_fn: Callable[[str], tf.data.Dataset],
    model_dir: str,
    train_steps: int,
    batch_size: int,
    learning_rate: float,
    save_every_n_steps: int = 1000,
    validation_steps: int = 10,
    difference_targets: bool = False,
    check_numerics: bool = False,
    log_every_n_steps: int | None = None,
    seed: int = 0,
    strategy: tf.distribute.Strategy | None = None,
    model_info: dict | None = None,
) -> dict:
    """Trains until `train_steps` steps in total (resuming from model_dir's latest checkpoint).

    Returns {"start_step", "step", "replicas", "train_losses": [per-step loss of this run],
    "step_seconds": [wall time of each step],
    "last_terms": {term: value}, "validation": {term: value} (last), "checkpoint": path}.
    Raises NonFiniteLossError at the first non-finite loss."""
    for name, value in dict(
        train_steps=train_steps, batch_size=batch_size, save_every_n_steps=save_every_n_steps
    ).items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be > 0, got {learning_rate}.")
    if check_numerics:
        tf.debugging.enable_check_numerics()
    strategy = strategy or make_strategy()
    replicas = strategy.num_replicas_in_sync
    if batch_size % replicas:
        raise ValueError(
            f"batch_size {batch_size} must be divisible by the number of replicas ({replicas})."
        )
    chief = _is_chief(strategy)
    log_every = log_every_n_steps or max(1, min(100, save_every_n_steps))
    os.makedirs(model_dir, exist_ok=True)

    with strategy.scope():
        model = model_fn()
        if not isinstance(model, SequentialModel):
            raise TypeError(f"model_fn returned {type(model).__name__}, not a SequentialModel.")
        model.difference_targets = bool(difference_targets)
        model.ensure_built()
        optimizer = keras.optimizers.Adam(learning_rate)
        optimizer.build(model.trainable_variables)

    info = dict(model_info or {})
    info.update(
        model_class=type(model).__name__,
        representation_size=model.representation_size,
        action_size=model.action_size,
        difference_targets=bool(difference_targets),
    )
    if chief:
        _write_model_info(model_dir, info)

    start_step = 0
    last = latest_checkpoint(model_dir)
    if last is not None:
        with strategy.scope():
            start_step = _restore_checkpoint(model, optimizer, last)
        logging.info("Resuming from %s (step %d).", last, start_step)
    if start_step >= train_steps:
        logging.info("Already trained for %d >= %d steps; nothing to do.", start_step, train_steps)
        return {
            "start_step": start_step,
            "step": start_step,
            "train_losses": [],
            "last_terms": {},
            "validation": {},
            "checkpoint": last,
        }

    # Reseed per resume so a resumed run does not replay the same data order.
    tf.random.set_seed(seed + start_step)
    train_ds = dataset_fn("train")
    _check_element_spec(model, train_ds)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    train_ds = train_ds.batch(batch_size, drop_remainder=True).with_options(options)
    train_iter = iter(strategy.experimental_distribute_dataset(train_ds.prefetch(2)))
    val_iter = None
    if validation_steps > 0:
        try:
            val_ds = dataset_fn("validation")
        except FileNotFoundError as e:
            raise FileNotFoundError(
                f"{e} Or pass --validation_steps=0 to train without validation."
            ) from e
        val_ds = val_ds.batch(batch_size, drop_remainder=True)
        val_iter = iter(strategy.experimental_distribute_dataset(val_ds.with_options(options)))

    def replica_losses(batch, training):
        preds = model(batch["inputs"], mask=batch["mask"], training=training)
        sums, counts = model.loss_sums(batch, preds)
        counts = tf.distribute.get_replica_context().all_reduce("sum", counts)
        terms = {k: sums[k] / tf.maximum(counts[k], 1.0) for k in sums}
        return model.combine_loss_terms(terms), terms

    def train_replica(batch):
        with tf.GradientTape() as tape:
            loss, terms = replica_losses(batch, True)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss, terms

    def reduce(per_replica):
        return tf.nest.map_structure(
            lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), per_replica
        )

    @tf.function
    def train_step(iterator):
        return reduce(strategy.run(train_replica, args=(next(iterator),)))

    @tf.function
    def val_step(iterator):
        return reduce(strategy.run(lambda b: replica_losses(b, False), args=(next(iterator),)))

    if chief:
        train_writer = tf.summary.create_file_writer(os.path.join(model_dir, "train"))
        val_writer = tf.summary.create_file_writer(os.path.join(model_dir, "validation"))
    else:
        train_writer = val_writer = tf.summary.create_noop_writer()

    result = {"start_step": start_step, "train_losses": [], "validation": {}, "checkpoint": last}
    result["replicas"] = replicas
    acc_terms: dict[str, float] = {}
    acc_n, t_log = 0, time.perf_counter()
    step = start_step
    result["step_seconds"] = []
    while step < train_steps:
        t_step = time.perf_counter()
        loss, terms = train_step(train_iter)
        step += 1
        loss = float(loss)
        terms = {k: float(v) for k, v in terms.items()}
        if not math.isfinite(loss) or not all(math.isfinite(v) for v in terms.values()):
            raise NonFiniteLossError(_nonfinite_message(step, terms, loss, model_dir))
        result["train_losses"].append(loss)
        result["step_seconds"].append(time.perf_counter() - t_step)
        result["last_terms"] = terms
        for k, v in {"loss": loss, **terms}.items():
            acc_terms[k] = acc_terms.get(k, 0.0) + v
        acc_n += 1
        if step % log_every == 0 or step == train_steps:
            elapsed = time.perf_counter() - t_log
            with train_writer.as_default(step=step):
                for k, v in acc_terms.items():
                    tf.summary.scalar(k if k == "loss" else f"loss_terms/{k}", v / acc_n)
                tf.summary.scalar("sequences_per_second", acc_n * batch_size / elapsed)
            logging.info(
                "step %d/%d  loss %.5f  (%.1f sequences/s)",
                step,
                train_steps,
                acc_terms["loss"] / acc_n,
                acc_n * batch_size / elapsed,
            )
            acc_terms, acc_n, t_log = {}, 0, time.perf_counter()
        if step % save_every_n_steps == 0 or step == train_steps:
            if val_iter is not None:
                result["validation"] = _validate(val_step, val_iter, validation_steps)
                with val_writer.as_default(step=step):
                    for k, v in result["validation"].items():
                        tf.summary.scalar(k if k == "loss" else f"loss_terms/{k}", v)
                logging.info("step %d  validation loss %.5f", step, result["validation"]["loss"])
            if chief:
                result["checkpoint"] = _save_checkpoint(model, optimizer, model_dir, step)
                logging.info("Saved %s", result["checkpoint"])
            t_log = time.perf_counter()
    train_writer.flush()
    val_writer.flush()
    result["step"] = step
    return result


def _validate(val_step, val_iter, validation_steps: int) -> dict:
    total: dict[str, float] = {}
    for _ in range(validation_steps):
        loss, terms = val_step(val_iter)
        for k, v in {"loss": float(loss), **{k: float(v) for k, v in terms.items()}}.items():
            total[k] = total.get(k, 0.0) + v
    return {k: v / validation_steps for k, v in total.items()}


def train_from_names(
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
    flags: dict | None = None,
) -> dict:
    """What scripts/models/train_sequential_model.py runs: resolves the names strictly,
    checks that the dataset's Z and A match the model's (before any training), records the
    run in `<model_dir>/runs/` and calls `train_sequential_model`.

    `model` resolves through rl755.models.catalogue (sized by the environment's presets),
    `rollouts_dataset` through rl755.data.registry (an EncodedRolloutDatasetBuilder class),
    constructed with `tfrecords_pattern=rollouts_pattern` when given (a glob with "{split}")."""
    from rl755.common import run_record, tf_setup
    from rl755.data import registry
    from rl755.data.common.rollout_datasets import EncodedRolloutDatasetBuilder
    from rl755.environments import Environments
    from rl755.models import catalogue

    tf_setup.limit_threads(num_threads)
    # First: a multi-worker strategy must be created before TensorFlow initializes.
    strategy = make_strategy()
    env = Environments.from_name(environment)
    model_fn = catalogue.model_fn(env, model, kind=catalogue.SEQUENTIAL)
    dataset_cls = registry.encoded_rollouts_class(env, rollouts_dataset)
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
    check_sizes(
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
    with run_record.record_run(model_dir, flags or {}, stage="train_sequential_model"):
        return train_sequential_model(
            model_fn=model_fn,
            dataset_fn=autoregressive_dataset_fn(
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
        )
