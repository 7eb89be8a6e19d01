"""The state of a CMA-ES controller training run, and how it is saved (rl755.controller.cma_train).

The state is a dict (what `rl755.controller.saved.select_params` reads):

    generation       generations done
    es               the `cma.CMAEvolutionStrategy` (mean, covariance, step size, counters)
    meta             the controller's description (`saved.controller_meta`)
    population_size  P
    best_params      float64 [N]: the best member seen by training fitness (None before any)
    best_fitness     its fitness
    history          one record per generation {"generation", "mean", "best", "worst",
                     "steps", "seconds", "steps_per_s", "sigma"}
    evals            one record per evaluation of a candidate {"generation",
                     "candidate" ("best_member" or "cma_mean"), "where" ("real" or
                     "dream"; absent: real), "mean", "std",
                     "train_fitness", "params" float64 [N]}
    selection        None, or the final selection of the run's generation count (written by
                     `cma_train.select_controller` to `SELECTION`): {"generation", "episodes",
                     "top", "where", "seeds", "candidates": [{"generation", "candidate", "eval_mean",
                     "mean", "std", "returns"}]}; the saved controller is its best candidate
                     while the run has that many generations

Saved after every generation as a checkpoint of rl755.common.checkpoints (the newest
`KEEP_CHECKPOINTS` are kept):

    model-007.json        marker: step (= generation), generation, meta, population_size,
                          best_fitness, history, evals (without params)
    model-007.cma.pkl     the pickled CMAEvolutionStrategy, without what can be recomputed
    model-007.params.npz  best_params [N], eval_params [E, N]

so a resumed run continues with the same CMA-ES state, exactly.

Size. Up to `FULL_COVARIANCE_MAX_PARAMS` parameters CMA-ES keeps a full N x N covariance C
(the paper's controllers: 867 for CarRacing, 1,731 for DoomTakeCover's 3 one-hot actions);
above it, diagonal (separable) CMA-ES: a full C and its eigenvectors are 2 N^2 floats
(hundreds of MB at N = 5,000), sampling and updating them costs O(N^2) to O(N^3) per
generation, and C adapts on a time scale of ~N^2 / P generations anyway. `meta["cma_covariance"]`
(controller.json) says which. A full-covariance checkpoint stores C but not its eigen
decomposition B, D (`checkpoint_es`): every save is followed by a fresh decomposition of C in the
running process (`refresh_decomposition`), and a load repeats exactly that, so both continue
from identical B and D. A checkpoint is therefore ~8 N^2 bytes (full) or ~P x N x 16 bytes
(diagonal).
"""

from __future__ import annotations

import json
import logging
import os
import pickle

import numpy as np

from rl755.common import checkpoints, pictures, sharded_io

log = logging.getLogger(__name__)

KEEP_CHECKPOINTS = 2
OLD_FORMAT_FILE = "checkpoint.pkl"  # the trainer's single pickle before the common format
SUMMARY = "summary.json"
SELECTION = "selection.json"  # the final selection (cma_train.select_controller)
FULL_COVARIANCE_MAX_PARAMS = 2_000  # above this, diagonal CMA-ES (see the module docstring)


def covariance_kind(num_params: int) -> str:
    """ "full" up to FULL_COVARIANCE_MAX_PARAMS parameters, else "diagonal"."""
    return "full" if num_params <= FULL_COVARIANCE_MAX_PARAMS else "diagonal"


def describe_covariance(num_params: int, kind: str | None = None) -> str:
    """One log line saying which CMA-ES runs (`kind`, default `covariance_kind`), and why."""
    if (kind or covariance_kind(num_params)) == "full":
        return f"CMA-ES with a full covariance matrix ({num_params} parameters)."
    return (
        f"{num_params} parameters > {FULL_COVARIANCE_MAX_PARAMS}: diagonal (separable) CMA-ES "
        f"(a full covariance would hold {num_params}^2 floats and adapt over ~N^2/P "
        "generations); controller.json records cma_covariance=diagonal."
    )


def _is_full(es) -> bool:
    import cma

    return isinstance(es.sm, cma.sampler.GaussFullSampler)


def refresh_decomposition(es) -> None:
    """Eigen-decomposes the current covariance now (O(N^3)), as `load_es` does after a load."""
    if _is_full(es):
        es.sm.update_now(-1)  # < 0: even if CMA-ES's lazy schedule would wait
        es._updateBDfromSM()


def checkpoint_es(es, path: str) -> None:
    """Pickles `es` without its eigen decomposition (B: N x N), then refreshes the live
    decomposition so the running process and a resumed one continue identically."""
    if not _is_full(es):
        with open(path, "wb") as f:
            pickle.dump(es, f)
        return
    kept = es.sm.B, es.B, es.sm._inverse_root_C
    es.sm.B = es.B = es.sm._inverse_root_C = None
    try:
        with open(path, "wb") as f:
            pickle.dump(es, f)
    finally:
        es.sm.B, es.B, es.sm._inverse_root_C = kept
    refresh_decomposition(es)


def load_es(path: str):
    """The CMAEvolutionStrategy of `checkpoint_es`, its decomposition recomputed."""
    with open(path, "rb") as f:
        es = pickle.load(f)
    refresh_decomposition(es)
    return es


def seed_generation(es, seed: int) -> None:
    """Makes `es`'s next `ask()` draw its normal samples from a generator seeded by `seed`.

    cma draws them through the randn its sampler (`es.sm`) captured when it was built:
    numpy's global `np.random.randn` unless told otherwise, and `es.opts["randn"]` is not
    consulted again. With the global stream, generation g depended on whatever else in the
    process had drawn from numpy's global RandomState, and a resumed run drew from the copy
    of it that the checkpoint had pickled: resumed runs left the uninterrupted one after a
    generation or two. Call this before every `ask()` (`cma_train.run_cma_es` seeds
    generation g by (seed, g)).
    """
    randn = np.random.RandomState(seed).randn
    es.opts["randn"] = randn
    if hasattr(es.sm, "randn"):
        es.sm.randn = randn


def new_state(
    num_params: int,
    sigma: float,
    population_size: int,
    seed: int,
    meta: dict,
    x0: np.ndarray | None = None,
):
    """A fresh state: CMA-ES at `x0` [N] (default 0) with step size `sigma`."""
    import cma

    x0 = np.zeros(num_params) if x0 is None else np.array(x0, np.float64)
    if x0.shape != (num_params,):
        raise ValueError(f"x0 has shape {x0.shape}; the controller has {num_params} parameters.")

    options = {"popsize": population_size, "seed": seed + 1, "verbose": -9}
    if covariance_kind(num_params) == "diagonal":
        options["CMA_diagonal"] = True
    return {
        "generation": 0,
        "es": cma.CMAEvolutionStrategy(x0, sigma, options),
        "meta": dict(meta, cma_covariance=covariance_kind(num_params)),
        "population_size": population_size,
        "best_params": None,
        "best_fitness": -np.inf,
        "history": [],
        "evals": [],
        "selection": None,
    }


def save_state(model_dir: str, state: dict) -> checkpoints.Checkpoint:
    """Checkpoint number `generation` (see the module docstring); older ones are removed."""
    n = int(state["meta"]["num_params"])

    def write_es(path: str) -> None:
        checkpoint_es(state["es"], path)

    def write_params(path: str) -> None:
        best = state["best_params"]
        evals = [np.asarray(e["params"], np.float64) for e in state["evals"]]
        with open(path, "wb") as f:
            np.savez(
                f,
                best_params=np.zeros(0) if best is None else np.asarray(best, np.float64),
                eval_params=np.stack(evals) if evals else np.zeros((0, n)),
            )

    info = {
        "step": int(state["generation"]),
        "generation": int(state["generation"]),
        "meta": state["meta"],
        "population_size": int(state["population_size"]),
        "best_fitness": float(state["best_fitness"]),
        "history": state["history"],
        "evals": [{k: v for k, v in e.items() if k != "params"} for e in state["evals"]],
    }
    files = {"cma_state": (".cma.pkl", write_es), "params": (".params.npz", write_params)}
    ckpt = checkpoints.write_checkpoint(model_dir, int(state["generation"]), files, info)
    checkpoints.remove_older_checkpoints(model_dir, KEEP_CHECKPOINTS)
    return ckpt


def load_state(model_dir: str) -> dict | None:
    """The state of the newest complete checkpoint in `model_dir`, or None."""
    ckpt = checkpoints.newest_complete_checkpoint(model_dir)
    if ckpt is None:
        if os.path.exists(os.path.join(model_dir, OLD_FORMAT_FILE)):
            raise ValueError(
                f"{model_dir} holds a CMA-ES checkpoint of the old format ({OLD_FORMAT_FILE}), "
                "which this version does not resume. Its trained controller (controller.json + "
                "controller_params.npy) still loads; to train further, use another --model_dir."
            )
        return None
    es = load_es(ckpt.path("cma_state"))
    with np.load(ckpt.path("params")) as data:
        best = data["best_params"]
        eval_params = data["eval_params"]
    info = ckpt.info
    evals = [dict(e, params=np.asarray(p)) for e, p in zip(info["evals"], eval_params)]
    return {
        "generation": int(info["generation"]),
        "es": es,
        "meta": dict(info["meta"], cma_covariance="full" if _is_full(es) else "diagonal"),
        "population_size": int(info["population_size"]),
        "best_params": best if best.size else None,
        "best_fitness": float(info["best_fitness"]),
        "history": list(info["history"]),
        "evals": evals,
        "selection": load_selection(model_dir),
    }


def load_selection(model_dir: str) -> dict | None:
    """The run's final selection (`SELECTION`), or None."""
    path = os.path.join(model_dir, SELECTION)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def save_selection(model_dir: str, selection: dict) -> None:
    sharded_io.write_json_atomic(os.path.join(model_dir, SELECTION), selection)


def write_summary(model_dir: str, state: dict) -> None:
    """<model_dir>/summary.json: generations, best fitness, history, evaluations."""
    sharded_io.write_json_atomic(
        os.path.join(model_dir, SUMMARY),
        {
            "generation": state["generation"],
            "best_fitness": state["best_fitness"],
            "history": state["history"],
            "evals": [{k: v for k, v in e.items() if k != "params"} for e in state["evals"]],
            "selection": state.get("selection"),
        },
    )


def compute_used(history: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative steps and hours [G] after each generation of `history`: the population's
    episodes plus any real evaluation run after it (its `eval_steps`, `eval_seconds`)."""
    steps = np.cumsum([h["steps"] + h.get("eval_steps", 0) for h in history])
    seconds = np.cumsum([h["seconds"] + h.get("eval_seconds", 0.0) for h in history])
    return steps, seconds / 3600.0


def plot_learning_curve(
    path: str,
    history: list[dict],
    evals: list[dict],
    title: str,
    steps_name: str = "environment steps",
) -> None:
    """A PNG of the population's mean, best and worst fitness and the evaluations,
    against the generation, the steps played and the hours spent (three panels)."""
    gens = [h["generation"] for h in history]
    steps, hours = compute_used(history)
    at = {g: i for i, g in enumerate(gens)}
    fig, axes = pictures.new_figure(ncols=3, figsize=(15, 4), sharey=True)
    for ax, xs, xlabel in (
        (axes[0], np.asarray(gens), "generation"),
        (axes[1], steps, f"{steps_name} (population + evaluations)"),
        (axes[2], hours, "hours of compute (population + evaluations)"),
    ):
        ax.plot(xs, [h["mean"] for h in history], label="population mean")
        ax.plot(xs, [h["best"] for h in history], label="population best")
        ax.fill_between(
            xs,
            [h["worst"] for h in history],
            [h["best"] for h in history],
            alpha=0.15,
            label="population worst to best",
        )
        for candidate, fmt, color in (("best_member", "o", "k"), ("cma_mean", "s", "tab:red")):
            points = [
                e
                for e in evals
                if e.get("candidate", "best_member") == candidate and e["generation"] in at
            ]
            if points:
                ax.errorbar(
                    [xs[at[e["generation"]]] for e in points],
                    [e["mean"] for e in points],
                    yerr=[e["std"] for e in points],
                    fmt=fmt,
                    color=color,
                    capsize=3,
                    label=f"{candidate.replace('_', ' ')}, {points[0].get('where', 'real')} episodes",
                )
        ax.set_xlabel(xlabel)
    from matplotlib.ticker import EngFormatter

    axes[1].xaxis.set_major_formatter(EngFormatter())  # 400k, 1M
    axes[0].set_ylabel("return")
    axes[0].legend(loc="best", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    pictures.figure(fig).save(path)
