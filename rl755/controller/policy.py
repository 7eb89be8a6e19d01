"""A trained world-model controller behind the stage-1 `Policy` interface.

    policy = WorldModelPolicy.from_controller_dir(model_dir)       # or WorldModelPolicy(spec, params)
    rollout = gym_rollouts.single_rollout(env.make_fn(), policy, max_steps=1000, seed=3)
    # parallel_rollouts(make_env, functools.partial(WorldModelPolicy, spec, params), ...)

Collecting rollouts with a trained controller is how iterative World Models training gets
data the random policy never reaches. One environment per policy: the batched E-env loop
for evaluation is `agent.run_episodes`.
"""

from __future__ import annotations

import numpy as np

from rl755.controller.agent import AgentSpec
from rl755.data_gen.gym_rollouts import Policy


class WorldModelPolicy(Policy):
    """Encoder + sequential model (stepped incrementally) + controller with fixed params [N]."""

    def __init__(self, spec: AgentSpec, params):
        self.spec = spec
        self.params = np.asarray(params, np.float32)
        self._agent = None

    @classmethod
    def from_controller_dir(cls, model_dir: str) -> WorldModelPolicy:
        from rl755.controller import resolve, saved

        trained = saved.load_trained_controller(model_dir)
        return cls(resolve.spec_for_trained(trained), trained.params)

    def initialize(self, env, max_steps: int, **kwargs) -> None:
        if self._agent is None:  # networks are built once per policy object
            self._agent = self.spec.build()
            if self.params.shape != (self._agent.num_params,):
                raise ValueError(
                    f"{self.spec.controller} on these models needs ({self._agent.num_params},) "
                    f"parameters, got {self.params.shape}."
                )
        self._agent.reset(1)

    def sample_action(self, obs, step: int, rollout, **kwargs) -> np.ndarray:
        return self._agent.act(np.asarray(obs)[None], self.params[None])[0]
