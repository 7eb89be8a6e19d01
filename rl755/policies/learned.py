"""A trained world-model controller behind the stage-1 `Policy` interface.

    policy = WorldModelPolicy.from_controller_dir(model_dir)       # or WorldModelPolicy(spec, params)
    rollout = episodes.single_rollout(env.make_fn(), policy, max_steps=1000, seed=3)
    # parallel_rollouts(make_env, functools.partial(WorldModelPolicy, spec, params), ...)
    # --policy=controller: resolve_policy(env, "controller", controller_dir=..., random_action_prob=...)

Collecting rollouts with a trained controller is how iterative World Models training gets
data the random policy never reaches. One environment per policy: the batched E-env loop
for evaluation is `agent.run_episodes`.
"""

from __future__ import annotations

import functools

import numpy as np

from rl755.common.errors import BadInput
from rl755.controller.agent import AgentSpec
from rl755.environments import Environments
from rl755.policies.base import Policy, PolicyFn


class WorldModelPolicy(Policy):
    """Encoder + sequential model (stepped incrementally) + controller with fixed params [N].

    `random_action_prob` (exploration, e.g. for iterative World Models data): each step, with
    this probability, a uniform random action from the environment's action space is taken
    instead of the controller's (the sequential model steps with the action taken). The
    draws are seeded by the rollout's seed.

    Reusable across a collection's tasks (`initialize` resets the networks' state and reseeds
    the draws), so a worker loads the networks once per run, not once per task.
    """

    reusable_across_tasks = True

    def __init__(self, spec: AgentSpec, params, random_action_prob: float = 0.0):
        if not 0.0 <= random_action_prob <= 1.0:
            raise ValueError(f"random_action_prob must be in [0, 1], got {random_action_prob}.")
        self.spec = spec
        self.params = np.asarray(params, np.float32)
        self.random_action_prob = float(random_action_prob)
        self._agent = None
        self._space = None
        self._rng = np.random.default_rng()

    @classmethod
    def from_controller_dir(
        cls, model_dir: str, random_action_prob: float = 0.0
    ) -> WorldModelPolicy:
        from rl755.controller import resolve, saved

        trained = saved.load_trained_controller(model_dir)
        return cls(resolve.spec_for_trained(trained), trained.params, random_action_prob)

    def initialize(self, env, max_steps: int, **kwargs) -> None:
        if self._agent is None:  # networks are built once per policy object
            self._agent = self.spec.build()
            if self.params.shape != (self._agent.num_params,):
                raise ValueError(
                    f"{self.spec.controller} on these models needs ({self._agent.num_params},) "
                    f"parameters, got {self.params.shape}."
                )
        self._agent.reset(1)
        self._space = env.action_space
        seed = kwargs.get("seed")
        self._rng = np.random.default_rng(None if seed is None else [int(seed), 755])
        if seed is not None:
            self._space.seed(int(seed) + 1)

    def sample_action(self, obs, step: int, rollout, **kwargs) -> np.ndarray:
        obs = np.asarray(obs)[None]
        if self.random_action_prob and self._rng.random() < self.random_action_prob:
            random = np.asarray(self._space.sample())[None]  # act() casts
            return self._agent.act(obs, self.params[None], random, np.array([True]))[0]
        return self._agent.act(obs, self.params[None])[0]


def controller_policy(
    environment: Environments, controller_dir: str | None = None, random_action_prob: float = 0.0
) -> PolicyFn:
    """`--policy=controller`: a constructor of the `WorldModelPolicy` of the trained controller
    in `controller_dir`, taking a uniform random action with probability `random_action_prob`
    each step. Loads the controller and its models once here, so a missing or mismatched one
    fails (BadInput) before any rollout, and every rollout of the run plays these parameters
    (a controller retrained into the same directory meanwhile does not mix in)."""
    if not controller_dir:
        raise BadInput("--policy=controller needs --controller_dir (a train_controller model dir).")
    if not 0.0 <= random_action_prob <= 1.0:
        raise BadInput(f"--random_action_prob must be in [0, 1], got {random_action_prob}.")
    try:
        policy = WorldModelPolicy.from_controller_dir(controller_dir, random_action_prob)
    except (FileNotFoundError, LookupError, ValueError) as e:
        raise BadInput(f"--controller_dir={controller_dir}: {e}") from e
    if policy.spec.env != environment:
        raise BadInput(
            f"--controller_dir={controller_dir} holds a controller for {policy.spec.env.name}, "
            f"not --environment={environment.name}."
        )
    policy.spec.build()  # loads the encoder and sequential model: fail now, not in a worker
    return functools.partial(WorldModelPolicy, policy.spec, policy.params, random_action_prob)
