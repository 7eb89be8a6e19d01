"""The Ray evaluation pool: a killed or hung worker neither hangs the run nor loses the
generation (results equal the fault-free in-process ones); repeated failures stop the run
with a message. One pool (2 actors) serves all tests; faults are armed per test."""

import numpy as np
import pytest

from rl755.common.errors import WorkerFailure
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_train import CmaConfig, PoolConfig, run_cma_es
from rl755.controller.real_eval import RealEvaluator
from rl755.environments import Environments
from rl755.testing import faulty_env
from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

ENV = Environments.FAKE_PIXELS
SPEC = AgentSpec(
    ENV.name,
    "LinearController",
    encoder_fn=FakeLatentEncoder,
    sequential_model_fn=FakeDynamicsModel,
)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    import ray

    control = tmp_path_factory.mktemp("faults")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    evaluator = RealEvaluator(
        SPEC,
        faulty_env.FaultyEnvFactory(ENV.name, control, after_steps=3),
        parallelism=2,
        envs_per_worker=2,
        trial_timeout_s=5,
        startup_timeout_s=120,
        max_failures=2,
    )
    evaluator.control_dir = control
    yield evaluator
    evaluator.close()
    ray.shutdown()


def _jobs(n=8):
    return np.random.default_rng(0).normal(0, 1, (n, 21)), np.arange(n) + 100


def test_cma_generation_survives_a_worker_killed_mid_generation(pool, tmp_path):
    cfg = CmaConfig(
        population_size=4,
        trials_per_member=2,
        generations=2,
        rollout_max_steps=24,
        sigma=0.5,
        seed=1,
        eval_every=0,
    )
    pids = pool.worker_pids()
    failures = pool.failures_total
    faulty_env.arm(pool.control_dir, "crash")  # SIGKILL of a worker during generation 1
    on_ray = run_cma_es(SPEC, str(tmp_path / "ray"), cfg, real_evaluator=pool)
    assert faulty_env.claimed_pids(pool.control_dir, "crash")[0] in pids
    assert pool.failures_total == failures + 1
    local = run_cma_es(SPEC, str(tmp_path / "local"), cfg, PoolConfig(parallelism=0))
    assert on_ray["generation"] == 2
    assert [h["mean"] for h in on_ray["history"]] == pytest.approx(
        [h["mean"] for h in local["history"]], abs=1e-5
    )


def test_hung_worker_times_out_and_its_trials_rerun(pool):
    failures = pool.failures_total
    faulty_env.arm(pool.control_dir, "hang")
    params, seeds = _jobs()
    out = pool.evaluate(params, seeds, 24)
    assert faulty_env.claimed_pids(pool.control_dir, "hang")
    assert pool.failures_total == failures + 1
    ref = RealEvaluator(SPEC, ENV.make_fn()).evaluate(params, seeds, 24)
    np.testing.assert_allclose(out["returns"], ref["returns"], atol=1e-5)
    np.testing.assert_array_equal(out["steps"], ref["steps"])


def test_repeated_failures_stop_the_run_with_a_message(pool):
    faulty_env.arm(pool.control_dir, "crash_always")
    try:
        with pytest.raises(WorkerFailure, match="failed 2 times.*worker died"):
            pool.evaluate(*_jobs(2), 24)
    finally:
        faulty_env.disarm(pool.control_dir, "crash_always")
    assert len(pool.worker_pids()) == 2  # the pool was repaired and still works
