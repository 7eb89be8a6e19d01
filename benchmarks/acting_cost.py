"""Per-step acting cost of a sequential model: `step` (KV cache / recurrent state) against
recomputing the window from scratch at every environment step (what the 2020 code did).

    python benchmarks/acting_cost.py [--windows=128] [--batch_size=1] [--steps=200]
                                     [--repeats=5] [--num_threads=1]

The model is CarRacing's base transformer (6 layers, 256 wide, 8 heads; Z=32, A=3) at its
shipped window, 128 (other windows with --windows). Three paths run on the same inputs in one
process, interleaved: each repeat times `steps` calls of each path in turn, so load from other
work on the machine falls on all of them alike.

  step               `model.step` with a full cache (t >= window): what acting and dreaming use.
  recompute          `get_hidden_representation` over the last `window` inputs, a tf.function.
  recompute (XLA)    the same, compiled with XLA (jit_compile=True).

The reference is the cheaper of the two recomputes in each repeat, so the ratio does not gain
from a slow reference. Prints, per path, the median over repeats of each repeat's median wall
and CPU milliseconds per environment step, then the ratio per repeat and its median. CPU time
(all threads of this process) is the steadier figure on a shared machine. The LSTM (MDN-RNN)
`step` is shown for scale.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_list("windows", ["128"], "Window sizes to compare (the shipped model uses 128).")
flags.DEFINE_integer("batch_size", 1, "Environments acted on at once.")
flags.DEFINE_integer("steps", 200, "Timed environment steps per path and repeat (after warm-up).")
flags.DEFINE_integer("repeats", 5, "Interleaved repeats (step, recompute, recompute XLA).")
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size.")


def median_ms(fn, steps: int) -> tuple[float, float]:
    """(median wall ms, median CPU ms of all threads) per call of `fn`."""
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return 1000 * statistics.median(wall), 1000 * statistics.median(cpu)


def acting_paths(model, window: int, batch_size: int, z_size: int, a_size: int) -> dict:
    """{name: fn()} for the cached step and the two recomputes at `window`, warmed up."""
    import tensorflow as tf

    x = tf.random.normal([batch_size, window, z_size + a_size])
    state = model.initial_state(batch_size)
    for t in range(window):  # steady state: the cache is full
        _, state = model.step(x[:, t, :z_size], x[:, t, z_size:], state)
    z_t, a_t = x[:, -1, :z_size], x[:, -1, z_size:]
    box = {"state": state}

    def step():
        h, box["state"] = model.step(z_t, a_t, box["state"])
        h.numpy()

    recompute_fn = tf.function(lambda w: model.get_hidden_representation(w))
    recompute_xla_fn = tf.function(lambda w: model.get_hidden_representation(w), jit_compile=True)
    paths = {
        "step": step,
        "recompute": lambda: recompute_fn(x).numpy(),
        "recompute (XLA)": lambda: recompute_xla_fn(x).numpy(),
    }
    for fn in paths.values():
        for _ in range(5):
            fn()
    return paths


def interleaved(paths: dict, steps: dict, repeats: int) -> dict:
    """{name: [(wall ms, CPU ms) per repeat]}, the paths alternating within each repeat."""
    out = {name: [] for name in paths}
    for _ in range(repeats):
        for name, fn in paths.items():
            out[name].append(median_ms(fn, steps[name]))
    return out


def _load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main(argv):
    del argv
    tf_setup.limit_threads(FLAGS.num_threads)
    import tensorflow as tf

    from rl755.models import catalogue

    b, z_size, a_size = FLAGS.batch_size, 32, 3
    print(
        f"batch {b}, base transformer (6 layers x 256, 8 heads), {FLAGS.num_threads or 'all'} "
        f"TF threads; medians of {FLAGS.repeats} interleaved repeats; {_load()}"
    )
    base = catalogue.model_fn("CAR_RACING", "transformer.base_deterministic_transformer")
    for w in [int(x) for x in FLAGS.windows]:
        model = base(window=w).ensure_built()
        paths = acting_paths(model, w, b, z_size, a_size)
        recompute_steps = max(10, FLAGS.steps // max(1, w // 16))  # recompute is ~w/10 slower
        steps = {"step": FLAGS.steps, "recompute": recompute_steps}
        steps["recompute (XLA)"] = recompute_steps
        res = interleaved(paths, steps, FLAGS.repeats)
        print(f"\nwindow {w}: ms per environment step (median over repeats)")
        for name, runs in res.items():
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"  {name:<16} {wall:>9.3f} wall {cpu:>9.3f} CPU")
        for i, kind in enumerate(("wall", "CPU")):
            ratios = [
                min(res["recompute"][r][i], res["recompute (XLA)"][r][i]) / res["step"][r][i]
                for r in range(FLAGS.repeats)
            ]
            each = " ".join(f"{r:.1f}" for r in ratios)
            print(
                f"  cheaper recompute / step, {kind:>4}: {statistics.median(ratios):5.1f}x "
                f"(per repeat: {each})"
            )
        cpu = {k: statistics.median(r[1] for r in v) for k, v in res.items()}
        report(
            f"acting_cost/window{w}", "transformer step, CPU ms", cpu["step"],
            "recomputing the window, CPU ms (cheaper of plain and XLA)",
            min(cpu["recompute"], cpu["recompute (XLA)"]), ratio=statistics.median(ratios),
            target=10.0,
        )  # fmt: skip

    mdn = catalogue.build("CAR_RACING", "mdn_rnn.mdn_rnn").ensure_built()
    state = {"s": mdn.initial_state(b)}
    z0, a0 = tf.zeros([b, z_size]), tf.zeros([b, a_size])

    def mdn_step():
        h, state["s"] = mdn.step(z0, a0, state["s"])
        h.numpy()

    for _ in range(5):
        mdn_step()
    wall, cpu = median_ms(mdn_step, FLAGS.steps)
    print(f"\nMDN-RNN (LSTM 256) step: {wall:.3f} ms wall, {cpu:.3f} ms CPU; {_load()}")


if __name__ == "__main__":
    app.run(main)
