"""One scaled-down World Models CMA-ES generation on CarRacing: real mode vs raw env, dream vs real.

    python benchmarks/controller_generation.py --population=16 --trials=2 --steps=60 --repeats=3

Networks at the paper's size with random weights: ConvVAE (Z = 32, 4.35M params) + MDN-RNN
(LSTM 256, 5 mixtures, reward/done heads) + LinearController (867 params).

1. raw:   P x T CarRacing episodes of S steps with random actions (reset + env.step only),
          spread over the same W Ray workers (one process per core).
2. real:  the same P x T episodes evaluated by the generation's RealEvaluator (W Ray actors,
          each stepping `envs_per_worker` envs with one batched VAE + MDN-RNN + controller
          call per step). Policy overhead = real time per env step / raw time per env step - 1
          (target <= 25%).
3. dream: the same generation inside the MDN-RNN (P x T episodes batched in one TF loop
          in this process). Ratio = real generation time / dream generation time (target >= 100x).

Each is timed `repeats` times after a warm-up (raw, real, dream in turn within each repeat, so
load from elsewhere hits all three alike); medians are printed side by side.

At the paper's generation shape (P = 64 x T = 16: 1,024 CarRacing episodes, each with a reset
of ~0.3 s) one real pass takes many minutes on 2 cores. `--real_episodes=N` times raw and real
on the first N of the P x T episodes only and scales their times by P x T / N: on a fixed pool of
W workers a real generation's time is linear in its episodes (each worker steps its
`envs_per_worker` environments in lockstep; N must be a multiple of W x envs_per_worker so the
sample fills the same batches, else the script refuses). The dream always runs all P x T
episodes, in one batch, since its cost per episode is what shrinks with the batch. The output
says when times are scaled.
"""

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
flags.DEFINE_integer("population", 16, "P, CMA-ES population.")
flags.DEFINE_integer("trials", 2, "T, episodes per member.")
flags.DEFINE_integer("steps", 60, "S, steps per episode.")
flags.DEFINE_integer("workers", 2, "W, Ray workers (one per core).")
flags.DEFINE_integer("envs_per_worker", 4, "Environments stepped together per worker.")
flags.DEFINE_integer("repeats", 3, "Timed repetitions of each (after one warm-up).")
flags.DEFINE_integer(
    "real_episodes",
    0,
    "Time raw and real on this many of the P x T episodes and scale to P x T (0: all).",
)


def _raw_episodes(seeds, steps):
    """Random-action CarRacing episodes: the environment's own cost. Returns env steps."""
    from rl755.environments import Environments

    env = Environments.CAR_RACING.make()
    n = 0
    for s in seeds:
        env.reset(seed=int(s))
        env.action_space.seed(int(s))
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            n += 1
            if terminated or truncated:
                break
    env.close()
    return n


def main(argv):
    del argv
    import numpy as np
    import ray

    from rl755.controller.agent import AgentSpec
    from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
    from rl755.controller.real_eval import RealEvaluator
    from rl755.environments import Environments
    from rl755.models import catalogue

    env = Environments.CAR_RACING
    p, t, s, w = FLAGS.population, FLAGS.trials, FLAGS.steps, FLAGS.workers
    spec = AgentSpec(
        env.name,
        "LinearController",
        encoder_fn=catalogue.model_fn(env, "vae.Vae"),
        sequential_model_fn=catalogue.model_fn(env, "mdn_rnn.mdn_rnn_with_heads"),
    )
    n_real = FLAGS.real_episodes or p * t
    if not 0 < n_real <= p * t:
        raise ValueError(f"--real_episodes must be in [1, P x T = {p * t}], got {n_real}.")
    batch = w * FLAGS.envs_per_worker
    if n_real < p * t and n_real % batch:
        raise ValueError(
            f"--real_episodes={n_real} is not a multiple of --workers x --envs_per_worker = "
            f"{batch}: a partial batch would be timed as a full one's share. Use "
            f"{max(batch, n_real // batch * batch)}."
        )
    from rl755.common.ray_pool import start_ray

    start_ray(w)  # retries a local start that timed out on a loaded machine
    raw_task = ray.remote(num_cpus=0)(_raw_episodes)

    agent = spec.build()
    params = np.random.default_rng(0).normal(0, 0.1, (p, agent.num_params)).astype(np.float32)
    seeds = np.arange(t) + 1000
    job_params, job_seeds = np.repeat(params, t, axis=0), np.tile(seeds, p)
    scale = p * t / n_real  # real and raw times are scaled to the whole generation
    job_params, job_seeds = job_params[:n_real], job_seeds[:n_real]
    z0 = encoded_initial_states(env.make_fn(), agent.encode, seeds)
    # Random weights: the done head would end dreams at random after a few steps, so every
    # dream runs S steps, the same work as the real generation.
    dream = DreamEvaluator(
        agent.sequential_model, agent.controller, z0, max_steps=s, end_episodes=False
    )

    def time_raw():
        t0 = time.perf_counter()
        parts = np.array_split(job_seeds, w)
        steps = sum(ray.get([raw_task.remote(part, s) for part in parts]))
        return scale * (time.perf_counter() - t0), scale * steps

    def time_real():
        t0 = time.perf_counter()
        out = pool.evaluate(job_params, job_seeds, s)
        return scale * (time.perf_counter() - t0), scale * int(out["steps"].sum())

    def time_dream():
        t0 = time.perf_counter()
        out = dream.evaluate(params, np.arange(t), seed=0)
        return time.perf_counter() - t0, int(out["steps"].sum())

    # Real-mode workers (W actors, one CPU each); the raw tasks take no CPU reservation so they
    # can run on the same cores while the actors are idle. Each repeat times raw, real and
    # dream one after the other, so load from elsewhere on the machine hits all three alike.
    pool = RealEvaluator(
        spec,
        env.make_fn(),
        parallelism=w,
        envs_per_worker=FLAGS.envs_per_worker,
        trial_timeout_s=1800,
    )
    fns = {"raw": time_raw, "real": time_real, "dream": time_dream}
    for fn in fns.values():
        fn()  # warm-up: worker processes, imports, tracing
    runs = {name: [] for name in fns}
    for i in range(FLAGS.repeats):
        for name, fn in fns.items():
            runs[name].append(fn())
        print(f"repeat {i}: " + ", ".join(f"{k} {v[-1][0]:.2f} s" for k, v in runs.items()))
    results = {k: (statistics.median(r[0] for r in v), v[0][1]) for k, v in runs.items()}
    pool.close()
    ray.shutdown()

    raw_t, raw_n = results["raw"]
    real_t, real_n = results["real"]
    dream_t, dream_n = results["dream"]
    print(
        f"\nOne generation: P={p} x T={t} episodes x S={s} steps, {w} workers, "
        f"{FLAGS.envs_per_worker} envs per worker (medians of {FLAGS.repeats})"
    )
    if scale != 1:
        print(
            f"  (raw and real timed on {n_real} of the {p * t} episodes, times and steps scaled "
            f"by {scale:g}; the dream ran all {p * t})"
        )
    print(
        f"  raw env.step (random actions) : {raw_t:7.2f} s  {1000 * raw_t / raw_n:6.2f} ms/step "
        f"({raw_n / raw_t:6.0f} steps/s)"
    )
    print(
        f"  real mode (VAE+MDN-RNN+ctrl)  : {real_t:7.2f} s  {1000 * real_t / real_n:6.2f} ms/step "
        f"({real_n / real_t:6.0f} steps/s)"
    )
    print(
        f"  policy overhead vs raw env    : {100 * ((real_t / real_n) / (raw_t / raw_n) - 1):+.1f}% "
        "(target <= 25%)"
    )
    print(
        f"  dream mode (MDN-RNN, batched) : {dream_t:7.2f} s  ({dream_n / dream_t:6.0f} dream steps/s)"
    )
    print(f"  dream speed-up vs real        : {real_t / dream_t:.0f}x (target >= 100x)")
    real_ms, raw_ms = 1000 * real_t / real_n, 1000 * raw_t / raw_n
    report(
        "controller_generation/real", "real-mode ms per env step", real_ms,
        "raw env.step ms per step", raw_ms, ratio=real_ms / raw_ms, target=1.25, better="lower",
    )  # fmt: skip
    report(
        "controller_generation/dream", "dream generation s", dream_t, "real generation s",
        real_t, ratio=real_t / dream_t, target=100.0,
    )  # fmt: skip


if __name__ == "__main__":
    app.run(main)
