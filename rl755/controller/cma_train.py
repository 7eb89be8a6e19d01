"""Training a controller with CMA-ES, in the real environment or inside the learned model.

    spec = AgentSpec("CAR_RACING", "LinearController", encoder_fn=..., sequential_model_fn=...)
    summary = train_controller(spec, model_dir, mode="real", population_size=64,
                               trials_per_member=16, generations=1800, parallelism=64)

Each generation: CMA-ES proposes `population_size` parameter vectors [P, N]; every member
runs `trials_per_member` episodes whose seeds (real mode) or initial states (dream mode)
are shared by all members of the generation; its fitness is the mean return. Then:

- TensorBoard scalars under `<model_dir>/tensorboard`: fitness/{mean,best,worst},
  perf/{env_steps_per_s | dream_steps_per_s}, cma/sigma, eval/real_{mean,std} and
  eval/dream_to_real_gap (dream mode);
- an atomic checkpoint `<model_dir>/checkpoint.pkl` (pickled CMA-ES state, generation,
  best parameters, history), and the trained controller (`controller.json` +
  `controller_params.npy`, see `rl755.controller.saved`);
- `<model_dir>/learning_curve.png`.

Every `eval_every` generations the generation's best member plays `eval_episodes` real
episodes on fixed seeds. Rerunning with the same `model_dir` resumes the generation count
and CMA-ES state exactly (CMA-ES's sampling in generation g is seeded by (seed, g)).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import time
from collections.abc import Callable

import numpy as np

from rl755.common import pictures, sharded_io
from rl755.controller import saved
from rl755.controller.agent import AgentSpec
from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
from rl755.controller.real_eval import RealEvaluator

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pkl"
CURVE = "learning_curve.png"
MODES = ("real", "dream")
FULL_COVARIANCE_MAX_PARAMS = 10_000  # above this, diagonal CMA-ES (memory and time ~ N^2)


def _seeds(seed: int, *key: int, n: int) -> np.ndarray:
    """n reproducible 31-bit seeds for (seed, *key)."""
    return np.random.SeedSequence([seed, *key]).generate_state(n) % (2**31 - 1)


def trial_seeds(seed: int, generation: int, trials: int) -> np.ndarray:
    """The reset seeds of a generation's trials, shared by all members: [T]."""
    return _seeds(seed, 1, generation, n=trials)


def eval_seeds(seed: int, episodes: int) -> np.ndarray:
    """Fixed seeds of the periodic real evaluation (the same every time): [E]."""
    return _seeds(seed, 2, n=episodes)


@dataclasses.dataclass
class CmaConfig:
    """Attributes:
    mode: "real" (episodes in the environment) or "dream" (inside the sequential model).
    population_size: P, CMA-ES population.
    trials_per_member: T, episodes per member per generation.
    generations: total generations (a resumed run continues up to this number).
    rollout_max_steps: step limit per episode (real and dream).
    sigma: CMA-ES initial step size.
    seed: base seed (trial seeds, CMA-ES sampling, eval seeds).
    temperature: dream sampling temperature.
    eval_every: real evaluation of the best member every this many generations (0: never).
    eval_episodes: episodes of that evaluation.
    dream_initial_states: K real reset frames encoded as dream starting points.
    """

    mode: str = "real"
    population_size: int = 64
    trials_per_member: int = 16
    generations: int = 100
    rollout_max_steps: int = 1000
    sigma: float = 0.1
    seed: int = 0
    temperature: float = 1.0
    eval_every: int = 25
    eval_episodes: int = 16
    dream_initial_states: int = 256

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"Unknown --mode {self.mode!r}; valid: {', '.join(MODES)}.")
        for name in ("population_size", "trials_per_member", "generations", "rollout_max_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}.")
        if self.population_size < 2:
            raise ValueError("CMA-ES needs population_size >= 2.")
        if self.sigma <= 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}.")


@dataclasses.dataclass
class PoolConfig:
    """How real episodes run. Attributes:
    parallelism: Ray actors (0: one in-process worker, no Ray).
    envs_per_worker: environments stepped together (batched networks) per worker.
    ray_address: join an existing Ray cluster ("auto", "host:port"), else start one locally.
    trial_timeout_s: a batch of episodes not done in this time is re-run on a new worker.
    startup_timeout_s: extra time for a new worker's first batch (imports, network build).
    max_worker_failures: failures of one batch before the run stops with an error.
    threads_per_worker: TF/OMP threads (and Ray CPUs) per worker.
    """

    parallelism: int = 0
    envs_per_worker: int = 4
    ray_address: str | None = None
    trial_timeout_s: float = 600.0
    startup_timeout_s: float = 300.0
    max_worker_failures: int = 3
    threads_per_worker: int = 1


def _load_checkpoint(model_dir: str) -> dict | None:
    path = os.path.join(model_dir, CHECKPOINT)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return pickle.load(f)


def _save_checkpoint(model_dir: str, ckpt: dict) -> None:
    with sharded_io.atomic_output(os.path.join(model_dir, CHECKPOINT)) as tmp:
        with open(tmp, "wb") as f:
            pickle.dump(ckpt, f)


def _plot_curve(model_dir: str, history: list[dict], evals: list[dict], title: str) -> None:
    gens = [h["generation"] for h in history]
    fig, ax = pictures.new_figure(figsize=(7, 4))
    ax.plot(gens, [h["mean"] for h in history], label="population mean")
    ax.plot(gens, [h["best"] for h in history], label="population best")
    ax.fill_between(
        gens,
        [h["worst"] for h in history],
        [h["best"] for h in history],
        alpha=0.15,
        label="population worst to best",
    )
    if evals:
        ax.errorbar(
            [e["generation"] for e in evals],
            [e["mean"] for e in evals],
            yerr=[e["std"] for e in evals],
            fmt="o",
            color="k",
            capsize=3,
            label="best member, real episodes",
        )
    ax.set_xlabel("generation")
    ax.set_ylabel("return")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    pictures.figure(fig).save(os.path.join(model_dir, CURVE))


def train_controller(
    spec: AgentSpec,
    model_dir: str,
    cma_config: CmaConfig,
    pool: PoolConfig | None = None,
    make_env: Callable | None = None,
    dream_initial_seeds=None,
    hparams: dict | None = None,
    real_evaluator: RealEvaluator | None = None,
) -> dict:
    """Runs (or resumes) CMA-ES training of `spec`'s controller; see the module docstring.

    Args:
      spec: what to build (environment, encoder, sequential model, controller).
      model_dir: output directory; an existing checkpoint there is resumed.
      cma_config, pool: see `CmaConfig`, `PoolConfig`.
      make_env: environment constructor (default `spec.env.make_fn()`).
      dream_initial_seeds: reset seeds of the dream's initial frames (default: derived).
      hparams: flags to show in TensorBoard's text tab.
      real_evaluator: an existing pool for real episodes (kept open); default: one is built
        from `pool` and closed at the end.
    Returns:
      {"generation", "best_fitness", "best_params" [N], "history", "evals", "model_dir"}.
    """
    import cma
    import tensorflow as tf

    cfg = cma_config
    cfg.validate()
    pool = pool or PoolConfig()
    env = spec.env
    make_env = make_env or env.make_fn()

    # Build and size-check everything before any rollout.
    encoder, seq = spec.build_models()
    controller = spec.build_controller(encoder, seq)
    n = controller.num_params
    if cfg.mode == "dream":
        if seq is None or encoder is None:
            raise ValueError("--mode=dream needs an --encoder and a --sequential_model.")
        if getattr(seq, "has_reward_head", True) is False:
            raise ValueError(
                f"--mode=dream needs a sequential model with a reward head; {spec.sequential_model_name} "
                "has none (train one with reward/done heads, e.g. mdn_rnn.mdn_rnn_with_heads)."
            )
        if getattr(seq, "has_done_head", True) is False:
            log.warning(
                "%s has no episode-end head: dream episodes run %d steps.",
                spec.sequential_model_name,
                cfg.rollout_max_steps,
            )
        try:
            seq.sample_next(
                tf.zeros([1, seq.hidden_size]),
                temperature=cfg.temperature,
                z=tf.zeros([1, seq.representation_size]),
            )
        except NotImplementedError as e:
            raise ValueError(f"--mode=dream needs a sequential model with sample_next: {e}") from e
    meta = saved.controller_meta(spec, controller)
    meta.update(mode=cfg.mode, temperature=cfg.temperature if cfg.mode == "dream" else None)

    os.makedirs(model_dir, exist_ok=True)
    ckpt = _load_checkpoint(model_dir)
    if ckpt is not None:
        old = ckpt["meta"]
        if old["num_params"] != n or old["controller"] != meta["controller"]:
            raise ValueError(
                f"{model_dir} holds a {old['controller']} with {old['num_params']} parameters "
                f"(input size {old['input_size']}), but this run builds a {meta['controller']} "
                f"with {n} (input size {controller.input_size}): use another --model_dir."
            )
        if ckpt["population_size"] != cfg.population_size:
            raise ValueError(
                f"{model_dir} was trained with population size {ckpt['population_size']}, "
                f"not {cfg.population_size}: keep --cma_population_size to resume."
            )
        es = ckpt["es"]
        log.info("Resuming %s at generation %d.", model_dir, ckpt["generation"])
    else:
        options = {"popsize": cfg.population_size, "seed": cfg.seed + 1, "verbose": -9}
        if n > FULL_COVARIANCE_MAX_PARAMS:
            # A full N x N covariance is N^2 floats (a pixel controller on CarRacing: 83k
            # parameters -> 55 GB): use separable (diagonal) CMA-ES instead.
            options["CMA_diagonal"] = True
            log.info("%d parameters: using diagonal (separable) CMA-ES.", n)
        es = cma.CMAEvolutionStrategy(np.zeros(n), cfg.sigma, options)
        ckpt = {
            "generation": 0,
            "es": es,
            "meta": meta,
            "population_size": cfg.population_size,
            "best_params": None,
            "best_fitness": -np.inf,
            "history": [],
            "evals": [],
        }
    start = ckpt["generation"]
    if start >= cfg.generations:
        log.info("%s already has %d generations (asked: %d).", model_dir, start, cfg.generations)

    writer = tf.summary.create_file_writer(os.path.join(model_dir, "tensorboard"))
    if start == 0 and hparams:
        with writer.as_default():
            table = "\n".join(f"| {k} | {v} |" for k, v in sorted(hparams.items()))
            tf.summary.text("hparams", "| flag | value |\n|---|---|\n" + table, step=0)

    need_real = cfg.mode == "real" or cfg.eval_every > 0
    real = real_evaluator
    dream = None
    try:
        if need_real and start < cfg.generations and real is None:
            real = RealEvaluator(
                spec,
                make_env,
                parallelism=pool.parallelism,
                envs_per_worker=pool.envs_per_worker,
                ray_address=pool.ray_address,
                trial_timeout_s=pool.trial_timeout_s,
                startup_timeout_s=pool.startup_timeout_s,
                max_failures=pool.max_worker_failures,
                threads_per_worker=pool.threads_per_worker,
            )
        if cfg.mode == "dream" and start < cfg.generations:
            init_seeds = (
                _seeds(cfg.seed, 3, n=cfg.dream_initial_states)
                if dream_initial_seeds is None
                else np.asarray(dream_initial_seeds)
            )

            def encode(frames):
                return encoder.compute_full_representation(tf.constant(frames))[0].numpy()

            z0 = encoded_initial_states(make_env, encode, init_seeds)
            dream = DreamEvaluator(
                seq, controller, z0, cfg.rollout_max_steps, cfg.temperature, spec.action_fn
            )

        for gen in range(start, cfg.generations):
            t0 = time.monotonic()
            # CMA-ES samples with opts["randn"]; a per-generation generator makes generation g
            # the same whether the run was resumed or not (an unpickled default randn would be
            # bound to a copy of numpy's global RandomState, not the live one).
            es.opts["randn"] = np.random.RandomState(int(_seeds(cfg.seed, 4, gen, n=1)[0])).randn
            solutions = es.ask()
            params = np.asarray(solutions, np.float32)  # [P, N]
            if cfg.mode == "real":
                seeds = trial_seeds(cfg.seed, gen, cfg.trials_per_member)
                jobs = np.repeat(params, cfg.trials_per_member, axis=0)  # [P * T, N]
                out = real.evaluate(
                    jobs, np.tile(seeds, cfg.population_size), cfg.rollout_max_steps
                )
            else:
                rng = np.random.default_rng(_seeds(cfg.seed, 5, gen, n=1)[0])
                k = len(dream.initial_z)
                ids = rng.choice(k, cfg.trials_per_member, replace=k < cfg.trials_per_member)
                out = dream.evaluate(params, ids, seed=int(_seeds(cfg.seed, 6, gen, n=1)[0]))
            returns = np.asarray(out["returns"]).reshape(cfg.population_size, -1)  # [P, T]
            total_steps = int(np.sum(out["steps"]))
            fitness = returns.mean(axis=1)  # [P]
            es.tell(solutions, (-fitness).tolist())
            elapsed = time.monotonic() - t0
            best = int(np.argmax(fitness))
            if fitness[best] > ckpt["best_fitness"]:
                ckpt["best_fitness"] = float(fitness[best])
                ckpt["best_params"] = np.asarray(solutions[best], np.float64)
            record = {
                "generation": gen + 1,
                "mean": float(fitness.mean()),
                "best": float(fitness[best]),
                "worst": float(fitness.min()),
                "steps": total_steps,
                "seconds": elapsed,
                "steps_per_s": total_steps / max(elapsed, 1e-9),
                "sigma": float(es.sigma),
            }
            ckpt["history"].append(record)
            scalars = {
                "fitness/mean": record["mean"],
                "fitness/best": record["best"],
                "fitness/worst": record["worst"],
                "cma/sigma": record["sigma"],
                f"perf/{'env' if cfg.mode == 'real' else 'dream'}_steps_per_s": record[
                    "steps_per_s"
                ],
            }
            if cfg.eval_every > 0 and (
                (gen + 1) % cfg.eval_every == 0 or gen + 1 == cfg.generations
            ):
                ev_seeds = eval_seeds(cfg.seed, cfg.eval_episodes)
                ev = real.evaluate(
                    np.repeat(params[best : best + 1], len(ev_seeds), axis=0),
                    ev_seeds,
                    cfg.rollout_max_steps,
                )
                evr = {
                    "generation": gen + 1,
                    "mean": float(np.mean(ev["returns"])),
                    "std": float(np.std(ev["returns"])),
                    "train_fitness": record["best"],
                    "params": np.asarray(solutions[best], np.float64),
                }
                ckpt["evals"].append(evr)
                scalars["eval/real_mean"] = evr["mean"]
                scalars["eval/real_std"] = evr["std"]
                if cfg.mode == "dream":
                    scalars["eval/dream_to_real_gap"] = record["best"] - evr["mean"]
                log.info(
                    "Generation %d: best member scores %.2f +- %.2f over %d real episodes.",
                    gen + 1,
                    evr["mean"],
                    evr["std"],
                    len(ev_seeds),
                )
            with writer.as_default():
                for key, value in scalars.items():
                    tf.summary.scalar(key, value, step=gen + 1)
            writer.flush()
            ckpt["generation"] = gen + 1
            _save_checkpoint(model_dir, ckpt)
            saved.save_trained_controller(model_dir, ckpt)
            _plot_curve(
                model_dir,
                ckpt["history"],
                ckpt["evals"],
                f"{meta['controller']} on {env.name} ({cfg.mode})",
            )
            log.info(
                "Generation %d/%d: fitness mean %.2f best %.2f worst %.2f; %d steps, %.0f steps/s.",
                gen + 1,
                cfg.generations,
                record["mean"],
                record["best"],
                record["worst"],
                total_steps,
                record["steps_per_s"],
            )
    finally:
        if real is not None and real is not real_evaluator:
            real.close()
        writer.close()
    with sharded_io.atomic_output(os.path.join(model_dir, "summary.json")) as tmp:
        with open(tmp, "w") as f:
            json.dump(
                {
                    "generation": ckpt["generation"],
                    "best_fitness": ckpt["best_fitness"],
                    "history": ckpt["history"],
                    "evals": [{k: v for k, v in e.items() if k != "params"} for e in ckpt["evals"]],
                },
                f,
                indent=1,
            )
    return {
        "generation": ckpt["generation"],
        "best_fitness": ckpt["best_fitness"],
        "best_params": ckpt["best_params"],
        "history": ckpt["history"],
        "evals": ckpt["evals"],
        "model_dir": model_dir,
        "es": es,
    }


def run_train_controller(
    *,
    environment: str,
    model_dir: str,
    encoder: str = "none",
    sequential_model: str = "none",
    controller: str = "LinearController",
    hidden_units: int | None = None,
    encoder_dir: str | None = None,
    encoder_model: str | None = None,
    representation_size: int | None = None,
    sequential_model_dir: str | None = None,
    cma_config: CmaConfig,
    pool: PoolConfig,
    run_flags: dict | None = None,
) -> dict:
    """What scripts/models/train_controller.py runs: resolves names (failing fast), records
    the run in <model_dir>/runs/, then `train_controller`."""
    from rl755.common import run_record
    from rl755.controller.resolve import make_agent_spec

    cma_config.validate()
    spec = make_agent_spec(
        environment,
        controller,
        encoder=encoder,
        sequential_model=sequential_model,
        encoder_dir=encoder_dir,
        encoder_model=encoder_model,
        representation_size=representation_size,
        hidden_units=hidden_units,
        sequential_model_dir=sequential_model_dir,
    )
    flags = dict(run_flags or {})
    with run_record.record_run(model_dir, flags, stage="train_controller"):
        return train_controller(spec, model_dir, cma_config, pool, hparams=flags)
