"""Rollout collection through finished TFRecord shards vs raw `env.step`, side by side.

    python benchmarks/rollout_throughput.py --environment=CAR_RACING --num_rollouts=4 \
        --max_steps=300 --parallelism=2 --repeats=3

Each repeat runs, one after the other on the same cores:
  raw   `parallelism` processes (a warm multiprocessing pool, one env each) doing reset +
        `env.step(action_space.sample())` for their share of the rollouts, storing nothing;
  tool  `rl755.data_gen.collect.collect_rollouts(out_format="tfrecord")`: Ray workers, the
        policy, Rollout -> SequenceExample, compression, atomic shard writes, run record,
        measured until the last shard is renamed into place.
It prints frames/s of both, their ratio (target >= 0.9 on 2 cores) and bytes on disk per
frame (target <= 1.1 kB per 96x96x3 frame with GZIP), per repeat and the median, plus the
CPU time per frame of each (the tool's: its Ray workers' tasks, and this driver process), whose
ratio is less disturbed than wall-clock time when other jobs share the cores.
Ray start-up and the workers' first import (one-off costs, paid once per job) are warmed
up before timing and reported separately.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import tempfile
import time

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", "CAR_RACING", "Environments enum name.")
flags.DEFINE_string(
    "policy", "RandomPolicy", "Policy name (tool run): rl755.policies.policy_names(environment)."
)
flags.DEFINE_integer("num_rollouts", 4, "Rollouts per repeat.")
flags.DEFINE_integer("max_steps", 300, "Steps per rollout.")
flags.DEFINE_integer("parallelism", 2, "Processes (raw) and Ray workers (tool).")
flags.DEFINE_integer("repeats", 3, "Repeats; the median is reported.")
flags.DEFINE_enum("compression", "GZIP", ["none", "GZIP", "ZLIB"], "Shard compression.")
flags.DEFINE_integer("rollouts_per_shard", None, "Rollouts per shard (default: the tool's).")

_ENV = {}


def _raw_init(env_name: str) -> None:
    from rl755.environments import Environments

    _ENV["env"] = Environments[env_name].make()


def _raw_rollouts(args) -> tuple[int, float]:
    """Runs rollouts with random actions, storing nothing; returns (steps, CPU seconds)."""
    seeds, max_steps = args
    env = _ENV["env"]
    frames = 0
    cpu_start = time.process_time()
    for seed in seeds:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        for _ in range(max_steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            frames += 1
            if terminated or truncated:
                break
    return frames, time.process_time() - cpu_start


def _raw_run(pool, num_rollouts, max_steps, parallelism, seed) -> tuple[int, float, float]:
    seeds = [seed * 1000 + i for i in range(num_rollouts)]
    shares = [(seeds[w::parallelism], max_steps) for w in range(parallelism)]
    start = time.perf_counter()
    out = pool.map(_raw_rollouts, shares, chunksize=1)
    seconds = time.perf_counter() - start
    return sum(f for f, _ in out), seconds, sum(c for _, c in out)


def _tool_run(
    out_dir, seed, num_rollouts=None, max_steps=None
) -> tuple[int, float, int, float, float]:
    from rl755.data_gen.collect import collect_rollouts

    start, cpu_start = time.perf_counter(), time.process_time()
    summary = collect_rollouts(
        environment=FLAGS.environment,
        policy=FLAGS.policy,
        num_rollouts=num_rollouts or FLAGS.num_rollouts,
        parallelism=FLAGS.parallelism,
        max_steps=max_steps or FLAGS.max_steps,
        out_dir=out_dir,
        out_format="tfrecord",
        seed=seed,
        compression=FLAGS.compression,
        rollouts_per_shard=FLAGS.rollouts_per_shard,
        progress=False,
    )
    seconds = time.perf_counter() - start
    driver_cpu = time.process_time() - cpu_start
    on_disk = sum(os.path.getsize(f) for f in summary.files)
    return summary.frames, seconds, on_disk, summary.cpu_seconds, driver_cpu


def main(argv):
    del argv
    from rl755.common.ray_pool import ray_session

    p = FLAGS.parallelism
    print(
        f"{FLAGS.environment}: {FLAGS.num_rollouts} rollouts x {FLAGS.max_steps} steps, "
        f"{p} processes, {FLAGS.compression}, policy {FLAGS.policy}, {FLAGS.repeats} repeats"
    )
    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    with ctx.Pool(p, initializer=_raw_init, initargs=(FLAGS.environment,)) as pool, ray_session(p):
        ray_start = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            # Warm-up: Ray workers import rl755 + TF and build their env; raw processes too.
            _tool_run(os.path.join(tmp, "warmup"), 10_000, num_rollouts=2 * p, max_steps=20)
            _raw_run(pool, p, 5, p, seed=10_000)
            warm = time.perf_counter() - t0
            print(f"one-off: pool + ray.init {ray_start:.1f} s, warm-up run {warm:.1f} s")
            rows = []
            for r in range(FLAGS.repeats):
                raw_frames, raw_s, raw_cpu = _raw_run(
                    pool, FLAGS.num_rollouts, FLAGS.max_steps, p, r
                )
                frames, tool_s, on_disk, tool_cpu, driver_cpu = _tool_run(
                    os.path.join(tmp, f"run{r}"), r
                )
                raw_fps, tool_fps = raw_frames / raw_s, frames / tool_s
                raw_ms, tool_ms = 1000 * raw_cpu / raw_frames, 1000 * tool_cpu / frames
                driver_ms = 1000 * driver_cpu / frames
                rows.append(
                    (
                        raw_fps, tool_fps, tool_fps / raw_fps, on_disk / frames, raw_ms, tool_ms,
                        driver_ms,
                    )
                )  # fmt: skip
                print(
                    f"repeat {r}: raw {raw_fps:7.1f} frames/s | tool {tool_fps:7.1f} frames/s "
                    f"| ratio {tool_fps / raw_fps:.3f} | {on_disk / frames / 1000:.3f} kB/frame "
                    f"| CPU ms/frame raw {raw_ms:.2f} tool workers {tool_ms:.2f} + driver "
                    f"{driver_ms:.2f} ({frames} frames)"
                )
    med = [statistics.median(col) for col in zip(*rows)]
    print(
        f"median: raw {med[0]:.1f} frames/s, tool {med[1]:.1f} frames/s, "
        f"ratio {med[2]:.3f} (target >= 0.9), {med[3] / 1000:.3f} kB/frame on disk "
        f"(target <= 1.1 for 96x96x3 GZIP)"
    )
    print(
        f"median CPU per frame: raw {med[4]:.2f} ms, tool workers {med[5]:.2f} ms + driver "
        f"{med[6]:.2f} ms (CPU ratio raw/(workers+driver) {med[4] / (med[5] + med[6]):.3f}; "
        "less disturbed by other load on the machine than wall-clock time)"
    )


if __name__ == "__main__":
    app.run(main)
