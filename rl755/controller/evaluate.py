"""Evaluating a trained controller on fixed-seed real episodes: JSON + one GIF.

    result = evaluate_controller(controller_dir="runs/ctrl", num_episodes=100, seed=0)
    result = score_controller(params, spec, num_episodes=100, seed=0, out_dir=...)
    result.mean, result.std, result.returns    # an EvaluationResult (rl755.controller.results)
    # <out_dir>/evaluation.json: {"mean", "std", "returns" [E], "steps" [E], "seeds" [E], ...,
    #                             "random_policy": {...} (compare_random=True)}
    # <out_dir>/episode.gif: episode 0 (seed `seed`), frames as the environment returned them

Episode i uses reset seed `seed + i`; the random policy (uniform over the action box, its
sampler seeded with the same seed) plays the same seeds for comparison.

Resumable: after every batch of `envs_at_once` episodes the returns so far go to
<out_dir>/evaluation.progress.json, and a rerun of the same evaluation (same environment,
controller, parameters, models, seeds, step limit, batch) goes on from there; a rerun of a
finished one returns its evaluation.json without playing. Episodes are independent (each its
own reset seed), so a resumed evaluation equals an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable

import numpy as np

from rl755.common import pictures, sharded_io
from rl755.controller.agent import AgentSpec, run_episodes
from rl755.controller.results import EvaluationResult

log = logging.getLogger(__name__)


def policy_returns(make_env: Callable, seeds, max_steps: int, action=None) -> dict:
    """A fixed policy on the given seeds: {"returns" [E], "steps" [E]}.

    `action` (a stored action [A], e.g. one-hot for discrete environments) is held every step;
    None plays uniform random actions, the sampler seeded with each episode's seed.
    """
    env = make_env()
    returns, steps = [], []
    try:
        for s in seeds:
            env.reset(seed=int(s))
            env.action_space.seed(int(s))
            total, n = 0.0, 0
            for _ in range(max_steps):
                a = env.action_space.sample() if action is None else action
                _, r, terminated, truncated, _ = env.step(a)
                total += r
                n += 1
                if terminated or truncated:
                    break
            returns.append(total)
            steps.append(n)
    finally:
        env.close()
    return {"returns": np.asarray(returns), "steps": np.asarray(steps)}


def random_policy_returns(make_env: Callable, seeds, max_steps: int) -> dict:
    """Uniform random actions on the given seeds: {"returns" [E], "steps" [E]}."""
    return policy_returns(make_env, seeds, max_steps)


def stats(returns) -> dict:
    """{"mean", "std", "min", "max"} of episode returns."""
    returns = np.asarray(returns, np.float64)
    return {
        "mean": float(returns.mean()),
        "std": float(returns.std()),
        "min": float(returns.min()),
        "max": float(returns.max()),
    }


def save_gif(path: str, frames, fps: int = 30) -> None:
    """Writes uint8 frames [H, W, C] as a looping GIF, atomically."""
    pictures.animation(frames, fps=fps, scale=1).save(path)


def checked_params(agent, params, spec: AgentSpec) -> np.ndarray:
    """params as float32 [N], or a ValueError naming both sizes."""
    params = np.asarray(params, np.float32)
    if params.shape != (agent.num_params,):
        raise ValueError(
            f"The controller has {params.shape} parameters but {spec.controller} on these models "
            f"(input size {agent.controller.input_size}) needs ({agent.num_params},)."
        )
    return params


def play_controller(
    agent, params, make_env: Callable, seeds, max_steps: int, envs_at_once: int = 4,
    record_first: bool = False, played: dict | None = None, on_batch: Callable | None = None,
) -> dict:  # fmt: skip
    """Real episodes of controller `params` [N] on `seeds` [E], `envs_at_once` stepped together.

    `played` ({"returns", "steps"} of the first seeds, a whole number of batches) resumes:
    those episodes are kept, not replayed. `on_batch(returns, steps, frames)` is called after
    every batch with everything played so far (frames: episode 0's, in the batch that plays
    it, else None).

    Returns {"returns": [E] list, "steps": [E] list, "frames": episode 0's observations (with
    `record_first` and episode 0 played here, else None)}.
    """
    returns = list((played or {}).get("returns", []))
    steps = list((played or {}).get("steps", []))
    frames = None
    todo = len(seeds) - len(returns)
    envs = [make_env() for _ in range(min(envs_at_once, todo))]
    try:
        for start in range(len(returns), len(seeds), max(len(envs), 1)):
            batch = seeds[start : start + len(envs)]
            first = start == 0 and record_first
            out = run_episodes(
                envs,
                agent,
                np.repeat(np.asarray(params, np.float32)[None], len(batch), axis=0),
                batch,
                max_steps,
                record_frames=0 if first else None,
            )
            if first:
                frames = out["frames"]
            returns.extend(out["returns"].tolist())
            steps.extend(out["steps"].tolist())
            log.info("Played %d/%d episodes.", len(returns), len(seeds))
            if on_batch is not None:
                on_batch(returns, steps, out["frames"] if first else None)
    finally:
        for env in envs:
            env.close()
    return {"returns": returns, "steps": steps, "frames": frames}


def params_sha256(params) -> str:
    """SHA-256 (hex) of parameters as float32 [N]: what an evaluation was of."""
    return hashlib.sha256(np.ascontiguousarray(params, np.float32).tobytes()).hexdigest()


def _same(record: dict | None, identity: dict) -> bool:
    return record is not None and all(record.get(k) == v for k, v in identity.items())


def spec_with_overrides(
    trained, controller_dir: str, environment=None, encoder=None, sequential_model=None
) -> tuple[dict, AgentSpec]:
    """(meta, spec) of a loaded controller: its controller.json's encoder and sequential model
    unless `encoder` / `sequential_model` (a saved_models name or "dir:<model dir>") replace
    them; a ValueError if `environment` is given and is not the controller's."""
    from rl755.controller import resolve, saved
    from rl755.environments import Environments

    if environment and Environments.from_name(environment) != trained.environment:
        raise ValueError(
            f"{controller_dir} holds a controller for {trained.environment.name}, not "
            f"{Environments.from_name(environment).name}."
        )
    meta = dict(trained.meta)
    if encoder:
        meta["encoder"] = encoder
    if sequential_model:
        meta["sequential_model"] = sequential_model
    spec = resolve.spec_for_trained(
        saved.TrainedController(
            trained.controller, trained.params, meta, zoo_source=trained.zoo_source
        )
    )
    return meta, spec


def score_controller(
    params: np.ndarray,
    spec: AgentSpec,
    num_episodes: int,
    seed: int,
    out_dir: str,
    max_steps: int | None = None,
    envs_at_once: int = 4,
    compare_random: bool = False,
    make_env: Callable | None = None,
    gif_fps: int = 30,
    extra: dict | None = None,
) -> EvaluationResult:
    """Plays `num_episodes` episodes (seeds seed, seed+1, ...) with controller `params` [N].

    Writes <out_dir>/evaluation.json and <out_dir>/episode.gif; returns what the JSON holds.
    Resumes from <out_dir>/evaluation.progress.json, or returns a finished evaluation.json of
    the same evaluation (module docstring) with `extra` updated. Raises ValueError when
    `num_episodes` < 1 or `params` do not fit the controller.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}.")
    env_enum = spec.env
    make_env = make_env or env_enum.make_fn()
    max_steps = max_steps or env_enum.max_episode_steps or 1000
    agent = spec.build()
    params = checked_params(agent, params, spec)
    seeds = np.arange(num_episodes) + int(seed)
    identity = {
        "environment": env_enum.name,
        "controller": spec.controller,
        "encoder": spec.encoder_name,
        "sequential_model": spec.sequential_model_name,
        "num_episodes": num_episodes,
        "seeds": seeds.tolist(),
        "max_steps": max_steps,
        "params_sha256": params_sha256(params),
    }
    final_path = os.path.join(out_dir, "evaluation.json")
    progress_path = os.path.join(out_dir, "evaluation.progress.json")
    gif_path = os.path.join(out_dir, "episode.gif")
    os.makedirs(out_dir, exist_ok=True)
    sharded_io.remove_stale_tmp_files(out_dir)
    done = sharded_io.read_json_or_none(final_path)
    if (
        _same(done, identity)
        and ("random_policy" in done) == bool(compare_random)
        and os.path.exists(gif_path)
    ):
        log.info(
            "%s already holds this evaluation (%d episodes); delete it to play them again.",
            final_path,
            num_episodes,
        )
        if os.path.exists(progress_path):
            os.remove(progress_path)
        return EvaluationResult.from_dict({**done, **(extra or {})})
    progress_identity = {**identity, "envs_at_once": envs_at_once}
    progress = sharded_io.read_json_or_none(progress_path)
    if not _same(progress, progress_identity) or not os.path.exists(gif_path):
        progress = {**progress_identity, "returns": [], "steps": []}
    elif progress["returns"]:
        log.info(
            "Resuming the evaluation in %s at episode %d/%d.",
            out_dir,
            len(progress["returns"]) + 1,
            num_episodes,
        )

    def on_batch(returns, steps, frames):
        if frames is not None:  # before the progress that says episode 0 was played
            save_gif(gif_path, frames, fps=gif_fps)
        progress.update(returns=list(returns), steps=list(steps))
        sharded_io.write_json_atomic(progress_path, progress)

    out = play_controller(
        agent, params, make_env, seeds, max_steps, envs_at_once, record_first=True,
        played=progress, on_batch=on_batch,
    )  # fmt: skip
    returns, steps = out["returns"], out["steps"]
    result = {**identity, "returns": returns, "steps": steps, **stats(returns), **(extra or {})}
    if compare_random:
        rnd = progress.get("random_policy")
        if rnd is None:
            r = random_policy_returns(make_env, seeds, max_steps)
            rnd = {"returns": r["returns"].tolist(), "steps": r["steps"].tolist()}
            rnd.update(stats(rnd["returns"]))
            progress["random_policy"] = rnd
            sharded_io.write_json_atomic(progress_path, progress)
        result["random_policy"] = rnd
    sharded_io.write_json_atomic(final_path, result)
    with contextlib.suppress(FileNotFoundError):
        os.remove(progress_path)
    return EvaluationResult.from_dict(result)


def evaluate_controller(
    *,
    controller_dir: str | None = None,
    saved_controller: str | None = None,
    num_episodes: int,
    seed: int,
    out_dir: str | None = None,
    environment: str | None = None,
    encoder: str | None = None,
    sequential_model: str | None = None,
    max_steps: int | None = None,
    envs_at_once: int = 4,
    compare_random: bool = False,
    run_flags: dict | None = None,
    deterministic: bool | None = None,
) -> EvaluationResult:
    """What scripts/models/evaluate_controller.py runs: loads the trained controller of
    `controller_dir` (its encoder/sequential model names come from its controller.json unless
    given), checks the environment, and evaluates it. `saved_controller` names a zoo row
    instead: the user's trained copy, else the shipped one with its shipped encoder and
    sequential model. `out_dir` defaults to `<controller dir>/evaluation`
    (`<models_dir>/<env folder>/<name>/evaluation` for a shipped controller).
    `deterministic`: `rl755.common.determinism.configure` with `seed` (None: on without a
    GPU). Returns the `EvaluationResult` that evaluation.json holds. Raises ValueError when
    neither or both of `controller_dir` and `saved_controller` are given."""
    from rl755.common import determinism, run_record

    determinism.configure(seed, deterministic)
    from rl755.controller import resolve, saved
    from rl755.environments import Environments

    if bool(controller_dir) == bool(saved_controller):
        raise ValueError(
            "Give exactly one of --model_dir (a controller dir) or --saved_controller."
        )
    default_out_dir = None
    if saved_controller:
        if not environment:
            raise ValueError("--saved_controller needs --environment.")
        row = resolve.saved_model_fn(
            Environments.from_name(environment), saved_controller, "saved_controller"
        )
        trained = row()
        controller_dir = trained.model_dir
        if trained.zoo_source == "shipped":  # never write into the repository's copy
            default_out_dir = os.path.join(row.model_dir(), "evaluation")
    else:
        trained = saved.load_trained_controller(controller_dir)
    meta, spec = spec_with_overrides(
        trained, controller_dir, environment, encoder, sequential_model
    )
    out_dir = out_dir or default_out_dir or os.path.join(controller_dir, "evaluation")
    with run_record.record_run(out_dir, dict(run_flags or {}), stage="evaluate_controller"):
        return score_controller(
            trained.params,
            spec,
            num_episodes=num_episodes,
            seed=seed,
            out_dir=out_dir,
            max_steps=max_steps,
            envs_at_once=envs_at_once,
            compare_random=compare_random,
            extra={
                "controller_dir": os.path.abspath(controller_dir),
                "controller_source": trained.zoo_source or "dir",
                "out_dir": os.path.abspath(out_dir),
                "controller_generation": meta.get("generation"),
            },
        )
