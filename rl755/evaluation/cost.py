"""CPU cost of a sequential model: training sequences per CPU-second, acting cost per step.

    training_cost(model_fn, batch_size=32, sequence_length=32)
    # {"sequences_per_cpu_second", "sequences_per_second", "cpu_seconds_per_step", ...}
    acting_cost(model_fn, batch_size=1, context=128)
    # {"cpu_ms_per_step", "wall_ms_per_step", ...}

Training: one compiled Adam step on a fixed synthetic batch (inputs [B, L, Z + A], random
targets, every head's target present), so the data pipeline is not what is measured.
Acting: the cached `step` (recurrent state or key/value cache) on [B, Z] + [B, A] after
`context` steps (a transformer's cache full): what the agent runs per environment step to
get h_t for the controller. CPU time is `time.process_time()` (all
threads of this process), the steadier figure on a shared machine; medians of the timed
repeats after warm-up.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import tensorflow as tf


def _median_seconds(fn, steps: int, warmup: int) -> tuple[float, float]:
    """(median wall s, median CPU s) per call of fn after `warmup` calls."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def synthetic_batch(model, batch_size: int, sequence_length: int, seed: int = 0) -> dict:
    """A training batch as from get_autoregressive_slices, random: "inputs" [B, L, Z + A],
    "targets" [B, L, Z], "rewards", "dones", "mask", "target_mask" [B, L]."""
    rng = np.random.default_rng(seed)
    b, n, z, a = batch_size, sequence_length, model.representation_size, model.action_size
    data = {
        "inputs": rng.normal(size=(b, n, z + a)),
        "targets": rng.normal(size=(b, n, z)),
        "rewards": rng.normal(size=(b, n)),
        "dones": (rng.uniform(size=(b, n)) < 0.05),
        "mask": np.ones((b, n)),
        "target_mask": np.ones((b, n)),
    }
    return {k: tf.constant(np.asarray(v, np.float32)) for k, v in data.items()}


def training_cost(
    model_fn, batch_size: int = 32, sequence_length: int = 32, steps: int = 10, warmup: int = 3
) -> dict:
    """Sequences per CPU-second (and per wall second) of a compiled Adam step (see module)."""
    import keras

    model = model_fn()
    batch = synthetic_batch(model, batch_size, sequence_length)
    model(batch["inputs"][:1])  # builds the weights
    opt = keras.optimizers.Adam(1e-4)
    loss_fn = model.get_loss_fn()

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = loss_fn(batch, model(batch["inputs"], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    wall, cpu = _median_seconds(lambda: float(train_step()), steps, warmup)
    return {
        "sequences_per_cpu_second": batch_size / cpu if cpu > 0 else None,
        "sequences_per_second": batch_size / wall,
        "cpu_seconds_per_step": cpu,
        "batch_size": int(batch_size),
        "sequence_length": int(sequence_length),
        "params": int(model.count_params()),
    }


def acting_cost(
    model_fn, batch_size: int = 1, context: int = 128, steps: int = 50, warmup: int = 5
) -> dict:
    """CPU and wall milliseconds per cached `step` after `context` steps."""
    model = model_fn()
    rng = np.random.default_rng(0)
    z = tf.constant(rng.normal(size=(batch_size, model.representation_size)), tf.float32)
    a = tf.constant(rng.normal(size=(batch_size, model.action_size)), tf.float32)
    state = model.initial_state(batch_size)
    for _ in range(context):
        _, state = model.step(z, a, state)
    box = {"state": state}

    def act():
        h, box["state"] = model.step(z, a, box["state"])
        h.numpy()

    wall, cpu = _median_seconds(act, steps, warmup)
    return {
        "cpu_ms_per_step": 1000 * cpu,
        "wall_ms_per_step": 1000 * wall,
        "batch_size": int(batch_size),
        "context": int(context),
    }
