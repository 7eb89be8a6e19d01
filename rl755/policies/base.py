"""The `Policy` interface: what acts in the environment while stage 1 collects rollouts.

    from rl755.policies import build_policy, resolve_policy

    policy_fn = resolve_policy("CAR_RACING", "HastingsRandomPolicy")  # a no-argument constructor
    policy = build_policy(policy_fn)
    policy.initialize(env, max_steps=1000, seed=3)     # once per rollout, before reset's obs
    obs, _ = env.reset(seed=3)                          # uint8 [H, W, C]
    for step in range(1000):
        action = policy.sample_action(obs, step, rollout)  # float32 [A] in the action box
        obs, reward, terminated, truncated, _ = env.step(action)

Stage 1 passes policies around as constructors (`PolicyFn`, called with no arguments in each
worker), never as names of stage-5 artifacts: `rl755.policies.resolve_policy` turns a
`--policy` name into one.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from rl755.common.structs import Rollout


class Policy:
    """What acts in the environment during a rollout.

    Usage (this is what `rl755.data_gen.episodes.run_episode` does):

        policy.initialize(env, max_steps, seed=seed)      # once per rollout, before reset's obs
        obs, _ = env.reset(seed=seed)                      # uint8 [H, W, C]
        for step in range(max_steps):
            action = policy.sample_action(obs, step, rollout)   # float32 [A] in the action box
            obs, reward, terminated, truncated, _ = env.step(action)

    `rollout` is the `Rollout` so far (steps 0..step-1; its obs_l/action_l/reward_l are lists).
    `initialize` receives `seed=` (an int, or None) for the policy's own randomness; a policy
    that derives its randomness from it makes rollouts reproducible. Subclasses override
    `sample_action` and usually `initialize`. Stage 1 builds a policy by calling its
    constructor with no arguments (`PolicyFn`), so defaults must make sense.

    `reusable_across_tasks`: True lets a worker keep one policy for all the tasks it runs in
    a collection (as it does for the rollouts of one task) instead of building one per task.
    Only for a policy whose `initialize` resets everything a rollout depends on (from
    `seed`), so which worker ran which task cannot change a rollout; worth it for policies
    that are costly to build (a trained controller loads its networks).
    """

    reusable_across_tasks: bool = False

    def initialize(self, env: gym.Env, max_steps: int, **kwargs) -> None:
        """Prepares for a new rollout of at most `max_steps` steps in `env`."""

    def sample_action(self, obs: np.ndarray, step: int, rollout: Rollout, **kwargs) -> np.ndarray:
        """Returns the action for observation `obs` (uint8 [H, W, C]) at `step`: float32 [A]."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement sample_action(self, obs, step, rollout, **kwargs)"
            " returning a float32 [A] action."
        )


# A no-argument constructor of a Policy: a Policy subclass, a functools.partial, a factory.
# Picklable ones travel to Ray workers, which build their own policy.
PolicyFn = Callable[[], Policy]


def build_policy(policy_fn: PolicyFn | Policy) -> Policy:
    """Calls a policy class or factory with no arguments and checks the result is a Policy."""
    if isinstance(policy_fn, Policy):
        return policy_fn
    policy = policy_fn()
    if not isinstance(policy, Policy):
        raise TypeError(
            f"{policy_fn!r} returned {type(policy).__name__}, not a rl755.policies.Policy. "
            "A policy constructor must be callable with no arguments and return a Policy."
        )
    return policy
