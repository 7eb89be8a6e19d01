"""Training throughput (sequences/s) of sequential models: the stage-4 trainer against the same
computation written plainly, interleaved.

    python benchmarks/sequential_training.py --batch_size=16 --sequence_length=32 \
        --models=mdn_rnn.mdn_rnn [--rounds=5] [--steps=10]

Synthetic in-memory slices (Z=32, A=3; a quarter of the sequences end early, so the masks
matter) so the data pipeline is not what is measured. For each model, alternating blocks of
`--steps` timed steps, `--rounds` times:

  trainer    `sequential_loop.fit_sequential_model` (its distribution strategy, the masked
             global loss, the per-step NaN check, TensorBoard means), resumed in one
             model_dir block after block; its own per-step wall times
  reference  the same computation written plainly: the same model constructor, the same
             masked loss (`model.get_loss_fn()`: the MDN negative log-likelihood and the
             reward/done heads as the trainer weighs them), the same Adam and learning rate
             (the trainer clips no gradients, so neither does this), one bare `tf.function`
             step on the same batches

The first `--warm` steps of every block are dropped (tracing, and compiling with XLA). It
prints the median sequences/s of each over all rounds and the ratio trainer / reference
(> 1: the trainer is faster than the plain step, e.g. through XLA; < 1: its overhead).
"""

from __future__ import annotations

import statistics
import tempfile
import time

from absl import app, flags, logging

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS


def define_flags():
    """The command line's flags (defined only when run as a script, so tests can import this
    module beside other benchmarks)."""
    flags.DEFINE_integer("batch_size", 16, "Sequences per batch.")
    flags.DEFINE_integer("sequence_length", 32, "Steps per sequence.")
    flags.DEFINE_integer("steps", 10, "Timed steps per block.")
    flags.DEFINE_integer("warm", 2, "Untimed steps at the start of every block.")
    flags.DEFINE_integer("rounds", 5, "Blocks of each side, alternating.")
    flags.DEFINE_list(
        "models",
        ["mdn_rnn.mdn_rnn", "mdn_rnn.mdn_rnn_with_heads", "lstm.deterministic_lstm"],
        "rl755.models.catalogue names to measure (CAR_RACING sizes).",
    )
    flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size.")


LEARNING_RATE = 1e-4
Z, A = 32, 3


def synthetic_slices(batch_size: int, length: int, z: int = Z, a: int = A, seed: int = 0) -> dict:
    """4 batches of slices as `get_autoregressive_slices` gives them; every 4th sequence has
    only its first half real (mask) and one step less with a next observation (target_mask)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = 4 * batch_size
    mask = np.ones((n, length), np.float32)
    mask[::4, length // 2 :] = 0
    target_mask = mask.copy()
    target_mask[::4, length // 2 - 1] = 0
    dones = np.zeros((n, length), np.float32)
    dones[::4, length // 2 - 1] = 1
    return {
        "inputs": rng.normal(size=(n, length, z + a)).astype(np.float32),
        "targets": rng.normal(size=(n, length, z)).astype(np.float32),
        "rewards": rng.normal(size=(n, length)).astype(np.float32),
        "dones": dones,
        "mask": mask,
        "target_mask": target_mask,
    }


class Reference:
    """The trainer's computation, plainly: `step(batch)` is one Adam step on the masked loss."""

    def __init__(self, model_fn):
        import keras
        import tensorflow as tf

        self.model = model_fn().ensure_built()
        self.optimizer = keras.optimizers.Adam(LEARNING_RATE)
        loss_fn = self.model.get_loss_fn()
        variables = self.model.trainable_variables

        @tf.function
        def step(batch):
            with tf.GradientTape() as tape:
                predictions = self.model(batch["inputs"], mask=batch["mask"], training=True)
                loss = loss_fn(batch, predictions)
            grads = tape.gradient(loss, variables)
            self.optimizer.apply_gradients(zip(grads, variables))
            return loss

        self.step = step

    def block(self, batches: list, steps: int, warm: int) -> list[float]:
        """Wall seconds of `steps` steps after `warm` untimed ones."""
        times = []
        for i in range(warm + steps):
            t0 = time.perf_counter()
            float(self.step(batches[i % len(batches)]))
            if i >= warm:
                times.append(time.perf_counter() - t0)
        return times


def trainer_block(model_fn, dataset_fn, model_dir, done, steps, warm, batch_size):
    """Resumes the trainer in model_dir for warm + steps more steps: (its step seconds, done)."""
    from rl755.models.common import sequential_loop

    r = sequential_loop.fit_sequential_model(
        model_fn,
        dataset_fn,
        model_dir=model_dir,
        train_steps=done + warm + steps,
        batch_size=batch_size,
        learning_rate=LEARNING_RATE,
        save_every_n_steps=10**9,
        validation_steps=0,
    )
    return r["step_seconds"][warm:], r["step"]


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)  # the trainer's per-block start and save lines
    tf_setup.limit_threads(FLAGS.num_threads)
    import tensorflow as tf

    from rl755.models import catalogue

    b, length = FLAGS.batch_size, FLAGS.sequence_length
    data = synthetic_slices(b, length)

    def dataset_fn(split):
        return tf.data.Dataset.from_tensor_slices(data).repeat()

    batches = [{k: tf.constant(v[i : i + b]) for k, v in data.items()} for i in range(0, 4 * b, b)]
    print(
        f"batch {b} x {length} steps; {FLAGS.rounds} rounds of {FLAGS.steps} steps each side, "
        "interleaved; median sequences/s"
    )
    print(f"{'model':32s} {'params':>9s} {'trainer':>9s} {'reference':>10s} {'ratio':>6s}")
    for name in FLAGS.models:
        model_fn = catalogue.model_fn("CAR_RACING", name)
        reference = Reference(model_fn)
        trainer_times, reference_times = [], []
        with tempfile.TemporaryDirectory() as d:
            done = 0
            for _ in range(FLAGS.rounds):
                times, done = trainer_block(
                    model_fn, dataset_fn, d, done, FLAGS.steps, FLAGS.warm, b
                )
                trainer_times += times
                reference_times += reference.block(batches, FLAGS.steps, FLAGS.warm)
        trainer = b / statistics.median(trainer_times)
        plain = b / statistics.median(reference_times)
        params = reference.model.count_params()
        print(f"{name:32s} {params:>9,d} {trainer:9.1f} {plain:10.1f} {trainer / plain:6.2f}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
