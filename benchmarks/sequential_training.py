"""Training throughput (sequences/s) of each CarRacing sequential model through the trainer.

    python benchmarks/sequential_training.py [--batch_size=32] [--sequence_length=32] [--steps=20]

Synthetic in-memory slices (Z=32, A=3) so the data pipeline is not what is measured. For
each model, two numbers side by side in one process: the full trainer
(`sequential_loop.fit_sequential_model`: MirroredStrategy, masked global loss, per-step NaN check) and a
bare compiled Adam step on the same model and batch (the reference: what the model alone
costs). Medians of per-step wall times after warm-up; the ratio is the trainer's overhead.
"""

from __future__ import annotations

import statistics
import tempfile
import time

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 32, "Sequences per batch.")
flags.DEFINE_integer("sequence_length", 32, "Steps per sequence.")
flags.DEFINE_integer("steps", 20, "Timed steps per model.")
flags.DEFINE_list(
    "models",
    [
        "transformer.tiny_deterministic_transformer",
        "transformer.base_deterministic_transformer",
        "lstm.deterministic_lstm",
        "mdn_rnn.mdn_rnn",
        "mdn_rnn.mdn_rnn_with_heads",
    ],
    "rl755.models.catalogue names to measure (CAR_RACING sizes).",
)
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size.")


def _bare_step_seconds(model, batch, warm, steps):
    """Median seconds of a plain compiled Adam step on `batch` (the reference)."""
    import keras
    import tensorflow as tf

    opt = keras.optimizers.Adam(1e-4)
    loss_fn = model.get_loss_fn()

    @tf.function
    def bare_step():
        with tf.GradientTape() as tape:
            loss = loss_fn(batch, model(batch["inputs"], training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    times = []
    for i in range(warm + steps):
        t0 = time.perf_counter()
        float(bare_step())
        if i >= warm:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv):
    del argv
    tf_setup.limit_threads(FLAGS.num_threads)
    import numpy as np
    import tensorflow as tf

    from rl755.models import catalogue
    from rl755.models.common import sequential_loop

    b, length, z, a = FLAGS.batch_size, FLAGS.sequence_length, 32, 3
    rng = np.random.default_rng(0)
    n = 4 * b
    data = {
        "inputs": rng.normal(size=(n, length, z + a)).astype(np.float32),
        "targets": rng.normal(size=(n, length, z)).astype(np.float32),
        "rewards": rng.normal(size=(n, length)).astype(np.float32),
        "dones": np.zeros((n, length), np.float32),
        "mask": np.ones((n, length), np.float32),
        "target_mask": np.ones((n, length), np.float32),
    }

    def dataset_fn(split):
        return tf.data.Dataset.from_tensor_slices(data).repeat()

    batch = {k: tf.constant(v[:b]) for k, v in data.items()}
    warm = 3
    print(f"batch {b} x {length} steps; median sequences/s (trainer / bare step / ratio)")
    for name in FLAGS.models:
        model_fn = catalogue.model_fn("CAR_RACING", name)
        with tempfile.TemporaryDirectory() as d:
            r = sequential_loop.fit_sequential_model(
                model_fn,
                dataset_fn,
                model_dir=d,
                train_steps=warm + FLAGS.steps,
                batch_size=b,
                learning_rate=1e-4,
                save_every_n_steps=10**9,
                validation_steps=0,
            )
        trainer = b / statistics.median(r["step_seconds"][warm:])

        model = model_fn().ensure_built()
        bare = b / _bare_step_seconds(model, batch, warm, FLAGS.steps)
        params = model.count_params()
        print(
            f"{name:45s} {params:>9,d} params  {trainer:8.1f} / {bare:8.1f} / "
            f"{trainer / bare:.2f}"
        )


if __name__ == "__main__":
    app.run(main)
