"""Stage 5: train a controller with CMA-ES, in the real environment or inside the learned model.

    train_controller(environment="CAR_RACING", model_dir="runs/ctrl",
                     encoder="raw_rollout_vae_32ld", sequential_model="mdn_rnn_vae_32ld",
                     cma_config=CmaConfig(population_size=64, trials_per_member=16),
                     pool=PoolConfig(parallelism=64))          # scripts/models/train_controller.py
    summary = run_cma_es(spec, model_dir, CmaConfig(...))      # with an AgentSpec

Each generation: CMA-ES proposes `population_size` parameter vectors [P, N]; every member
runs `trials_per_member` episodes whose seeds (real mode) or initial states (dream mode)
are shared by all members of the generation; its fitness is the mean return. Then:

- TensorBoard (rl755.common.tensorboard) under `<model_dir>/tensorboard/`: train/
  fitness/{mean,best,worst}, cma/sigma, perf/{env,dream}_steps_per_second, the run's flags;
  validation/ eval/real_{mean,std} and eval/dream_to_real_gap (dream mode);
- a checkpoint (rl755.controller.cma_state: the CMA-ES state, in the format of
  rl755.common.checkpoints; full covariance up to 2,000 parameters, diagonal above, as the
  log and controller.json's "cma_covariance" say), and the trained controller
  (`controller.json` + `controller_params.npy`, see `rl755.controller.saved`);
- `<model_dir>/learning_curve.png` and `<model_dir>/summary.json`.

Every `eval_every` generations the generation's best member and the CMA-ES mean play
`eval_episodes` episodes on fixed seeds, real ones or (`eval_in="dream"`) dreams; with
`select_episodes`, the best-evaluated candidates play that many more at the end, in the same
place, and the best of them is saved (`select_controller`).
Rerunning with the same `model_dir` resumes the generation count
and CMA-ES state exactly (CMA-ES's sampling in generation g is seeded by (seed, g)).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import numpy as np

from rl755.common.tensorboard import TrainingLogs
from rl755.controller import cma_state, saved
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_config import (
    CmaConfig,
    PoolConfig,
    derived_seeds,
    eval_seeds,
    selection_seeds,
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
    """A resumed dream run keeps its dream: the same ensemble and penalty."""
    for key in ("dream_ensemble", "dream_disagreement_penalty"):
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
    _check_eval_place(model_dir, state, cfg)
    need_real = cfg.mode == "real" or (cfg.eval_every > 0 and cfg.eval_in == "real")
    real = real_evaluator
    dream = None
    try:
        selects = start >= cfg.generations and _needs_selection(state, cfg)
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
                candidates = {"best_member": solutions[best], "cma_mean": np.array(es.mean)}
                play = _player(cfg, real, dream)
                best_member, cma_mean = _evaluate_candidates(play, cfg, candidates, record)
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
            cma_state.save_state(model_dir, state)
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
        if _needs_selection(state, cfg):
            state["selection"] = select_controller(_player(cfg, real, dream), cfg, state)
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


def _player(cfg: CmaConfig, real: RealEvaluator | None, dream: DreamEvaluator | None):
    """play(params [C, N], seeds [S]) -> (returns [C, S], env or dream steps in all): every
    candidate plays an episode per seed where `cfg.eval_in` says.

    Real: the seeds are reset seeds, all candidates' episodes in one batch. Dream: seed s starts from initial state s % K (the
    training's K dream starting points) and the dreams are drawn with the dream seed
    seeds[0], so the same seeds replay the same dreams and other seeds draw others. Each
    candidate dreams in its own batch, so all of them get the same draws (as real candidates
    get the same seeds): a candidate's returns are `dream.evaluate(params[None], seeds % K,
    seed=seeds[0])`, whoever else is evaluated."""

    def play_real(params, seeds):
        ev = real.evaluate(
            np.repeat(params, len(seeds), axis=0),
            np.tile(seeds, len(params)),
            cfg.rollout_max_steps,
        )
        returns = np.asarray(ev["returns"]).reshape(len(params), len(seeds))
        return returns, int(np.sum(ev["steps"]))

    def play_dream(params, seeds):
        seeds = np.asarray(seeds, np.int64)
        ids = seeds % len(dream.initial_z)
        evs = [dream.evaluate(p[None], ids, seed=int(seeds[0])) for p in params]
        returns = np.concatenate([ev["returns"] for ev in evs])  # [C, S]
        return returns, int(sum(np.sum(ev["steps"]) for ev in evs))

    return play_dream if cfg.eval_in == "dream" else play_real


def _check_eval_place(model_dir: str, state: dict, cfg: CmaConfig) -> None:
    """A resumed run keeps evaluating where it did: its evaluations are compared with each
    other to choose the saved controller."""
    places = {e.get("where", "real") for e in state["evals"]}
    if places and places != {cfg.eval_in}:
        raise ValueError(
            f"{model_dir} evaluated its candidates in {'/'.join(sorted(places))} episodes; this "
            f"run asks --eval_in={cfg.eval_in}. Keep --eval_in={places.pop()} to resume, or use "
            "another --model_dir."
        )


def _needs_selection(state: dict, cfg: CmaConfig) -> bool:
    """Whether the run is at its generation count with evaluations and without the final
    selection these settings ask for (a rerun of a finished run only adds a missing one)."""
    if not cfg.select_episodes or not state["evals"] or state["generation"] < cfg.generations:
        return False
    done = state.get("selection") or {}
    asked = (state["generation"], cfg.select_episodes, cfg.select_top, cfg.seed)
    return (
        done.get("generation"),
        done.get("episodes"),
        done.get("top"),
        done.get("seed"),
    ) != asked


def select_controller(play, cfg: CmaConfig, state: dict) -> dict:
    """The final selection (`CmaConfig.select_episodes`): the `select_top` evaluated
    candidates with the best evaluation means each play `select_episodes` episodes on
    `selection_seeds` (`play`: `_player`, real or dream), in one batch; returns the record
    `cma_state` describes."""
    top = sorted(state["evals"], key=lambda e: e["mean"], reverse=True)[: cfg.select_top]
    seeds = selection_seeds(cfg.seed, cfg.select_episodes)
    where = cfg.eval_in
    log.info(
        "Selection: the %d best-evaluated candidates play %d more %s episodes each.",
        len(top),
        len(seeds),
        where,
    )
    params = np.stack([np.asarray(e["params"], np.float32) for e in top])  # [K, N]
    returns, steps = play(params, seeds)  # [K, S]
    candidates = []
    for e, row in zip(top, returns):
        candidates.append(
            {
                "generation": e["generation"],
                "candidate": e["candidate"],
                "eval_mean": e["mean"],
                "mean": float(np.mean(row)),
                "std": float(np.std(row)),
                "returns": row.tolist(),
            }
        )
        log.info(
            "Selection: generation %d %s: %.2f +- %.2f over %d new %s episodes (evaluation: %.2f).",
            e["generation"],
            e["candidate"].replace("_", " "),
            candidates[-1]["mean"],
            candidates[-1]["std"],
            len(seeds),
            where,
            e["mean"],
        )
    return {
        "generation": state["generation"],
        "episodes": cfg.select_episodes,
        "top": cfg.select_top,
        "seed": cfg.seed,
        "where": where,
        "seeds": seeds.tolist(),
        "steps": steps,
        "candidates": candidates,
    }


def _evaluate_candidates(play, cfg: CmaConfig, candidates: dict, record) -> list:
    """Each candidate ({name: params [N]}: the generation's best member and the CMA-ES mean)
    on the fixed evaluation seeds (`play`: `_player`, real or dream), in one batch; one eval
    record per candidate.

    The mean is a candidate because with few noisy trials the best member's fitness is
    partly luck (winner's curse), while the mean averages the population's information."""
    ev_seeds = eval_seeds(cfg.seed, cfg.eval_episodes)
    t0 = time.monotonic()
    names = list(candidates)
    params = np.stack([np.asarray(candidates[n], np.float32) for n in names])  # [C, N]
    returns, steps = play(params, ev_seeds)  # [C, E]
    # The evaluation's steps and time count in the run's compute (learning curve).
    record["eval_steps"] = steps
    record["eval_seconds"] = time.monotonic() - t0
    out = []
    for name, row in zip(names, returns):
        out.append(
            {
                "generation": record["generation"],
                "candidate": name,
                "where": cfg.eval_in,
                "mean": float(np.mean(row)),
                "std": float(np.std(row)),
                "train_fitness": record["best"],
                "params": np.asarray(candidates[name], np.float64),
            }
        )
        log.info(
            "Generation %d: %s scores %.2f +- %.2f over %d %s episodes.",
            record["generation"],
            name.replace("_", " "),
            out[-1]["mean"],
            out[-1]["std"],
            len(ev_seeds),
            cfg.eval_in,
        )
    return out


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
