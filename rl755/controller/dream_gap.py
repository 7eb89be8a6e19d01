"""How far the dream is from the real environment: the same policies scored in both.

    gap = dream_gap(environment="DOOM_TAKE_COVER", controller_dir="runs/ctrl")  # the script's
    gap = measure_dream_gap(spec, params=None, temperature=1.15, num_episodes=100, seed=1000)
    gap["policies"]["constant:MOVE_LEFT"]     # {"dream": {"mean", "std", ...}, "real": {...},
                                              #  "ratio": dream mean / real mean}
    gap["policies"]["controller"]["real"]["end_rates"]  # ends per 100 steps, by quarter
    print(format_table(gap))

A controller trained in the dream finds whatever the model rates too highly ("the agent
exploits the model", World Models section 4.5). Scoring simple reference policies both ways
shows where the model is wrong before (or after) spending hours of CMA-ES on it:

- "random": uniform over the action box (discrete: a uniform action each step);
- discrete environments: every action held for the whole episode ("constant:<meaning>");
- continuous ones: the box's center ("constant:center") and, per action dimension, its low and
  high end with the others centered ("constant:a0_low", ...);
- "controller": the trained controller, when `params` are given.

Dream episodes start from the encoded reset frames of the same seeds the real episodes use
(episode i: seed + i) and run as in training (`DreamEvaluator`: temperature, Bernoulli episode
ends, and a controller's dream ensemble); real episodes use the environment's own rewards and
ends.

With an ensemble (`ensemble={name: loader}`, more sequential models of the same Z; by default
`dream_gap` takes the controller's own from its controller.json) the dream is the one the
controller trained in (members' mean reward minus the penalty times their std), and each
policy's dream stats also hold "members_reward_std": the members' per-step reward std,
averaged over its episodes. On CarRacing that disagreement ordered four dream-trained
controllers exactly as the real game did (experiments/car_racing/dream_iterations/README.md),
so it flags a policy the dream cannot judge without playing it for real.

Each side's stats also hold "steps" (each episode's length, for survival curves) and
"end_rates" (`dream_gap_report.end_rates`): episode ends per 100 steps lived in each quarter
of the step limit. A dream whose rate stays flat where the real one rises has not learned
that part of an episode: a DoomTakeCover MDN-RNN trained on each rollout's first 500 steps
dreamed the later game, which grows harder, far too easy.

With `real=False` only the dream is played ("real" and "ratio" are None): a quick look at a
new model, or at how `done_prob_scale` moves a controller's dream score, without the real
episodes' cost.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import tensorflow as tf

from rl755.controller.agent import AgentSpec, feature_size
from rl755.controller.dream_eval import (
    DreamEvaluator,
    check_disagreement_penalty,
    check_dream_model,
    encoded_initial_states,
)
from rl755.controller.dream_gap_report import end_rates
from rl755.controller.evaluate import (
    checked_params,
    play_controller,
    policy_returns,
    spec_with_overrides,
    stats,
)

log = logging.getLogger(__name__)


class _FixedPolicy:
    """Acts like a controller for `DreamEvaluator`: its "parameters" [P, A] are the action
    each member holds (one evaluator, one trace, for every constant policy), or, with
    `random=True`, it ignores them and acts uniformly over [low, high] each step, drawn from
    its own generator seeded by `seed` (so the same seed plays the same actions, whatever
    else the process drew before)."""

    def __init__(self, input_size: int, low, high, random: bool = False, seed: int = 0):
        self.input_size = int(input_size)
        self.low = np.asarray(low, np.float32)
        self.high = np.asarray(high, np.float32)
        self.action_size = len(self.low)
        self.random = random
        self.rng = tf.random.Generator.from_seed(int(seed)) if random else None

    def act(self, params, inputs):
        shape = tf.concat([tf.shape(inputs)[:2], [self.action_size]], axis=0)  # [P, B, A]
        if self.random:
            return self.rng.uniform(shape, self.low, self.high)
        return tf.broadcast_to(tf.cast(params, tf.float32)[:, None, :], shape)


def reference_policies(environment) -> dict[str, np.ndarray | None]:
    """Name -> constant stored action [A] (None: uniform random), see the module docstring."""
    out: dict[str, np.ndarray | None] = {"random": None}
    if environment.is_discrete:
        names = environment.spec.action_meanings or tuple(
            str(i) for i in range(environment.num_discrete_actions)
        )
        for i, name in enumerate(names):
            out[f"constant:{name}"] = np.asarray(environment.from_env_action(i), np.float32)
        return out
    low = np.asarray(environment.action_low, np.float32)
    high = np.asarray(environment.action_high, np.float32)
    center = (low + high) / 2
    out["constant:center"] = center
    for d in range(len(low)):
        for end, value in (("low", low[d]), ("high", high[d])):
            a = center.copy()
            a[d] = value
            out[f"constant:a{d}_{end}"] = a
    return out


def measure_dream_gap(
    spec: AgentSpec,
    params: np.ndarray | None = None,
    temperature: float = 1.0,
    num_episodes: int = 100,
    seed: int = 0,
    max_steps: int | None = None,
    envs_at_once: int = 4,
    done_threshold: float = 0.0,
    ensemble: dict | None = None,
    disagreement_penalty: float = 0.0,
    done_prob_scale: float = 1.0,
    real: bool = True,
) -> dict:
    """Scores the reference policies (and the controller `params` [N], if given) in the dream
    of `spec`'s sequential model (with the `ensemble` members {name: loader}, if any, and
    `disagreement_penalty`, `done_threshold`, `done_prob_scale`: `DreamEvaluator`) and, unless
    `real` is False, in the real environment, on the same seeds.

    Returns {"environment", "encoder", "sequential_model", "dream_ensemble" (member names),
    "dream_disagreement_penalty", "temperature", "num_episodes", "seed", "max_steps",
    "real", "policies": {name: {"dream": stats, "real": stats or None, "ratio" (None without
    real episodes or a real mean of 0)}}}, where stats = {"mean", "std", "min", "max"} of the
    episode returns, "steps_mean", "steps" [E] and "end_rates"; with an ensemble the dream's
    stats also hold "members_reward_std".
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}.")
    ensemble = dict(ensemble or {})
    check_disagreement_penalty(disagreement_penalty, ensemble)
    env_enum = spec.env
    agent = spec.build()  # the encoder and sequential model, loaded once
    encoder, seq = agent.encoder, agent.sequential_model
    if encoder is None or seq is None:
        raise ValueError(
            "A dream needs an encoder and a sequential model: pass --encoder and "
            "--sequential_model (or a controller dir whose controller.json names them)."
        )
    max_steps = max_steps or env_enum.max_episode_steps or 1000
    members = tuple(ensemble[name]() for name in sorted(ensemble))
    for name, member in zip(sorted(ensemble), members):
        check_dream_model(name, encoder, member, temperature, max_steps)
    make_env = env_enum.make_fn()
    seeds = np.arange(num_episodes) + int(seed)

    def encode(frames):
        return encoder.compute_full_representation(tf.constant(frames))[0].numpy()

    z0 = encoded_initial_states(make_env, encode, seeds)  # [E, Z]
    input_size = feature_size(env_enum, encoder, seq, spec.cell_state)
    low = np.zeros(env_enum.action_size) if env_enum.is_discrete else env_enum.action_low
    high = np.ones(env_enum.action_size) if env_enum.is_discrete else env_enum.action_high
    trials = np.arange(num_episodes)

    def side(returns, steps) -> dict:  # one world's stats of a policy's episodes
        return {
            **stats(returns),
            "steps_mean": float(np.mean(steps)),
            "steps": [int(n) for n in steps],
            "end_rates": end_rates(steps, max_steps),
        }

    def dream(evaluator, p) -> dict:
        out = evaluator.evaluate(p, trials, seed=int(seed))
        d = side(out["returns"][0], out["steps"][0])
        if members:
            d["members_reward_std"] = float(out["reward_std"][0].mean())
        return d

    def real_side(play) -> dict | None:  # play() -> {"returns", "steps"}, run only if `real`
        if not real:
            return None
        r = play()
        return side(r["returns"], r["steps"])

    def evaluator(controller):
        return DreamEvaluator(
            seq,
            controller,
            z0,
            max_steps,
            temperature,
            spec.action_fn,
            cell_state=spec.cell_state,
            done_threshold=done_threshold,
            done_prob_scale=done_prob_scale,
            ensemble=members,
            disagreement_penalty=disagreement_penalty,
        )

    constant = evaluator(_FixedPolicy(input_size, low, high))
    random = evaluator(_FixedPolicy(input_size, low, high, random=True, seed=int(seed)))
    policies = {}
    for name, action in reference_policies(env_enum).items():
        if action is None:
            d = dream(random, np.zeros((1, len(low)), np.float32))
        else:
            d = dream(constant, np.asarray(action, np.float32)[None])
        r = real_side(lambda a=action: policy_returns(make_env, seeds, max_steps, a))
        policies[name] = {"dream": d, "real": r}
    if params is not None:
        params = checked_params(agent, params, spec)
        d = dream(evaluator(agent.controller), params[None])
        r = real_side(
            lambda: play_controller(agent, params, make_env, seeds, max_steps, envs_at_once)
        )
        policies["controller"] = {"dream": d, "real": r}
    for name, v in policies.items():
        r = v["real"]
        v["ratio"] = v["dream"]["mean"] / r["mean"] if r and r["mean"] else None
        log.info("%s: dream %.1f, real %s", name, v["dream"]["mean"], r and f"{r['mean']:.1f}")
    return {
        "environment": env_enum.name,
        "encoder": spec.encoder_name,
        "sequential_model": spec.sequential_model_name,
        "dream_ensemble": sorted(ensemble),
        "dream_disagreement_penalty": float(disagreement_penalty),
        "temperature": float(temperature),
        "done_threshold": float(done_threshold),
        "done_prob_scale": float(done_prob_scale),
        "num_episodes": int(num_episodes),
        "seed": int(seed),
        "max_steps": int(max_steps),
        "real": bool(real),
        "policies": policies,
    }


def dream_gap(
    *,
    environment: str,
    controller_dir: str | None = None,
    encoder: str | None = None,
    sequential_model: str | None = None,
    sequential_model_dir: str | None = None,
    temperature: float | None = None,
    num_episodes: int = 100,
    seed: int = 0,
    max_steps: int | None = None,
    done_threshold: float | None = None,
    done_prob_scale: float | None = None,
    dream_ensemble: tuple[str, ...] | None = None,
    dream_ensemble_dirs: tuple[str, ...] | None = None,
    disagreement_penalty: float | None = None,
    out_dir: str | None = None,
    run_flags: dict | None = None,
    deterministic: bool | None = None,
    real: bool = True,
) -> dict:
    """What scripts/models/dream_gap.py runs.

    With `controller_dir`, its controller.json names the encoder, the sequential model and
    (for a dream-trained controller) the temperature, the episode ends and the dream
    ensemble with its penalty, and the controller is scored too; `encoder` /
    `sequential_model[_dir]` / `temperature` / `done_threshold` / `done_prob_scale` override
    them. Without it, the encoder and a sequential model must be named. `dream_ensemble` (zoo
    names; ("none",): no ensemble) and `dream_ensemble_dirs` (training dirs), when either is
    given, replace the controller's ensemble (`resolve.ensemble_model_fns`);
    `disagreement_penalty` (None: the controller's with its own ensemble, else 0) is the dream
    reward's penalty. Writes <out_dir>/dream_gap.json (default <controller_dir>/dream_gap) and
    returns its dict. `deterministic`: `rl755.common.determinism.configure` with `seed` (None:
    on without a GPU). `real=False`: the dream only (`measure_dream_gap`).
    """
    from rl755.common import determinism, run_record, sharded_io
    from rl755.controller import resolve, saved
    from rl755.environments import Environments

    determinism.configure(seed, deterministic)
    env = Environments.from_name(environment)
    params = None
    meta = {}
    source = None
    if controller_dir:
        trained = saved.load_trained_controller(controller_dir)
        seq_name = f"dir:{sequential_model_dir}" if sequential_model_dir else sequential_model
        meta, spec = spec_with_overrides(trained, controller_dir, env.name, encoder, seq_name)
        params = trained.params
        source = resolve.models_source(trained)
        if temperature is None:
            temperature = meta.get("temperature")
        if done_threshold is None:
            done_threshold = meta.get("done_threshold")
        if done_prob_scale is None:
            done_prob_scale = meta.get("done_prob_scale")
        out_dir = out_dir or os.path.join(controller_dir, "dream_gap")
    else:
        if not out_dir:
            raise ValueError("Without --model_dir (a controller), pass --out_dir.")
        spec = resolve.make_agent_spec(
            env,
            "LinearController",
            encoder=encoder or resolve.NONE,
            sequential_model=sequential_model or resolve.NONE,
            sequential_model_dir=sequential_model_dir,
        )
    temperature = 1.0 if temperature is None else float(temperature)
    done_threshold = 0.0 if done_threshold is None else float(done_threshold)
    done_prob_scale = 1.0 if done_prob_scale is None else float(done_prob_scale)
    if dream_ensemble is None and dream_ensemble_dirs is None:  # the controller's own dream
        names = tuple(meta.get("dream_ensemble") or ())
        ensemble = resolve.ensemble_model_fns(env, names, source=source)
        if disagreement_penalty is None:
            disagreement_penalty = meta.get("dream_disagreement_penalty") or 0.0
    else:
        names = tuple(n for n in dream_ensemble or () if n.strip().lower() != resolve.NONE)
        ensemble = resolve.ensemble_model_fns(env, names, dream_ensemble_dirs or (), source)
    disagreement_penalty = float(disagreement_penalty or 0.0)
    with run_record.record_run(out_dir, dict(run_flags or {}), stage="dream_gap"):
        gap = measure_dream_gap(
            spec,
            params,
            temperature=temperature,
            num_episodes=num_episodes,
            seed=seed,
            max_steps=max_steps,
            done_threshold=done_threshold,
            done_prob_scale=done_prob_scale,
            ensemble=ensemble,
            disagreement_penalty=disagreement_penalty,
            real=real,
        )
        gap["out_dir"] = os.path.abspath(out_dir)
        sharded_io.write_json_atomic(os.path.join(out_dir, "dream_gap.json"), gap)
    return gap
