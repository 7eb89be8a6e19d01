"""Policies: the one home of what acts in an environment during stage 1.

    from rl755.policies import Policy, build_policy, resolve_policy

    policy_fn = resolve_policy("CAR_RACING", "HastingsRandomPolicy")   # PolicyFn: no-arg constructor
    policy = build_policy(policy_fn)
    policy.initialize(env, max_steps=1000, seed=3)
    action = policy.sample_action(obs, step, rollout)   # obs uint8 [H, W, C] -> float32 [A]

Modules:
  base        the `Policy` interface, `PolicyFn`, `build_policy`
  generic     environment-independent random policies (continuous and one-hot discrete)
  car_racing  the policy tuned for CAR_RACING (HastingsRandomPolicy); one file per environment
              only where the code really differs
  registry    which names each environment has (generic + tuned + "controller"), the
              strict resolver `resolve_policy`, and `exploration_policy` (the default one)
  learned     `WorldModelPolicy`: a trained controller as a Policy (imports rl755.controller and
              TensorFlow, so it is imported only when used; rl755.controller never imports
              rl755.policies)
"""

from rl755.policies.base import Policy, PolicyFn, build_policy
from rl755.policies.registry import (
    CONTROLLER,
    available_policies,
    exploration_policy,
    policy_names,
    resolve_policy,
)

__all__ = [
    "CONTROLLER",
    "Policy",
    "PolicyFn",
    "available_policies",
    "build_policy",
    "exploration_policy",
    "policy_names",
    "resolve_policy",
]
