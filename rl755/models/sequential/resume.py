"""Where a stage-4 run starts: a new model, its own newest checkpoint, or another run's weights.

    model, optimizer, info, last = resume.start(strategy, model_fn, model_dir, task,
                                                model_info={"environment": "FAKE_PIXELS"})

The model and its optimizer are built under the strategy's scope. A model_dir with a complete
checkpoint (rl755.common.checkpoints) resumes from its newest: weights and optimizer state, so
the run goes on exactly; it must train the same thing (`IDENTITY_KEYS`). Otherwise
`initial_weights` (another run's model_dir or a shipped folder) gives a warm start at step 0.
"""

from __future__ import annotations

import os

from absl import logging

from rl755.common import checkpoints
from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential import schedule, tasks

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


def start(
    strategy,
    model_fn,
    model_dir: str,
    task: tasks.TrainingTask,
    model_info: dict | None = None,
    difference_targets: bool = False,
    learning_rate: float = 1e-3,
    learning_rate_decay: float = 1.0,
    min_learning_rate: float = 0.0,
    initial_weights: str | None = None,
):
    """(model, optimizer, info for the markers, the checkpoint resumed from or None)."""
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
        optimizer = schedule.make_optimizer(
            model.trainable_variables, learning_rate, learning_rate_decay, min_learning_rate
        )
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
    init = checkpoints.warm_start(
        last,
        initial_weights,
        info,
        ("model", "model_class", "representation_size", "action_size"),
        model_dir,
        "a train_sequential_model.py --model_dir or a shipped folder, e.g. "
        "rl755/zoo/shipped/<env>/<name>",
    )
    if last is not None:
        with strategy.scope():
            model.load_weights(last.weights_path)
            checkpoints.restore_optimizer(optimizer, last)
        logging.info("Resuming from %s (step %d).", last.weights_path, last.step)
    elif init is not None:
        with strategy.scope():
            checkpoints.load_weights_checked(model, init.weights_path)
        logging.info(
            "Starting from the weights of %s (its step %d); step 0 here, a new optimizer.",
            init.weights_path,
            init.step,
        )
    return model, optimizer, info, last


def _refuse_old_format(model_dir: str) -> None:
    if os.path.exists(os.path.join(model_dir, OLD_FORMAT_FILE)):
        raise ValueError(
            f"{model_dir} holds checkpoints of the old format ({OLD_FORMAT_FILE}, "
            "model-<step>.optimizer.npz), which this version does not resume (load_trained_model "
            "still loads them). Train into another --model_dir."
        )
