"""Shared by the controller tests: an agent on the fake world model, a small CMA-ES config."""

from rl755.controller.agent import AgentSpec
from rl755.controller.cma_train import CmaConfig
from rl755.environments import Environments
from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

ENV = Environments.FAKE_PIXELS


def exact_spec(controller="LinearController", **kw):
    return AgentSpec(
        ENV.name,
        controller,
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel,
        encoder_name="FakeLatentEncoder",
        sequential_model_name="FakeDynamicsModel",
        **kw,
    )


def small(**kw):
    args = dict(
        mode="real",
        population_size=8,
        trials_per_member=3,
        generations=6,
        rollout_max_steps=24,
        sigma=0.5,
        seed=3,
        eval_every=0,
    )
    args.update(kw)
    return CmaConfig(**args)


def evals_of(out, candidate):
    """The run's evaluations of one candidate ("best_member" or "cma_mean")."""
    return [e for e in out["evals"] if e["candidate"] == candidate]
