"""How stage 5 plays and chooses CMA-ES candidates: evaluations during training, the final selection.

    play = candidates.player(cfg, real_evaluator, None)      # real episodes (or a DreamEvaluator)
    records = candidates.evaluate_candidates(play, cfg, {"best_member": x, "cma_mean": m}, record)
    state["selection"] = candidates.select_controller(play, cfg, state)

Every candidate of one call plays the same seeds (real) or the same dreams, so their returns
compare; the saved controller is the best evaluated one (rl755.controller.saved).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from rl755.controller.cma_config import CmaConfig, eval_seeds, selection_seeds
from rl755.controller.dream_eval import DreamEvaluator
from rl755.controller.real_eval import RealEvaluator

log = logging.getLogger(__name__)


def player(cfg: CmaConfig, real: RealEvaluator | None, dream: DreamEvaluator | None):
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


def check_eval_place(model_dir: str, state: dict, cfg: CmaConfig) -> None:
    """A resumed run keeps evaluating where it did: its evaluations are compared with each
    other to choose the saved controller."""
    places = {e.get("where", "real") for e in state["evals"]}
    if places and places != {cfg.eval_in}:
        raise ValueError(
            f"{model_dir} evaluated its candidates in {'/'.join(sorted(places))} episodes; this "
            f"run asks --eval_in={cfg.eval_in}. Keep --eval_in={places.pop()} to resume, or use "
            "another --model_dir."
        )


def needs_selection(state: dict, cfg: CmaConfig) -> bool:
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
    `selection_seeds` (`play`: `player`, real or dream), in one batch; returns the record
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


def evaluate_candidates(play, cfg: CmaConfig, candidates: dict, record) -> list:
    """Each candidate ({name: params [N]}: the generation's best member and the CMA-ES mean)
    on the fixed evaluation seeds (`play`: `player`, real or dream), in one batch; one eval
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
