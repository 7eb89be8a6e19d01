"""Rollout collection through finished TFRecord shards vs raw `env.step`, side by side.

    python benchmarks/rollout_throughput.py --environment=CAR_RACING --num_rollouts=4 \
        --max_steps=300 --parallelism=2 --repeats=3

Each repeat runs, one after the other on the same cores:
  raw   `parallelism` processes (a warm multiprocessing pool, one env each) doing reset +
        `env.step(action_space.sample())` for their share of the rollouts, storing nothing;
  tool  `rl755.data_gen.collect.collect_rollouts(out_format="tfrecord")`: Ray workers, the
        policy, Rollout -> SequenceExample, compression, atomic shard writes, run record,
        measured until the last shard is renamed into place.
It prints frames/s of both, their ratio (target >= 0.9 on 2 cores; `TARGETS`) and bytes on disk per
frame (target <= 1.1 kB per 96x96x3 frame with GZIP), per repeat and the median, plus the
CPU time per frame of each (the tool's: its Ray workers' tasks, and this driver process), whose
ratio is less disturbed than wall-clock time when other jobs share the cores.
One-off costs are paid before timing and reported apart: Ray's start, and a warm-up run whose
Ray workers start, import rl755 and TensorFlow and build their environment; the workers stay
up for the timed runs (`RayWorkerPool(keep_workers=True)` inside one Ray session), as they
would for one long run. `--environments=CAR_RACING,DOOM_TAKE_COVER,BREAKOUT` measures several,
one after the other
in one Ray session (each with workers of its own).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import tempfile
import time

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_result import report  # noqa: E402

from rl755.common import tf_setup  # noqa: E402

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", "CAR_RACING", "Environments enum name.")
flags.DEFINE_list(
    "environments", None, "Several environments, one after the other (overrides --environment)."
)
flags.DEFINE_string(
    "policy", "RandomPolicy", "Policy name (tool run): rl755.policies.policy_names(environment)."
)
flags.DEFINE_integer("num_rollouts", 4, "Rollouts per repeat.")
flags.DEFINE_integer("max_steps", 300, "Steps per rollout.")
flags.DEFINE_integer("parallelism", 2, "Processes (raw) and Ray workers (tool).")
flags.DEFINE_integer("repeats", 3, "Repeats; the median is reported.")
flags.DEFINE_enum("compression", "GZIP", ["none", "GZIP", "ZLIB"], "Shard compression.")
flags.DEFINE_integer("rollouts_per_shard", None, "Rollouts per shard (default: the tool's).")

# Ratio targets by environment. ViZDoom's step costs this process about what compressing its
# frame costs (the game runs in a process of its own), so it has none yet.
TARGETS = {"CAR_RACING": 0.9, "BREAKOUT": 0.9}

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
    """(frames, seconds, CPU seconds) of the raw side's rollouts on the pool's processes."""
    seeds = [seed * 1000 + i for i in range(num_rollouts)]
    shares = [(seeds[w::parallelism], max_steps) for w in range(parallelism)]
    start = time.perf_counter()
    out = pool.map(_raw_rollouts, shares, chunksize=1)
    seconds = time.perf_counter() - start
    return sum(f for f, _ in out), seconds, sum(c for _, c in out)


def _tool_run(environment, out_dir, seed, num_rollouts=None, max_steps=None) -> dict:
    """One collection run on Ray; its summary plus "seconds", "driver_cpu", "on_disk"."""
    from rl755.data_gen.collect import collect_rollouts

    start, cpu_start = time.perf_counter(), time.process_time()
    summary = collect_rollouts(
        environment=environment,
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
        use_ray=True,
    ).to_dict()
    summary["seconds"] = time.perf_counter() - start
    summary["driver_cpu"] = time.process_time() - cpu_start
    summary["on_disk"] = sum(os.path.getsize(f) for f in summary["files"])
    return summary


def _measure(environment: str, pool, tmp: str) -> list[tuple]:
    """Warm-up, then the repeats of one environment; prints them and returns the rows."""
    p = FLAGS.parallelism
    # Warm-up: the Ray workers import rl755 + TF and build their env (they stay up for the
    # repeats: same session, same environment); the raw processes build theirs.
    t0 = time.perf_counter()
    warm = _tool_run(environment, os.path.join(tmp, "warmup"), 10_000, 2 * p, 20)
    warm_s = time.perf_counter() - t0
    _raw_run(pool, p, 5, p, seed=10_000)
    print(
        f"{environment} one-off: warm-up run {warm_s:.1f} s, of which Ray workers' start "
        f"{warm['workers_ready_s']:.1f} s; workers' first task (imports, env) "
        f"{warm['cpu_seconds']:.1f} CPU s"
    )
    rows = []
    for r in range(FLAGS.repeats):
        raw_frames, raw_s, raw_cpu = _raw_run(pool, FLAGS.num_rollouts, FLAGS.max_steps, p, r)
        run = _tool_run(environment, os.path.join(tmp, f"run{r}"), r)
        frames, tool_s = run["frames"], run["seconds"]
        raw_fps, tool_fps = raw_frames / raw_s, frames / tool_s
        raw_ms, tool_ms = 1000 * raw_cpu / raw_frames, 1000 * run["cpu_seconds"] / frames
        driver_ms = 1000 * run["driver_cpu"] / frames
        kb = run["on_disk"] / frames / 1000
        rows.append((raw_fps, tool_fps, tool_fps / raw_fps, kb, raw_ms, tool_ms, driver_ms))
        print(
            f"repeat {r}: raw {raw_fps:7.1f} frames/s | tool {tool_fps:7.1f} frames/s "
            f"| ratio {tool_fps / raw_fps:.3f} | {kb:.3f} kB/frame "
            f"| CPU ms/frame raw {raw_ms:.2f} tool workers {tool_ms:.2f} + driver "
            f"{driver_ms:.2f} ({frames} frames)"
        )
    return rows


def main(argv):
    del argv
    from rl755.common.ray_pool import ray_session

    p = FLAGS.parallelism
    envs = FLAGS.environments or [FLAGS.environment]
    print(
        f"{', '.join(envs)}: {FLAGS.num_rollouts} rollouts x {FLAGS.max_steps} steps, "
        f"{p} processes, {FLAGS.compression}, policy {FLAGS.policy}, {FLAGS.repeats} repeats"
    )
    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    with ray_session(p):
        print(f"ray.init {time.perf_counter() - t0:.1f} s")
        for environment in envs:
            with ctx.Pool(p, initializer=_raw_init, initargs=(environment,)) as pool:
                with tempfile.TemporaryDirectory() as tmp:
                    _summarize(environment, _measure(environment, pool, tmp))


def _summarize(environment: str, rows: list[tuple]) -> None:
    """Prints the medians of one environment's repeats and its result line."""
    med = [statistics.median(col) for col in zip(*rows)]
    cpu_ratio = med[4] / (med[5] + med[6])
    print(
        f"{environment} median: raw {med[0]:.1f} frames/s, tool {med[1]:.1f} frames/s, "
        f"ratio {med[2]:.3f} (target {TARGETS.get(environment) or 'none'}), {med[3]:.3f} "
        "kB/frame on disk"
    )
    print(
        f"{environment} median CPU per frame: raw {med[4]:.2f} ms, tool workers "
        f"{med[5]:.2f} ms + driver {med[6]:.2f} ms (CPU ratio raw/(workers+driver) "
        f"{cpu_ratio:.3f}; less disturbed by other load on the machine than wall-clock time)"
    )
    report(
        f"rollout_throughput/{environment}", "collection frames/s through shards", med[1],
        "raw env.step frames/s", med[0], ratio=med[2], target=TARGETS.get(environment),
        cpu_ratio=cpu_ratio,
        raw_cpu_ms=med[4], worker_cpu_ms=med[5], driver_cpu_ms=med[6], kb_per_frame=med[3],
    )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
