"""Training throughput (sequences/s) of sequential models: the stage-4 trainer against the same
computation written plainly, interleaved.

    python benchmarks/sequential_training.py --batch_size=16 --sequence_length=32 \
        --models=mdn_rnn.mdn_rnn [--rounds=5] [--steps=10]

Synthetic in-memory slices (Z=32, A=3; a quarter of the sequences end early, so the masks
matter) so the data pipeline is not what is measured. For each model, alternating blocks of
`--steps` timed steps, `--rounds` times:

  trainer    `sequential_loop.fit_sequential_model` (its distribution strategy, the masked
             global loss, the per-step NaN check, TensorBoard means; its batch parts, set
             with `--batch_shards`), resumed in one model_dir block after block; its own
             per-step wall times
  reference  the same computation written plainly: the same model constructor, the same
             masked loss (`model.get_loss_fn()`: the MDN negative log-likelihood and the
             reward/done heads as the trainer weighs them), the same Adam and learning rate
             (the trainer clips no gradients, so neither does this), one bare `tf.function`
             step on the same batches

With `--baseline_loop=FILE` (a `rl755/models/sequential/loop.py` of another code version, e.g. the one
before a change: `git show <commit>:rl755/models/sequential/loop.py > /tmp/loop.py`)
that trainer is a third side, so before and after are timed in one process, interleaved.
The order of the sides is reversed every other round. The first `--warm` steps of every block
are dropped (tracing, and compiling with XLA). It prints the median sequences/s of each over
all rounds, the ratio trainer / baseline, and the ratio trainer / reference (> 1: the trainer
is faster than the plain step, e.g. through XLA and its batch parts; < 1: its overhead).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from absl import app, flags, logging

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

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
    flags.DEFINE_integer(
        "batch_shards", None, "The trainer's batch parts (default: its own choice by cores)."
    )
    flags.DEFINE_string(
        "baseline_loop",
        None,
        "A rl755/models/sequential/loop.py of another code version, timed as a third side (before/after a "
        "change), e.g. from `git show <commit>:rl755/models/sequential/loop.py`.",
    )


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


def trainer_block(loop, model_fn, dataset_fn, model_dir, done, steps, warm, batch_size, shards):
    """Resumes `loop.fit_sequential_model` in model_dir for warm + steps more steps: (its step
    seconds, done, its batch parts or None for a loop without them)."""
    kw = {} if shards is None else {"batch_shards": shards}
    r = loop.fit_sequential_model(
        model_fn,
        dataset_fn,
        model_dir=model_dir,
        train_steps=done + warm + steps,
        batch_size=batch_size,
        learning_rate=LEARNING_RATE,
        save_every_n_steps=10**9,
        validation_steps=0,
        **kw,
    )
    return r["step_seconds"][warm:], r["step"], r.get("batch_shards")


def load_loop(path: str):
    """A rl755/models/sequential/loop.py of another code version, as a module (its imports resolve in
    this checkout's rl755)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("baseline_sequential_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)  # the trainer's per-block start and save lines
    tf_setup.limit_threads(FLAGS.num_threads)
    import tensorflow as tf

    from rl755.models import catalogue
    from rl755.models.sequential import loop as sequential_loop

    b, length = FLAGS.batch_size, FLAGS.sequence_length
    data = synthetic_slices(b, length)

    def dataset_fn(split):
        return tf.data.Dataset.from_tensor_slices(data).repeat()

    trainers = {"trainer": (sequential_loop, FLAGS.batch_shards)}
    if FLAGS.baseline_loop:
        trainers["baseline"] = (load_loop(FLAGS.baseline_loop), None)
    batches = [{k: tf.constant(v[i : i + b]) for k, v in data.items()} for i in range(0, 4 * b, b)]
    print(
        f"batch {b} x {length} steps; {FLAGS.rounds} rounds of {FLAGS.steps} steps each side, "
        "interleaved, the order reversed every other round; median sequences/s"
    )
    header = f"{'model':32s} {'params':>9s} {'trainer':>9s}"
    header += f" {'baseline':>9s} {'ratio':>6s}" if FLAGS.baseline_loop else ""
    print(header + f" {'reference':>10s} {'ratio':>6s}")
    for name in FLAGS.models:
        model_fn = catalogue.model_fn("CAR_RACING", name)
        reference = Reference(model_fn)
        times = {side: [] for side in [*trainers, "reference"]}
        done = dict.fromkeys(trainers, 0)
        parts = None
        with tempfile.TemporaryDirectory() as d:
            for r in range(FLAGS.rounds):
                order = list(times) if r % 2 == 0 else list(times)[::-1]
                for side in order:
                    if side == "reference":
                        times[side] += reference.block(batches, FLAGS.steps, FLAGS.warm)
                        continue
                    loop, shards = trainers[side]
                    block, done[side], used = trainer_block(
                        loop, model_fn, dataset_fn, os.path.join(d, side), done[side],
                        FLAGS.steps, FLAGS.warm, b, shards,
                    )  # fmt: skip
                    times[side] += block
                    parts = used if side == "trainer" else parts
        rate = {side: b / statistics.median(t) for side, t in times.items()}
        line = f"{name:32s} {reference.model.count_params():>9,d} {rate['trainer']:9.1f}"
        if FLAGS.baseline_loop:
            line += f" {rate['baseline']:9.1f} {rate['trainer'] / rate['baseline']:6.2f}"
        line += f" {rate['reference']:10.1f} {rate['trainer'] / rate['reference']:6.2f}"
        print(f"{line}   (trainer: batch in {parts} part{'s' if parts > 1 else ''})")
        report(
            f"sequential_training/{name}", "sequences/s, stage-4 trainer", rate["trainer"],
            "sequences/s, plain tf.function step", rate["reference"],
            ratio=rate["trainer"] / rate["reference"], target=1.0,
        )  # fmt: skip


if __name__ == "__main__":
    define_flags()
    app.run(main)
