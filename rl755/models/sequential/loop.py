"""The training loop of sequential models (stage 4), on one or many devices.

    from rl755.models.sequential import loop
    loop.fit_sequential_model(
        model_fn=catalogue.model_fn("FAKE_PIXELS", "lstm.deterministic_lstm"),  # () -> model
        dataset_fn=loop.autoregressive_dataset_fn(builder, sequence_length=32),
        model_dir="/tmp/lstm", train_steps=1000, batch_size=64, learning_rate=1e-3)

`dataset_fn(split)` returns unbatched slice dicts as from
`EncodedRolloutDatasetBuilder.get_autoregressive_slices` ("inputs" [L, Z + A], "targets"
[L, Z], "rewards", "dones", "mask", "target_mask" [L], and "rollout_id" [] for models that
need it), repeating.

`task` (rl755.models.sequential.tasks: "autoregressive", "infill", "mixed") says what a
batch trains; each batch's loss is `model.task_loss_sums(batch, task, step)`, its masks seeded
by the optimizer's step counter, so resuming draws the same ones. The task may change between
runs in one model_dir (e.g. infilling pretraining, then autoregressive training). Before the
first step the model loads what stage 4 built beside its weights (`model.load_extras`).

Devices (`rl755.common.devices.make_strategy`): every visible GPU, or every `srun` task.
`batch_size` is the global batch, split across replicas; the loss is the masked mean over
the whole global batch (counts are summed across replicas), so N devices compute the same
loss and gradients as one.

On CPUs, each replica's batch runs in `batch_shards` parts (default: one per core the
TensorFlow runtime may use, when the loss is compiled with XLA and the task is
autoregressive): each part goes through its own compiled call of the model's loss, and
TensorFlow's executor runs independent calls on separate cores, where one compiled LSTM
keeps one core busy and leaves the other idle. The parts' loss sums and counts are added
before the division, so the loss and gradients are the same computation as one whole batch's
(equal to float rounding, tested). With XLA the gradients are taken inside the compiled call
too (each part's share of the loss over the global counts: the loss is linear in the parts'
sums). Its speed against one whole-batch call: docs/benchmarks.md. `batch_shards=1` keeps
one call.

Optimizer: Adam at `learning_rate`, by default constant. World Models' MDN-RNN settings are
`learning_rate_decay=0.99999, min_learning_rate=1e-5, clip_norm=1.0`: the rate of the update
at step s (from 0) is max(min_learning_rate, learning_rate x learning_rate_decay^s), a function
of the optimizer's step counter, so a resumed run goes on where it stopped (with the rate its
own flags give: a run may resume with another rate); `clip_norm` > 0
scales the whole gradient down to that global norm when it is longer (the replicas' sum is
clipped, not each replica's part, so N devices still step as one). TensorBoard plots the rate
(optimizer/learning_rate) and, with clipping, the gradient's norm before it
(optimizer/gradient_norm).

`model_dir` layout (rerunning with the same model_dir resumes exactly):
    model-001.json, model-001.weights.h5, model-001.optimizer.npz
                         a checkpoint (rl755.common.checkpoints) every save_every_n_steps:
                         weights, optimizer state; the marker holds the step, what was trained
                         (environment, model, dataset, Z, A, difference_targets, task) and the
                         losses
    tensorboard/{train,validation}/    losses/{total,<term>}, perf/{steps,sequences}_per_second,
                         optimizer/{learning_rate,gradient_norm},
                         the run's flags (rl755.common.tensorboard)
Only the chief worker writes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

import keras
import tensorflow as tf
from absl import logging

from rl755.common import checkpoints, devices
from rl755.common.errors import NonFiniteLossError
from rl755.common.tensorboard import StepMeans, TrainingLogs
from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential import tasks
from rl755.models.sequential.results import TrainingResult

GRADIENT_NORM = "_gradient_norm"  # (carried beside the loss terms out of the replicas)

#: Automatic batch shards: at most this many, of at least this many sequences each.
MAX_AUTO_SHARDS = 8
MIN_SHARD_SEQUENCES = 4

# What a resumed run must share with the run that made the checkpoints (the dataset, sequence
# length and observation sampling may change, e.g. for a curriculum).
IDENTITY_KEYS = (
    "environment",
    "model",
    "model_class",
    "representation_size",
    "action_size",
    "difference_targets",
)
OLD_FORMAT_FILE = "sequential_model.json"  # written by the trainer before the common format


# ---- data --------------------------------------------------------------------------------------
def autoregressive_dataset_fn(
    builder,
    sequence_length: int,
    sample_observations: bool = False,
    difference_targets: bool = False,
    shuffle_buffer: int = 256,
    slice_start: str = "uniform",
    rollout_ids: bool = False,
) -> Callable[[str], tf.data.Dataset]:
    """`split -> get_autoregressive_slices(...)` with a shuffle buffer over slices."""

    def dataset_fn(split: str) -> tf.data.Dataset:
        ds = builder.get_autoregressive_slices(
            sequence_length,
            split=split,
            sample_observations=sample_observations,
            difference_targets=difference_targets,
            repeat=True,
            slice_start=slice_start,
            rollout_ids=rollout_ids,
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


def _refuse_old_format(model_dir: str) -> None:
    if os.path.exists(os.path.join(model_dir, OLD_FORMAT_FILE)):
        raise ValueError(
            f"{model_dir} holds checkpoints of the old format ({OLD_FORMAT_FILE}, "
            "model-<step>.optimizer.npz), which this version does not resume (load_trained_model "
            "still loads them). Train into another --model_dir."
        )


# ---- training ------------------------------------------------------------------------------------
NONFINITE_ADVICE = "check the data (NaN/Inf in the encoded rollouts) and the learning rate"


def _loss_keys(values: dict) -> dict:
    """{"loss": total, term: value} -> {"losses/total": ..., "losses/<term>": ...}."""
    return {f"losses/{'total' if k == 'loss' else k}": v for k, v in values.items()}


class DecayingLearningRate(keras.optimizers.schedules.LearningRateSchedule):
    """max(minimum, initial x decay^step): step 0 (the first update) uses `initial`."""

    def __init__(self, initial: float, decay: float, minimum: float = 0.0):
        self.initial, self.decay, self.minimum = float(initial), float(decay), float(minimum)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        return tf.maximum(self.minimum, self.initial * tf.pow(self.decay, step))

    def get_config(self):
        return dict(initial=self.initial, decay=self.decay, minimum=self.minimum)


def learning_rate_at(step: int, learning_rate: float, decay: float = 1.0, minimum: float = 0.0):
    """Adam's rate for the update at `step` (0 = the first), as `fit_sequential_model` sets it."""
    return max(minimum, learning_rate * decay**step)


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
) -> TrainingResult:
    """Trains until `train_steps` steps in total (resuming from model_dir's newest checkpoint).

    `initial_weights`: a sequential model's dir (a training run's model_dir, or a shipped
    folder rl755/zoo/shipped/<env>/<name>) whose newest complete checkpoint's weights a new
    run starts from, at step 0 with a new optimizer (a warm start, e.g. to go on training a
    shipped model on a new machine). A run that resumes from its own checkpoint ignores it.

    `model_info` goes into every checkpoint's marker (what was trained); `hparams` (the run's
    flags, default: the arguments) into TensorBoard. `jit_compile`: compile each replica's
    loss and gradients with XLA (None: when the model says it gains, `model.xla_training`).
    `learning_rate_decay`, `min_learning_rate`, `clip_norm`: the module docstring's optimizer
    (defaults: a constant rate, no clipping). `batch_shards`: parts of each replica's batch
    run in parallel (module docstring; None: `choose_batch_shards`).
    Returns a `TrainingResult` (rl755.models.sequential.results).
    Raises NonFiniteLossError at the first non-finite loss."""
    for name, value in dict(
        train_steps=train_steps, batch_size=batch_size, save_every_n_steps=save_every_n_steps
    ).items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be > 0, got {learning_rate}.")
    if not 0 < learning_rate_decay <= 1:
        raise ValueError(
            f"learning_rate_decay must be in (0, 1] (1: a constant rate), got {learning_rate_decay}."
        )
    if not 0 <= min_learning_rate <= learning_rate:
        raise ValueError(
            f"min_learning_rate must be in [0, learning_rate={learning_rate}], got "
            f"{min_learning_rate}."
        )
    if not clip_norm >= 0:
        raise ValueError(f"clip_norm must be >= 0 (0: no clipping), got {clip_norm}.")
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
    _refuse_old_format(model_dir)
    os.makedirs(model_dir, exist_ok=True)

    with strategy.scope():
        model = model_fn()
        if not isinstance(model, SequentialModel):
            raise TypeError(f"model_fn returned {type(model).__name__}, not a SequentialModel.")
        model.difference_targets = bool(difference_targets)
        tasks.check_model_trains_on(model, task)
        model.load_extras(model_dir)
        model.ensure_built()
        # (a schedule, also for a constant rate: the rate is this run's flags, never a value
        # saved in the checkpoint it resumes)
        rate = DecayingLearningRate(learning_rate, learning_rate_decay, min_learning_rate)
        optimizer = keras.optimizers.Adam(rate)
        optimizer.build(model.trainable_variables)

    info = dict(model_info or {})
    info.update(
        model_class=type(model).__name__,
        representation_size=model.representation_size,
        action_size=model.action_size,
        difference_targets=bool(difference_targets),
        task=task.name,
    )
    last = checkpoints.newest_complete_checkpoint(model_dir)
    checkpoints.check_same_run(last, info, IDENTITY_KEYS, model_dir)
    start_step = 0
    if last is not None:
        with strategy.scope():
            model.load_weights(last.weights_path)
            checkpoints.restore_optimizer(optimizer, last)
        start_step = last.step
        logging.info("Resuming from %s (step %d).", last.weights_path, start_step)
        if "initial_weights" in last.info:  # (later markers keep saying where it started)
            info["initial_weights"] = last.info["initial_weights"]
        if initial_weights:
            logging.info("--initial_weights is not used: %s holds a checkpoint.", model_dir)
    elif initial_weights:
        info["initial_weights"] = _load_initial_weights(model, initial_weights, info, strategy)
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

    if jit_compile is None:
        jit_compile = bool(getattr(model, "xla_training", False))
    shards = choose_batch_shards(batch_shards, batch_size // replicas, jit_compile, task, replicas)
    info["batch_shards"] = shards  # (in each marker: the parts sum in their own order)
    logging.info(
        "Loss and gradients compiled with XLA: %s%s.",
        jit_compile,
        (
            f"; each batch of {batch_size // replicas} in {shards} parts run in parallel"
            if shards > 1
            else ""
        ),
    )
    now = learning_rate_at(start_step, learning_rate, learning_rate_decay, min_learning_rate)
    logging.info(
        "Adam: learning rate %g%s%s.",
        learning_rate,
        (
            f" x {learning_rate_decay:g} a step down to {min_learning_rate:g} (now {now:g})"
            if learning_rate_decay != 1.0
            else " (constant)"
        ),
        f", gradients clipped to global norm {clip_norm:g}" if clip_norm else "",
    )

    def loss_sums(batch, step, training):
        return model.task_loss_sums(batch, task, step, training=training)

    def global_counts(counts):
        return tf.distribute.get_replica_context().all_reduce("sum", counts)

    def mean_terms(sums, counts):
        return {k: sums[k] / tf.maximum(counts[k], 1.0) for k in sums}

    def nonzero(grads):
        # A head the task does not use (an infilling head in autoregressive training) has no
        # gradient: it gets a zero one (a head never trained stays as it is).
        return [
            tf.zeros_like(v) if g is None else g for g, v in zip(grads, model.trainable_variables)
        ]

    if jit_compile:
        # The model's part only: the cross-replica sums and the optimizer stay outside XLA.
        uncompiled_loss_sums = loss_sums
        loss_sums = tf.function(loss_sums, jit_compile=True)

        @tf.function(jit_compile=True)
        def batch_counts(batch, step):
            # The counts depend on the masks alone: XLA drops the model from this call.
            return uncompiled_loss_sums(batch, step, True)[1]

        @tf.function(jit_compile=True)
        def part_gradients(part, step, counts):
            """A part's loss sums and the gradient of its share of the loss: the loss is
            linear in the sums (the weighted sum of term means, over the global counts), so
            the parts' shares and their gradients add up to the whole batch's."""
            with tf.GradientTape() as tape:
                sums, _ = uncompiled_loss_sums(part, step, True)
                share = model.combine_loss_terms(mean_terms(sums, counts))
            return sums, nonzero(tape.gradient(share, model.trainable_variables))

    def replica_losses(batch, training):
        step = tf.convert_to_tensor(optimizer.iterations)
        sums, counts = loss_sums(batch, step, training)
        terms = mean_terms(sums, global_counts(counts))
        return model.combine_loss_terms(terms), terms

    def replica_gradients(batch):
        """(loss, terms, gradients) of this replica's batch."""
        if not jit_compile:
            with tf.GradientTape() as tape:
                loss, terms = replica_losses(batch, True)
            return loss, terms, nonzero(tape.gradient(loss, model.trainable_variables))
        # Loss and gradients in XLA, the batch in `shards` independent calls, which
        # TensorFlow's executor runs on separate cores.
        step = tf.convert_to_tensor(optimizer.iterations)
        counts = global_counts(batch_counts(batch, step))
        parts = split_batch(batch, shards) if shards > 1 else [batch]
        outs = [part_gradients(part, step, counts) for part in parts]
        sums = {k: tf.add_n([o[0][k] for o in outs]) for k in outs[0][0]}
        grads = [tf.add_n([o[1][i] for o in outs]) for i in range(len(outs[0][1]))]
        terms = mean_terms(sums, counts)
        return model.combine_loss_terms(terms), terms, grads

    def train_replica(batch):
        loss, terms, grads = replica_gradients(batch)
        if clip_norm:
            # Clip the whole gradient (the replicas' sum); the optimizer then sums the
            # replicas' shares again, so each passes 1/N of the clipped sum.
            total = tf.distribute.get_replica_context().all_reduce("sum", grads)
            clipped, norm = tf.clip_by_global_norm(total, clip_norm)
            grads = [g / replicas for g in clipped]
            terms = {**terms, GRADIENT_NORM: norm / replicas}  # (reduce sums the replicas')
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
            t_step = time.perf_counter()
            loss, terms = train_step(train_iter)
            step += 1
            loss = float(loss)
            terms = {k: float(v) for k, v in terms.items()}
            norm = {GRADIENT_NORM: terms.pop(GRADIENT_NORM)} if clip_norm else {}
            if clip_norm:
                result["gradient_norms"].append(norm[GRADIENT_NORM])
            if not math.isfinite(loss) or not all(math.isfinite(v) for v in terms.values()):
                last = checkpoints.newest_complete_checkpoint(model_dir)
                raise NonFiniteLossError.at_step(
                    step, terms, last and last.weights_path, NONFINITE_ADVICE, total=loss
                )
            result["train_losses"].append(loss)
            result["step_seconds"].append(time.perf_counter() - t_step)
            result["last_terms"] = terms
            window.add({"loss": loss, **terms, **norm})
            if step % log_every == 0 or step == train_steps:
                means, perf = window.take()
                extra = {"optimizer/learning_rate": float(optimizer.learning_rate)}
                if clip_norm:  # (the mean since the last log, as the losses')
                    extra["optimizer/gradient_norm"] = means.pop(GRADIENT_NORM)
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
                    ckpt = checkpoints.save_checkpoint(
                        model_dir,
                        number,
                        model,
                        dict(
                            info,
                            step=step,
                            train_loss=loss,
                            validation_loss=result["validation"].get("loss"),
                        ),
                        optimizer=optimizer,
                    )
                    result["checkpoint"] = ckpt.weights_path
                    logging.info("Saved %s (step %d)", ckpt.weights_path, step)
                window.restart_clock()
    finally:
        logs.close()
    result["step"] = step
    result["learning_rate"] = float(optimizer.learning_rate)
    return TrainingResult(**result)


def usable_cores() -> int:
    """CPU cores this process may run on (SLURM's and taskset's limits included)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def choose_batch_shards(
    requested: int | None,
    replica_batch: int,
    compiled: bool,
    task: tasks.TrainingTask,
    replicas: int = 1,
    threads: int | None = None,
) -> int:
    """How many parts each replica's batch of `replica_batch` runs in (module docstring).

    `requested` (an int) is checked: a divisor of the replica's batch, and 1 unless the task is
    autoregressive (an infilling task draws its masks per batch, so equal parts would share
    them). None: 1 without XLA (`compiled`; on GPUs cuDNN's LSTM runs whole batches) or for
    other tasks; else the largest divisor of the batch up to the threads TensorFlow's executor
    runs at once (`threads`, default its inter-op pool: one per usable core unless set) shared
    by the `replicas` of this process, `MAX_AUTO_SHARDS`, and `MIN_SHARD_SEQUENCES` sequences a
    part."""
    if requested is not None:
        requested = int(requested)
        if requested < 1 or replica_batch % requested:
            raise ValueError(
                f"batch_shards={requested} must be a positive divisor of each replica's batch "
                f"({replica_batch}). Pass another value, or leave it unset to choose by cores."
            )
        if requested > 1 and task.name != tasks.AUTOREGRESSIVE:
            raise ValueError(
                f"batch_shards={requested} splits autoregressive batches only; task "
                f"{task.name!r} draws its masks per batch. Leave it unset or pass 1."
            )
        return requested
    if not compiled or task.name != tasks.AUTOREGRESSIVE:
        return 1
    if threads is None:
        threads = tf.config.threading.get_inter_op_parallelism_threads() or usable_cores()
    cap = min(threads // max(1, replicas), MAX_AUTO_SHARDS, replica_batch // MIN_SHARD_SEQUENCES)
    return max(d for d in range(1, max(cap, 1) + 1) if replica_batch % d == 0)


def split_batch(batch, shards: int) -> list:
    """A batch (a nest of [B, ...] tensors) -> `shards` nests of [B / shards, ...] slices, in
    order."""
    flat = tf.nest.flatten(batch)
    pieces = [tf.split(t, shards, axis=0) for t in flat]
    return [tf.nest.pack_sequence_as(batch, [p[i] for p in pieces]) for i in range(shards)]


def _load_initial_weights(model, path: str, info: dict, strategy) -> str:
    """Loads the newest complete checkpoint of `path` into `model` (a warm start); checks
    that it holds the same model (catalogue name and class), Z and A, and that the weights'
    shapes fit (naming the file). Returns the checkpoint's weights path."""
    path = os.path.expanduser(str(path))
    init = checkpoints.newest_complete_checkpoint(path) if os.path.isdir(path) else None
    if init is None:
        raise FileNotFoundError(
            f"--initial_weights={path}: no complete checkpoint there (model-NNN.json + "
            "model-NNN.weights.h5). Give a train_sequential_model.py --model_dir or a shipped "
            "folder, e.g. rl755/zoo/shipped/<env>/<name>."
        )
    for key in ("model", "model_class", "representation_size", "action_size"):
        if key in init.info and key in info and init.info[key] != info[key]:
            raise ValueError(
                f"--initial_weights: {checkpoints.marker_name(init.number)} in {path} has "
                f"{key}={init.info[key]!r}, this run trains {key}={info[key]!r}: start from "
                "the same model."
            )
    with strategy.scope():
        checkpoints.load_weights_checked(model, init.weights_path)
    logging.info(
        "Starting from the weights of %s (its step %d); step 0 here, a new optimizer.",
        init.weights_path,
        init.step,
    )
    return os.path.abspath(init.weights_path)


def _validate(val_step, val_iter, validation_steps: int) -> dict:
    total: dict[str, float] = {}
    for _ in range(validation_steps):
        loss, terms = val_step(val_iter)
        for k, v in {"loss": float(loss), **{k: float(v) for k, v in terms.items()}}.items():
            total[k] = total.get(k, 0.0) + v
    return {k: v / validation_steps for k, v in total.items()}
