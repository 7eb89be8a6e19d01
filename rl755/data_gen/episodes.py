"""One episode of a `Policy` in a gymnasium environment, as a `Rollout`; and rollout seeds.

    from rl755.environments import Environments
    from rl755.policies import resolve_policy

    env_enum = Environments.CAR_RACING
    policy_fn = resolve_policy(env_enum, "HastingsRandomPolicy")
    rollout = single_rollout(env_enum.make_fn(), policy_fn, max_steps=1000, seed=3)
    rollout.obs_l[t]     # uint8 [96, 96, 3], what the policy saw at step t (from reset/step)
    rollout.action_l[t]  # float32 [3], what it did
    rollout.reward_l[t]  # float, what followed

Every observation comes from `reset`/`step`; nothing is rendered a second time per step.
Rollout `i` of a run with base seed `s` uses the seed `rollout_seed(s, i)` for both the
environment's `reset` and the policy, so a run is reproducible and its rollouts differ.
Many rollouts, serially or on Ray: `rl755.data_gen.rollout_tasks`.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rl755.common.structs import Rollout
from rl755.policies.base import Policy, PolicyFn, build_policy

MakeEnv = Callable[[], gym.Env]


def rollout_seed(base_seed: int, index: int) -> int:
    """The seed of rollout `index` of a run with `base_seed` (distinct per index, in [0, 2**31))."""
    state = np.random.SeedSequence([int(base_seed), int(index)]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


def random_base_seed() -> int:
    """A fresh base seed (used when the user gives none; log it to reproduce the run)."""
    return int(np.random.SeedSequence().generate_state(1)[0]) & 0x7FFFFFFF


def single_rollout(
    env: gym.Env | MakeEnv,
    policy: Policy | PolicyFn,
    max_steps: int,
    seed: int | None = None,
) -> Rollout:
    """Runs one episode of at most `max_steps` steps and returns it as a `Rollout`.

    Args:
      env: a gymnasium environment, or a no-argument constructor (the env is then closed).
      policy: a `Policy`, or a no-argument factory returning one.
      max_steps: step limit; the rollout is shorter if the episode ends first.
      seed: seeds `env.reset` and the policy (None: unseeded).
    Returns:
      Rollout with T <= max_steps steps: obs_l [T x (H, W, C) uint8], action_l [T x (A,)
      float32], reward_l [T floats], done (terminated, not truncated, after the last step).
      `metadata["seed"]` holds the seed.
    """
    if max_steps <= 0:
        raise ValueError(f"max_steps must be positive, got {max_steps}.")
    owns_env = not isinstance(env, gym.Env)
    env_obj = env() if owns_env else env
    try:
        return run_episode(env_obj, build_policy(policy), max_steps, seed)
    finally:
        if owns_env:
            env_obj.close()


def run_episode(env: gym.Env, policy: Policy, max_steps: int, seed: int | None) -> Rollout:
    """The episode loop (see `Policy`): `env` and `policy` are reused, nothing is closed."""
    policy.initialize(env, max_steps, seed=seed)
    obs, _ = env.reset(seed=seed)
    rollout = Rollout(metadata={"seed": seed})
    for step in range(max_steps):
        action = np.asarray(policy.sample_action(obs, step, rollout), np.float32)  # [A]
        rollout.obs_l.append(obs)
        rollout.action_l.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rollout.reward_l.append(float(reward))
        if terminated:
            rollout.done = True
            break
        if truncated:
            break
    return rollout
