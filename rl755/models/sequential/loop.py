"""The training loop of sequential models (stage 4), on one or many devices.

    from rl755.models.sequential import data, loop
    loop.fit_sequential_model(
        model_fn=catalogue.model_fn("FAKE_PIXELS", "lstm.deterministic_lstm"),  # () -> model
        dataset_fn=data.autoregressive_dataset_fn(builder, sequence_length=32),
        model_dir="/tmp/lstm", train_steps=1000, batch_size=64, learning_rate=1e-3)

Each batch trains `task` (rl755.models.sequential.tasks); rerunning with the same model_dir
resumes exactly (rl755.models.sequential.resume): every checkpoint segment (save_every_n_steps
steps) starts with `determinism.reseed_segment(seed, step)` and new train and validation
iterators, and the step means logged to TensorBoard restart there too. The steps, devices and batch parts are in
rl755.models.sequential.loss and .sharding, the optimizer in .schedule; docs/architecture.md
describes the model_dir layout. Only the chief worker writes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import tensorflow as tf
from absl import logging

from rl755.common import checkpoints, determinism, devices
from rl755.common.errors import NonFiniteLossError
from rl755.common.tensorboard import StepMeans, TrainingLogs
from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential import data, loss, resume, schedule, sharding, tasks
from rl755.models.sequential.results import TrainingResult

NONFINITE_ADVICE = "check the data (NaN/Inf in the encoded rollouts) and the learning rate"


def _loss_keys(values: dict) -> dict:
    """{"loss": total, term: value} -> {"losses/total": ..., "losses/<term>": ...}."""
    return {f"losses/{'total' if k == 'loss' else k}": v for k, v in values.items()}


def fit_sequential_model(
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
    hparams: dict | None = None,
    task: str | tasks.TrainingTask = tasks.AUTOREGRESSIVE,
    jit_compile: bool | None = None,
    initial_weights: str | None = None,
    learning_rate_decay: float = 1.0,
    min_learning_rate: float = 0.0,
    clip_norm: float = 0.0,
    batch_shards: int | None = None,
    keep_checkpoints: int = checkpoints.KEEP_CHECKPOINTS,
) -> TrainingResult:
    """Trains until `train_steps` steps in total (resuming from model_dir's newest checkpoint).

    `initial_weights`: a sequential model's dir (a training run's model_dir, or a shipped
    folder rl755/zoo/shipped/<env>/<name>) whose newest complete checkpoint's weights a new
    run starts from, at step 0 with a new optimizer (a warm start). A run that resumes from
    its own checkpoint ignores it.

    `model_info` goes into every checkpoint's marker (what was trained); `hparams` (the run's
    flags, default: the arguments) into TensorBoard. `jit_compile`: compile each replica's
    loss and gradients with XLA (None: when the model says it gains, `model.xla_training`).
    `learning_rate_decay`, `min_learning_rate`: rl755.models.sequential.schedule; `clip_norm`:
    the global norm the replicas' summed gradient is clipped to (0: none). `batch_shards`: parts
    of each replica's batch run in parallel (None: `sharding.choose_batch_shards`).
    `keep_checkpoints`: the newest checkpoints kept, besides the one of the lowest validation
    loss (rl755.common.checkpoints).
    Returns a `TrainingResult` (rl755.models.sequential.results). Raises NonFiniteLossError at the first non-finite loss.
    """
    for name, value in dict(
        train_steps=train_steps,
        batch_size=batch_size,
        save_every_n_steps=save_every_n_steps,
        keep_checkpoints=keep_checkpoints,
    ).items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
    schedule.check_optimizer_flags(learning_rate, learning_rate_decay, min_learning_rate, clip_norm)
    if isinstance(task, str):
        task = tasks.resolve_task(task, seed=seed)
    if check_numerics:
        tf.debugging.enable_check_numerics()
    strategy = strategy or devices.make_strategy()
    replicas = strategy.num_replicas_in_sync
    if batch_size % replicas:
        raise ValueError(
            f"batch_size {batch_size} must be divisible by the number of replicas ({replicas})."
        )
    chief = devices.is_chief(strategy)
    log_every = log_every_n_steps or max(1, min(100, save_every_n_steps))
    model, optimizer, info, last = resume.start(
        strategy,
        model_fn,
        model_dir,
        task,
        model_info,
        difference_targets,
        learning_rate,
        learning_rate_decay,
        min_learning_rate,
        initial_weights,
    )
    start_step = last.step if last is not None else 0
    last_path = last.weights_path if last else None
    if start_step >= train_steps:
        logging.info("Already trained for %d >= %d steps; nothing to do.", start_step, train_steps)
        return TrainingResult(
            start_step=start_step,
            step=start_step,
            train_losses=[],
            validation={},
            checkpoint=last_path,
        )

    determinism.reseed_segment(seed, start_step, model)
    train_iter, val_iter = data.distributed_batches(
        strategy, dataset_fn, model, batch_size, validation_steps
    )
    if jit_compile is None:
        jit_compile = bool(getattr(model, "xla_training", False))
    shards = sharding.choose_batch_shards(
        batch_shards, batch_size // replicas, jit_compile, task, replicas
    )
    info["batch_shards"] = shards  # (in each marker: the parts sum in their own order)
    parts = f"; each batch of {batch_size // replicas} in {shards} parts run in parallel"
    logging.info(
        "Loss and gradients compiled with XLA: %s%s.", jit_compile, parts if shards > 1 else ""
    )
    logging.info(
        schedule.describe(
            learning_rate, learning_rate_decay, min_learning_rate, clip_norm, start_step
        )
    )
    train_step, val_step = loss.make_steps(
        model, optimizer, strategy, task, jit_compile, shards, clip_norm
    )

    logs = TrainingLogs(model_dir, enabled=chief)
    if hparams is None:
        hparams = dict(
            info, train_steps=train_steps, batch_size=batch_size, learning_rate=learning_rate
        )
    logs.hparams(hparams, step=start_step)
    result = {"start_step": start_step, "train_losses": [], "validation": {}}
    if clip_norm:
        result["gradient_norms"] = []
    result.update(checkpoint=last_path, replicas=replicas, batch_shards=shards, step_seconds=[])
    number = last.number if last is not None else 0
    window = StepMeans(batch_size, "sequences")
    step = start_step
    try:
        while step < train_steps:
            if step != start_step and step % save_every_n_steps == 0:
                # A segment's data is a function of (seed, step): see the module docstring.
                determinism.reseed_segment(seed, step, model)
                train_iter, val_iter = data.distributed_batches(
                    strategy, dataset_fn, model, batch_size, validation_steps
                )
            t_step = time.perf_counter()
            loss_value, terms = train_step(train_iter)
            step += 1
            loss_value = float(loss_value)
            terms = {k: float(v) for k, v in terms.items()}
            norm = {loss.GRADIENT_NORM: terms.pop(loss.GRADIENT_NORM)} if clip_norm else {}
            if clip_norm:
                result["gradient_norms"].append(norm[loss.GRADIENT_NORM])
            if not math.isfinite(loss_value) or not all(math.isfinite(v) for v in terms.values()):
                last = checkpoints.newest_complete_checkpoint(model_dir)
                raise NonFiniteLossError.at_step(
                    step, terms, last and last.weights_path, NONFINITE_ADVICE, total=loss_value
                )
            result["train_losses"].append(loss_value)
            result["step_seconds"].append(time.perf_counter() - t_step)
            result["last_terms"] = terms
            window.add({"loss": loss_value, **terms, **norm})
            if step % log_every == 0 or step % save_every_n_steps == 0 or step == train_steps:
                means, perf = window.take()
                extra = {"optimizer/learning_rate": float(optimizer.learning_rate)}
                if clip_norm:  # (the mean since the last log, as the losses')
                    extra["optimizer/gradient_norm"] = means.pop(loss.GRADIENT_NORM)
                logs.scalars("train", step, {**_loss_keys(means), **perf, **extra})
                logging.info(
                    "step %d/%d  loss %.5f  (%.1f sequences/s)",
                    step,
                    train_steps,
                    means["loss"],
                    perf["perf/sequences_per_second"],
                )
            if step % save_every_n_steps == 0 or step == train_steps:
                if val_iter is not None:
                    result["validation"] = _validate(val_step, val_iter, validation_steps)
                    logs.scalars("validation", step, _loss_keys(result["validation"]))
                    logging.info(
                        "step %d  validation loss %.5f", step, result["validation"]["loss"]
                    )
                if chief:
                    number += 1
                    val_loss = result["validation"].get("loss")
                    best = checkpoints.is_new_best(model_dir, "validation_loss", val_loss)
                    ckpt = checkpoints.save_checkpoint(
                        model_dir,
                        number,
                        model,
                        dict(
                            info,
                            step=step,
                            train_loss=loss_value,
                            validation_loss=val_loss,
                            **{checkpoints.BEST: best},
                        ),
                        optimizer=optimizer,
                    )
                    checkpoints.remove_older_checkpoints(model_dir, keep_checkpoints)
                    result["checkpoint"] = ckpt.weights_path
                    logging.info("Saved %s (step %d)", ckpt.weights_path, step)
                window.restart_clock()
    finally:
        logs.close()
    result["step"] = step
    result["learning_rate"] = float(optimizer.learning_rate)
    return TrainingResult(**result)


def _validate(val_step, val_iter, validation_steps: int) -> dict:
    total: dict[str, float] = {}
    for _ in range(validation_steps):
        loss_value, terms = val_step(val_iter)
        for k, v in {"loss": float(loss_value), **{k: float(v) for k, v in terms.items()}}.items():
            total[k] = total.get(k, 0.0) + v
    return {k: v / validation_steps for k, v in total.items()}
