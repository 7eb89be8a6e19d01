"""Stage 5: train a controller with CMA-ES, in the real environment or inside the learned model.

    train_controller(environment="CAR_RACING", model_dir="runs/ctrl",
                     encoder="raw_rollout_vae_32ld", sequential_model="mdn_rnn_vae_32ld",
                     cma_config=CmaConfig(population_size=64, trials_per_member=16),
                     pool=PoolConfig(parallelism=64))          # scripts/models/train_controller.py
    summary = run_cma_es(spec, model_dir, CmaConfig(...))      # with an AgentSpec

Each generation every member plays `trials_per_member` episodes on shared seeds (real) or
initial states (dream); its fitness is the mean return. The state is saved after each
generation (rl755.controller.cma_state), candidates are evaluated and selected by
rl755.controller.candidates, and rerunning with the same `model_dir` resumes exactly.
docs/architecture.md describes what a run writes.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import numpy as np

from rl755.common.tensorboard import TrainingLogs
from rl755.controller import candidates, cma_state, saved
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_config import (
    CmaConfig,
    PoolConfig,
    derived_seeds,
    trial_seeds,
)
from rl755.controller.dream_eval import (
    DreamEvaluator,
    check_disagreement_penalty,
    check_dream_model,
    encoded_initial_states,
)
from rl755.controller.real_eval import RealEvaluator
from rl755.controller.results import TrainingResult

log = logging.getLogger(__name__)

CURVE = "learning_curve.png"


def _check_same_dream(model_dir: str, old: dict, meta: dict) -> None:
    """A resumed dream run keeps its dream: the same ensemble, penalty and end scale."""
    for key in ("dream_ensemble", "dream_disagreement_penalty", "done_prob_scale"):
        if old.get(key) != meta.get(key):
            raise ValueError(
                f"{model_dir} was trained with {key}={old.get(key)!r}, this run asks for "
                f"{meta.get(key)!r}: keep the same dream to resume, or use another --model_dir."
            )


def _resumable_state(model_dir: str, cfg: CmaConfig, meta: dict, input_size: int) -> dict:
    """The saved state of `model_dir` if it trains the same controller, else a new one."""
    state = cma_state.load_state(model_dir)
    n = meta["num_params"]
    if state is None:
        x0 = None
        if cfg.initial_params:
            x0 = saved.load_initial_params(cfg.initial_params, meta)
            meta = dict(meta, initial_params=os.path.abspath(cfg.initial_params))
            log.info("CMA-ES starts at the parameters of %s.", cfg.initial_params)
        return cma_state.new_state(n, cfg.sigma, cfg.population_size, cfg.seed, meta, x0=x0)
    old = state["meta"]
    if old["num_params"] != n or old["controller"] != meta["controller"]:
        raise ValueError(
            f"{model_dir} holds a {old['controller']} with {old['num_params']} parameters "
            f"(input size {old['input_size']}), but this run builds a {meta['controller']} "
            f"with {n} (input size {input_size}): use another --model_dir."
        )
    if state["population_size"] != cfg.population_size:
        raise ValueError(
            f"{model_dir} was trained with population size {state['population_size']}, "
            f"not {cfg.population_size}: keep --cma_population_size to resume."
        )
    log.info("Resuming %s at generation %d.", model_dir, state["generation"])
    if cfg.initial_params:
        log.info("--initial_params is not used: the checkpoint holds CMA-ES's mean.")
    return state


def run_cma_es(
    spec: AgentSpec,
    model_dir: str,
    cma_config: CmaConfig,
    pool: PoolConfig | None = None,
    make_env: Callable | None = None,
    dream_initial_seeds=None,
    hparams: dict | None = None,
    real_evaluator: RealEvaluator | None = None,
    dream_ensemble: dict | None = None,
) -> TrainingResult:
    """Runs (or resumes) CMA-ES training of `spec`'s controller; see the module docstring.

    Args:
      spec: what to build (environment, encoder, sequential model, controller).
      model_dir: output directory; an existing checkpoint there is resumed.
      cma_config, pool: see `CmaConfig`, `PoolConfig`.
      make_env: environment constructor (default `spec.env.make_fn()`).
      dream_initial_seeds: reset seeds of the dream's initial frames (default: derived).
      hparams: flags to show in TensorBoard's text tab (default: the configs).
      real_evaluator: an existing pool for real episodes (kept open); default: one is built
        from `pool` and closed at the end.
      dream_ensemble: {name: loader} of more sequential models the dream averages with
        `spec`'s (mode "dream"; `cfg.dream_disagreement_penalty`, rl755.controller.dream_eval;
        `resolve.ensemble_model_fns`). A resumed run must keep the same ensemble.
    Returns:
      A `TrainingResult` (`result.generation`, `result.best_params` [N], ...).
    """
    import dataclasses

    import tensorflow as tf

    cfg = cma_config
    cfg.validate()
    pool = pool or PoolConfig()
    env = spec.env
    make_env = make_env or env.make_fn()

    # Build and size-check everything before any rollout.
    encoder, seq = spec.build_models()
    controller = spec.build_controller(encoder, seq)
    if cfg.mode == "dream":
        check_dream_model(
            spec.sequential_model_name, encoder, seq, cfg.temperature, cfg.rollout_max_steps
        )
    meta = saved.controller_meta(spec, controller)
    dream = cfg.mode == "dream"
    meta.update(
        mode=cfg.mode,
        temperature=cfg.temperature if dream else None,
        done_threshold=cfg.done_threshold if dream else None,
    )
    if cfg.done_prob_scale != 1.0:  # recorded only when used: older runs resume as before
        meta.update(done_prob_scale=cfg.done_prob_scale)
    dream_ensemble = dict(dream_ensemble or {})
    check_disagreement_penalty(cfg.dream_disagreement_penalty, dream_ensemble)
    if dream_ensemble:
        if not dream:
            raise ValueError("A dream ensemble (--dream_ensemble) needs --mode=dream.")
        meta.update(
            dream_ensemble=sorted(dream_ensemble),
            dream_disagreement_penalty=cfg.dream_disagreement_penalty,
        )

    os.makedirs(model_dir, exist_ok=True)
    state = _resumable_state(model_dir, cfg, meta, controller.input_size)
    _check_same_dream(model_dir, state["meta"], meta)
    es = state["es"]
    start = state["generation"]
    log.info(cma_state.describe_covariance(meta["num_params"], state["meta"]["cma_covariance"]))
    if start >= cfg.generations:
        log.info("%s already has %d generations (asked: %d).", model_dir, start, cfg.generations)

    logs = TrainingLogs(model_dir)
    if start < cfg.generations:
        logs.hparams(hparams or {**dataclasses.asdict(cfg), **dataclasses.asdict(pool)}, step=start)
    candidates.check_eval_place(model_dir, state, cfg)
    need_real = cfg.mode == "real" or (cfg.eval_every > 0 and cfg.eval_in == "real")
    real = real_evaluator
    dream = None
    try:
        selects = start >= cfg.generations and candidates.needs_selection(state, cfg)
        if need_real and (start < cfg.generations or selects) and real is None:
            real = RealEvaluator(spec, make_env, **pool.evaluator_kwargs())
        if cfg.mode == "dream" and (
            start < cfg.generations or (selects and cfg.eval_in == "dream")
        ):
            init_seeds = (
                derived_seeds(cfg.seed, 3, n=cfg.dream_initial_states)
                if dream_initial_seeds is None
                else np.asarray(dream_initial_seeds)
            )

            def encode(frames):
                return encoder.compute_full_representation(tf.constant(frames))[0].numpy()

            z0 = encoded_initial_states(make_env, encode, init_seeds)
            members = tuple(dream_ensemble[name]() for name in sorted(dream_ensemble))
            for name, member in zip(sorted(dream_ensemble), members):
                check_dream_model(name, encoder, member, cfg.temperature, cfg.rollout_max_steps)
            if members:
                log.info(
                    "The dream averages %d models (%s and %s); reward = mean - %g x std.",
                    len(members) + 1,
                    spec.sequential_model_name,
                    ", ".join(sorted(dream_ensemble)),
                    cfg.dream_disagreement_penalty,
                )
            dream = DreamEvaluator(
                seq,
                controller,
                z0,
                cfg.rollout_max_steps,
                cfg.temperature,
                spec.action_fn,
                cell_state=spec.cell_state,
                done_threshold=cfg.done_threshold,
                done_prob_scale=cfg.done_prob_scale,
                ensemble=members,
                disagreement_penalty=cfg.dream_disagreement_penalty,
            )

        for gen in range(start, cfg.generations):
            t0 = time.monotonic()
            cma_state.seed_generation(es, int(derived_seeds(cfg.seed, 4, gen, n=1)[0]))
            solutions = es.ask()
            params = np.asarray(solutions, np.float32)  # [P, N]
            if cfg.mode == "real":
                seeds = trial_seeds(cfg.seed, gen, cfg.trials_per_member)
                jobs = np.repeat(params, cfg.trials_per_member, axis=0)  # [P * T, N]
                out = real.evaluate(
                    jobs, np.tile(seeds, cfg.population_size), cfg.rollout_max_steps
                )
            else:
                rng = np.random.default_rng(derived_seeds(cfg.seed, 5, gen, n=1)[0])
                k = len(dream.initial_z)
                ids = rng.choice(k, cfg.trials_per_member, replace=k < cfg.trials_per_member)
                out = dream.evaluate(params, ids, seed=int(derived_seeds(cfg.seed, 6, gen, n=1)[0]))
            returns = np.asarray(out["returns"]).reshape(cfg.population_size, -1)  # [P, T]
            total_steps = int(np.sum(out["steps"]))
            fitness = returns.mean(axis=1)  # [P]
            es.tell(solutions, (-fitness).tolist())
            elapsed = time.monotonic() - t0
            best = int(np.argmax(fitness))
            if fitness[best] > state["best_fitness"]:
                state["best_fitness"] = float(fitness[best])
                state["best_params"] = np.asarray(solutions[best], np.float64)
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
            if dream_ensemble:  # how much the members disagree where this population drives
                record["reward_std"] = float(np.mean(out["reward_std"]))
            state["history"].append(record)
            where = "env" if cfg.mode == "real" else "dream"
            logs.scalars(
                "train",
                gen + 1,
                {
                    "fitness/mean": record["mean"],
                    "fitness/best": record["best"],
                    "fitness/worst": record["worst"],
                    "cma/sigma": record["sigma"],
                    f"perf/{where}_steps_per_second": record["steps_per_s"],
                    **(
                        {"fitness/ensemble_reward_std": record["reward_std"]}
                        if dream_ensemble
                        else {}
                    ),
                },
            )
            if cfg.evaluates_at(gen + 1):
                to_evaluate = {"best_member": solutions[best], "cma_mean": np.array(es.mean)}
                play = candidates.player(cfg, real, dream)
                best_member, cma_mean = candidates.evaluate_candidates(
                    play, cfg, to_evaluate, record
                )
                state["evals"] += [best_member, cma_mean]
                where = cfg.eval_in
                scalars = {
                    f"eval/{where}_mean": best_member["mean"],
                    f"eval/{where}_std": best_member["std"],
                    f"eval/cma_mean_{where}_mean": cma_mean["mean"],
                }
                if cfg.mode == "dream" and where == "real":
                    scalars["eval/dream_to_real_gap"] = record["best"] - best_member["mean"]
                logs.scalars("validation", gen + 1, scalars)
            logs.flush()
            state["generation"] = gen + 1
            cma_state.save_state(model_dir, state, cfg.keep_checkpoints)
            saved.save_trained_controller(model_dir, state)
            cma_state.plot_learning_curve(
                os.path.join(model_dir, CURVE),
                state["history"],
                state["evals"],
                f"{meta['controller']} on {env.name} ({cfg.mode})",
                steps_name="environment steps" if cfg.mode == "real" else "dream steps",
            )
            log.info(
                "Generation %d/%d: fitness mean %.2f best %.2f worst %.2f; %d steps, %.0f steps/s%s.",
                gen + 1,
                cfg.generations,
                record["mean"],
                record["best"],
                record["worst"],
                total_steps,
                record["steps_per_s"],
                (
                    f"; the members' rewards differ by {record['reward_std']:.3f} a step (std)"
                    if dream_ensemble
                    else ""
                ),
            )
        if candidates.needs_selection(state, cfg):
            state["selection"] = candidates.select_controller(
                candidates.player(cfg, real, dream), cfg, state
            )
            cma_state.save_selection(model_dir, state["selection"])
            saved.save_trained_controller(model_dir, state)
    finally:
        if real is not None and real is not real_evaluator:
            real.close()
        logs.close()
    cma_state.write_summary(model_dir, state)
    return TrainingResult(
        generation=state["generation"],
        best_fitness=state["best_fitness"],
        best_params=state["best_params"],
        history=state["history"],
        evals=state["evals"],
        selection=state.get("selection"),
        model_dir=model_dir,
        es=es,
    )


def train_controller(
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
    cell_state: bool = False,
    dream_ensemble: tuple[str, ...] = (),
    dream_ensemble_dirs: tuple[str, ...] = (),
    cma_config: CmaConfig,
    pool: PoolConfig,
    run_flags: dict | None = None,
    deterministic: bool | None = None,
) -> TrainingResult:
    """What scripts/models/train_controller.py runs: resolves names (failing fast), records
    the run in <model_dir>/runs/, then `run_cma_es`. `run_flags` go into the run record and
    TensorBoard (default: the configs). `deterministic`: `rl755.common.determinism.configure`
    with `cma_config.seed` (None: on without a GPU); the evaluation workers inherit it.
    `dream_ensemble` (zoo names) and `dream_ensemble_dirs` (training dirs): more sequential
    models for the dream (`run_cma_es`'s `dream_ensemble`). Returns `run_cma_es`'s
    `TrainingResult`."""
    from rl755.common import determinism, run_record
    from rl755.controller.resolve import ensemble_model_fns, make_agent_spec

    cma_config.validate()
    determinism.configure(cma_config.seed, deterministic)
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
        cell_state=cell_state,
    )
    ensemble = ensemble_model_fns(environment, dream_ensemble, dream_ensemble_dirs)
    flags = dict(run_flags or {})
    with run_record.record_run(model_dir, flags, stage="train_controller"):
        return run_cma_es(
            spec, model_dir, cma_config, pool, hparams=flags or None, dream_ensemble=ensemble
        )
