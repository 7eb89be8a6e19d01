"""rl755's CarRacing (off-screen road polygons skipped) against gymnasium's CarRacing-v3.

    python benchmarks/car_racing_render.py --steps=300 --repeats=5

Both play the same episode (reset seed, then the same uniform random actions in
[-1, 1] x [0, 1] x [0, 0.3] after `--gas_steps` steps of full gas, which puts the car on
the track) in this process, one after the other within each repeat, so load from elsewhere
hits both alike. It checks that the two gave the same frames, and prints env steps/s of each
(reset excluded), per repeat and the median, and the ratio rl755 / gymnasium: how much faster
every CarRacing step of the toolkit is (collection, real-environment controller training and
evaluation). CPU time per step is printed beside wall time.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("steps", 300, "Steps per episode (after the reset).")
flags.DEFINE_integer("gas_steps", 60, "Leading steps of full gas.")
flags.DEFINE_integer("repeats", 5, "Timed repeats of both (after one warm-up).")
flags.DEFINE_integer("seed", 0, "Reset seed of the first repeat (repeat i: seed + i).")


def _episode(env, seed, actions):
    """Steps `env` through `actions` after a reset; returns (wall s, CPU s, frames)."""
    env.reset(seed=seed)
    frames = []
    t0, c0 = time.perf_counter(), time.process_time()
    for a in actions:
        obs, _, terminated, truncated, _ = env.step(a)
        frames.append(obs)
        if terminated or truncated:
            break
    return time.perf_counter() - t0, time.process_time() - c0, frames


def main(argv):
    del argv
    import gymnasium as gym
    import numpy as np

    from rl755.environments import Environments, car_racing

    envs = {"gymnasium": gym.make(car_racing.ORIGINAL_ID), "rl755": Environments.CAR_RACING.make()}
    rng = np.random.default_rng(FLAGS.seed)
    actions = rng.uniform([-1, 0, 0], [1, 1, 0.3], (FLAGS.steps, 3)).astype(np.float32)
    actions[: FLAGS.gas_steps] = (0.0, 1.0, 0.0)
    for env in envs.values():  # warm-up
        _episode(env, FLAGS.seed, actions[:50])
    rates = {name: [] for name in envs}
    cpu = {name: [] for name in envs}
    print(f"{'repeat':>6} {'gymnasium steps/s':>18} {'rl755 steps/s':>14} {'ratio':>6}")
    for r in range(FLAGS.repeats):
        frames = {}
        for name, env in envs.items():
            wall, cpu_s, frames[name] = _episode(env, FLAGS.seed + r, actions)
            rates[name].append(len(frames[name]) / wall)
            cpu[name].append(cpu_s / len(frames[name]))
        same = len(frames["rl755"]) == len(frames["gymnasium"]) and all(
            np.array_equal(a, b) for a, b in zip(frames["rl755"], frames["gymnasium"])
        )
        if not same:
            raise SystemExit(f"repeat {r}: the frames differ; rl755's CarRacing is broken.")
        g, f = rates["gymnasium"][-1], rates["rl755"][-1]
        print(f"{r:>6} {g:>18.1f} {f:>14.1f} {f / g:>6.2f}")
    g, f = statistics.median(rates["gymnasium"]), statistics.median(rates["rl755"])
    gc, fc = statistics.median(cpu["gymnasium"]), statistics.median(cpu["rl755"])
    print(
        f"median: gymnasium {g:.1f} steps/s ({gc * 1e3:.2f} ms CPU a step), rl755 {f:.1f} "
        f"steps/s ({fc * 1e3:.2f} ms CPU), ratio {f / g:.2f} wall, {gc / fc:.2f} CPU; "
        "frames identical in every repeat"
    )
    report(
        "car_racing_render", "rl755 CarRacing steps/s", f, "gymnasium CarRacing-v3 steps/s", g,
        ratio=f / g, target=2.0, cpu_ratio=gc / fc,
    )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
