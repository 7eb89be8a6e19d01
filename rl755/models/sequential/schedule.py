"""The optimizer of stage 4: Adam at a constant rate, or decaying per step down to a floor.

    optimizer = schedule.make_optimizer(model.trainable_variables, 1e-3, decay=0.99999,
                                        minimum=1e-5)
    schedule.learning_rate_at(1000, 1e-3, decay=0.99999, minimum=1e-5)   # the rate at step 1000

The rate of the update at step s (from 0) is max(minimum, learning_rate x decay^s), a function
of the optimizer's step counter: a resumed run goes on where it stopped, at the rate its own
flags give (the rate is never read back from a checkpoint).
"""

from __future__ import annotations

import keras
import tensorflow as tf


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
    """Adam's rate for the update at `step` (0 = the first), as `make_optimizer` sets it."""
    return max(minimum, learning_rate * decay**step)


def check_optimizer_flags(
    learning_rate: float, decay: float, minimum: float, clip_norm: float
) -> None:
    """ValueError naming the first flag out of range."""
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be > 0, got {learning_rate}.")
    if not 0 < decay <= 1:
        raise ValueError(
            f"learning_rate_decay must be in (0, 1] (1: a constant rate), got {decay}."
        )
    if not 0 <= minimum <= learning_rate:
        raise ValueError(
            f"min_learning_rate must be in [0, learning_rate={learning_rate}], got {minimum}."
        )
    if not clip_norm >= 0:
        raise ValueError(f"clip_norm must be >= 0 (0: no clipping), got {clip_norm}.")


def make_optimizer(variables, learning_rate: float, decay: float = 1.0, minimum: float = 0.0):
    """A built Adam over `variables` whose rate follows the schedule (also when constant)."""
    rate = DecayingLearningRate(learning_rate, decay, minimum)
    optimizer = keras.optimizers.Adam(rate)
    optimizer.build(variables)
    return optimizer


def describe(learning_rate: float, decay: float, minimum: float, clip_norm: float, step: int):
    """The log line of the optimizer a run at `step` uses."""
    now = learning_rate_at(step, learning_rate, decay, minimum)
    rate = (
        f" x {decay:g} a step down to {minimum:g} (now {now:g})" if decay != 1.0 else " (constant)"
    )
    clip = f", gradients clipped to global norm {clip_norm:g}" if clip_norm else ""
    return f"Adam: learning rate {learning_rate:g}{rate}{clip}."
