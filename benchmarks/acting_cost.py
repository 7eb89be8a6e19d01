"""Per-step acting cost of a sequential model: `step` (KV cache / recurrent state) against
recomputing the window from scratch at every environment step (what the 2020 code did).

    python benchmarks/acting_cost.py [--windows=32,256] [--batch_size=1] [--steps=200]

The model is CarRacing's base transformer (6 layers, 256 wide, 8 heads; Z=32, A=3) with
its window set to each value; both paths are compiled tf.functions and run on the same
inputs in one process. Prints median milliseconds per environment step and the ratio; the
LSTM / MDN-RNN `step` is shown for scale.
"""

from __future__ import annotations

import statistics
import time

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_list("windows", ["32", "256"], "Window sizes to compare.")
flags.DEFINE_integer("batch_size", 1, "Environments acted on at once.")
flags.DEFINE_integer("steps", 200, "Timed environment steps per path (after warm-up).")
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size.")


def _median_ms(fn, steps: int) -> tuple[float, float]:
    """(median wall ms, median CPU ms of all threads) per call; CPU time is the steadier
    figure on a machine shared with other work."""
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return 1000 * statistics.median(wall), 1000 * statistics.median(cpu)


def _compare(make_base_transformer, w, b, z_size, a_size, steps):
    """(cached step timings, recompute timings) for the base transformer at window w."""
    import tensorflow as tf

    model = make_base_transformer(window=w).ensure_built()
    x = tf.random.normal([b, w, z_size + a_size])
    # Steady state: the cache is full (t >= window).
    state = model.initial_state(b)
    for t in range(w):
        _, state = model.step(x[:, t, :z_size], x[:, t, z_size:], state)
    z_t, a_t = x[:, -1, :z_size], x[:, -1, z_size:]
    box = {"state": state}

    def cached():
        h, box["state"] = model.step(z_t, a_t, box["state"])
        h.numpy()

    recompute_fn = tf.function(lambda window: model.get_hidden_representation(window))

    def recompute():
        recompute_fn(x).numpy()

    for _ in range(5):
        cached()
        recompute()
    return _median_ms(cached, steps), _median_ms(recompute, steps)


def main(argv):
    del argv
    tf_setup.limit_threads(FLAGS.num_threads)
    import tensorflow as tf

    from rl755.models import catalogue

    b, z_size, a_size = FLAGS.batch_size, 32, 3
    print(f"batch {b}, base transformer (6 layers x 256, 8 heads); median ms per env step")
    print(f"{'window':>7} {'step (cache)':>13} {'recompute':>10} {'ratio':>7}   (wall ms / CPU ms)")
    for w in [int(x) for x in FLAGS.windows]:
        steps = FLAGS.steps if w <= 64 else max(20, FLAGS.steps // 4)
        base = catalogue.model_fn("CAR_RACING", "transformer.base_deterministic_transformer")
        (wc, cc), (wr, cr) = _compare(base, w, b, z_size, a_size, steps)
        print(f"{w:>7} {wc:>13.3f} {wr:>10.3f} {wr / wc:>6.1f}x   wall")
        print(f"{'':>7} {cc:>13.3f} {cr:>10.3f} {cr / cc:>6.1f}x   CPU")

    mdn = catalogue.build("CAR_RACING", "mdn_rnn.mdn_rnn").ensure_built()
    state = {"s": mdn.initial_state(b)}
    z0, a0 = tf.zeros([b, z_size]), tf.zeros([b, a_size])

    def mdn_step():
        h, state["s"] = mdn.step(z0, a0, state["s"])
        h.numpy()

    for _ in range(5):
        mdn_step()
    wall, cpu = _median_ms(mdn_step, FLAGS.steps)
    print(f"MDN-RNN (LSTM 256) step: {wall:.3f} ms wall, {cpu:.3f} ms CPU")


if __name__ == "__main__":
    app.run(main)
