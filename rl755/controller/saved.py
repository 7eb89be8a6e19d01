"""Trained controllers on disk, and loading them back.

A controller model directory (written by `cma_train.run_cma_es` every generation):

    controller.json          {"environment", "controller", "controller_kwargs", "input_size",
                              "action_size", "num_params", "encoder", "sequential_model",
                              "generation", "score", "score_source", "mode" (real or dream),
                              "temperature" (dream), "cma_covariance" (full or diagonal)}
    controller_params.npy    float64 [N], the selected parameters: the best of the final
                             selection (--select_episodes) if one was run, else the best
                             candidate by evaluation (--eval_in) if any was run, else the best member
                             by training fitness (`select_params`)
    model-NNN.json, ...      CMA-ES state (for resuming), see cma_state

    trained = load_trained_controller(model_dir)
    trained.controller.act(trained.params[None], features[None])   # [1, B, D] -> [1, B, A]
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from rl755.common import sharded_io
from rl755.controller import networks as controllers_lib
from rl755.environments import Environments

META_FILE = "controller.json"
PARAMS_FILE = "controller_params.npy"


def controller_meta(spec, controller) -> dict:
    """The description saved next to the parameters (spec: agent.AgentSpec)."""
    kwargs = dict(spec.controller_kwargs)
    kwargs.update(controller.config())
    return {
        "environment": spec.environment,
        "controller": type(controller).__name__,
        "controller_kwargs": kwargs,
        "input_size": controller.input_size,
        "action_size": controller.action_size,
        "num_params": controller.num_params,
        "encoder": spec.encoder_name,
        "sequential_model": spec.sequential_model_name,
        "cell_state": bool(spec.cell_state),
    }


def select_params(ckpt: dict) -> tuple[np.ndarray, float, str, int]:
    """(params, score, source, generation) of the controller to use from a checkpoint dict:
    the best of the final selection when it is of the run's generation count (cma_state), else
    the best evaluation (source "real_evaluation" or "dream_evaluation"), else the best member
    by training fitness."""
    selection = ckpt.get("selection")
    if selection and selection["generation"] == ckpt["generation"]:
        best = max(selection["candidates"], key=lambda c: c["mean"])
        (params,) = [
            e["params"]
            for e in ckpt["evals"]
            if (e["generation"], e["candidate"]) == (best["generation"], best["candidate"])
        ]
        return params, best["mean"], "selection", best["generation"]
    if ckpt.get("evals"):
        best = max(ckpt["evals"], key=lambda e: e["mean"])
        source = f"{best.get('where', 'real')}_evaluation"
        return best["params"], best["mean"], source, best["generation"]
    gen = max(
        (h for h in ckpt["history"] if h["best"] == ckpt["best_fitness"]),
        key=lambda h: h["generation"],
        default={"generation": ckpt["generation"]},
    )["generation"]
    return ckpt["best_params"], ckpt["best_fitness"], "training_fitness", gen


def save_trained_controller(model_dir: str, ckpt: dict) -> None:
    """Writes controller.json + controller_params.npy atomically (params first)."""
    params, score, source, generation = select_params(ckpt)
    with sharded_io.atomic_output(os.path.join(model_dir, PARAMS_FILE)) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(params, np.float64))
    meta = dict(ckpt["meta"], generation=int(generation), score=float(score), score_source=source)
    sharded_io.write_json_atomic(os.path.join(model_dir, META_FILE), meta)


def load_initial_params(path: str, meta: dict) -> np.ndarray:
    """The parameters [N] a new CMA-ES run starts from (`--initial_params`): a
    `controller_params.npy`, or a controller model_dir holding one. When a `controller.json` lies
    beside it, its controller and input and action sizes must be this run's (`meta`:
    `controller_meta`); the parameter count always must."""
    path = os.path.expanduser(str(path))
    file = os.path.join(path, PARAMS_FILE) if os.path.isdir(path) else path
    if not os.path.isfile(file):
        raise FileNotFoundError(
            f"--initial_params={path}: no {PARAMS_FILE} there. Give a trained controller's "
            f"model_dir (or its {PARAMS_FILE}), e.g. rl755/zoo/shipped/<env>/<controller>."
        )
    try:
        params = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"--initial_params: {file} is not a readable .npy file ({e}).") from e
    meta_file = os.path.join(os.path.dirname(file), META_FILE)
    if os.path.exists(meta_file):
        with open(meta_file) as f:
            theirs = json.load(f)
        for key in ("controller", "input_size", "action_size"):
            if theirs.get(key) != meta[key]:
                raise ValueError(
                    f"--initial_params: {meta_file} has {key}={theirs.get(key)!r}, this run "
                    f"builds {key}={meta[key]!r}: start from a controller of the same shape "
                    "(the same controller, encoder and sequential model sizes)."
                )
    if params.shape != (meta["num_params"],):
        raise ValueError(
            f"--initial_params: {file} holds {params.shape} parameters; this run's "
            f"{meta['controller']} (input size {meta['input_size']}) has "
            f"({meta['num_params']},)."
        )
    return params.astype(np.float64)


@dataclasses.dataclass
class TrainedController:
    """A controller and its parameters [N], plus the names it was trained with (`meta`).

    `zoo_source` is set when the zoo loaded it: "trained" (the user's models dir) or "shipped"
    (the copy in the repository, whose encoder and sequential model are then the shipped ones
    too, see rl755.controller.resolve.spec_for_trained)."""

    controller: controllers_lib.Controller
    params: np.ndarray
    meta: dict
    model_dir: str | None = None
    zoo_source: str | None = None

    @property
    def environment(self) -> Environments:
        return Environments.from_name(self.meta["environment"])


def saved_controller_kwargs(meta: dict) -> dict:
    """The constructor arguments a saved controller was trained with (`meta`: its
    controller.json). Controllers saved before `action_squash` was recorded squashed every
    dimension "scaled"; they keep doing so whatever their environment's default is now."""
    kwargs = dict(meta["controller_kwargs"])
    kwargs["action_squash"] = tuple(
        kwargs.get("action_squash") or ("scaled",) * int(meta["action_size"])
    )
    return kwargs


def load_trained_controller(model_dir: str, how_to_train: str | None = None) -> TrainedController:
    """Reads a controller model directory; fails clearly (with `how_to_train`) if it is not one."""
    model_dir = os.path.expanduser(str(model_dir))
    meta_path = os.path.join(model_dir, META_FILE)
    params_path = os.path.join(model_dir, PARAMS_FILE)
    if not (os.path.exists(meta_path) and os.path.exists(params_path)):
        raise FileNotFoundError(
            f"{model_dir} holds no trained controller ({META_FILE} + {PARAMS_FILE}). Train one "
            f"with: {how_to_train or 'python scripts/models/train_controller.py --model_dir=...'}"
        )
    with open(meta_path) as f:
        meta = json.load(f)
    params = np.load(params_path)
    env = Environments.from_name(meta["environment"])
    controller = controllers_lib.make_controller(
        meta["controller"], meta["input_size"], environment=env, **saved_controller_kwargs(meta)
    )
    if params.shape != (controller.num_params,):
        raise ValueError(
            f"{params_path} holds {params.shape} parameters but {meta['controller']} with input "
            f"size {meta['input_size']} needs ({controller.num_params},)."
        )
    return TrainedController(controller, params, meta, model_dir)
