"""Evaluating many controller parameter vectors in the real environment, in parallel.

    evaluator = RealEvaluator(spec, make_env=Environments.CAR_RACING.make_fn(), parallelism=8)
    result = evaluator.evaluate(params, seeds, max_steps=1000)   # params [J, N], seeds [J]
    result["returns"], result["steps"]                          # [J], [J]
    evaluator.close()

Each of `parallelism` Ray actors builds its environments and networks once
(`EvaluationWorker`) and evaluates batches of `envs_per_worker` jobs with batched networks
(`agent.run_episodes`). `parallelism=0` runs one worker in this process (no Ray).

A run never waits forever (`rl755.common.ray_pool`, shared with stage 1): a batch whose
actor crashed (process killed, segfault, exception) or that did not finish within
`trial_timeout_s` (plus `startup_timeout_s` for an actor's first batch, which builds its
environments and traces its networks; a new actor has `startup_timeout_s` to build its
networks) has its actor killed and replaced and is re-submitted. After `max_failures`
failures of the same batch the run stops with `WorkerFailure` naming the batch and the causes.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from rl755.common import determinism
from rl755.common.ray_pool import Job, RayWorkerPool
from rl755.controller.agent import AgentSpec, run_episodes


class EvaluationWorker:
    """Builds the agent and environments once; evaluates batches of jobs (one per env)."""

    def __init__(
        self, spec: AgentSpec, make_env: Callable, envs_per_worker: int, num_threads: int = 1
    ):
        from rl755.common import tf_setup

        tf_setup.limit_threads(num_threads)
        self.spec = spec
        self.make_env = make_env
        self.envs_per_worker = int(envs_per_worker)
        self.agent = spec.build()
        self.envs: list = []

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, params: np.ndarray, seeds, max_steps: int) -> dict:
        """params [J, N], seeds [J] -> {"returns": [J], "steps": [J]} (J <= envs_per_worker ok)."""
        params = np.asarray(params, np.float32)
        returns, steps = [], []
        for start in range(0, len(params), self.envs_per_worker):
            p = params[start : start + self.envs_per_worker]
            while len(self.envs) < len(p):
                self.envs.append(self.make_env())
            out = run_episodes(self.envs, self.agent, p, seeds[start : start + len(p)], max_steps)
            returns.append(out["returns"])
            steps.append(out["steps"])
        return {"returns": np.concatenate(returns), "steps": np.concatenate(steps)}

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []


class RealEvaluator:
    """A pool of evaluation workers (Ray actors, or one in-process worker)."""

    def __init__(
        self,
        spec: AgentSpec,
        make_env: Callable,
        parallelism: int = 0,
        envs_per_worker: int = 4,
        ray_address: str | None = None,
        trial_timeout_s: float = 600.0,
        startup_timeout_s: float = 300.0,
        max_failures: int = 3,
        threads_per_worker: int = 1,
        worker_env_vars: dict | None = None,
    ):
        if max_failures < 1:
            raise ValueError(f"max_failures must be >= 1, got {max_failures}.")
        self.spec = spec
        self.make_env = make_env
        self.parallelism = int(parallelism)
        self.envs_per_worker = max(1, int(envs_per_worker))
        self.trial_timeout_s = float(trial_timeout_s)
        self._local = None
        self._pool = None
        if self.parallelism <= 0:
            self._local = EvaluationWorker(spec, make_env, self.envs_per_worker, num_threads=0)
            return
        self._pool = RayWorkerPool(
            EvaluationWorker,
            args=(spec, make_env, self.envs_per_worker, threads_per_worker),
            size=self.parallelism,
            max_retries=int(max_failures) - 1,
            startup_timeout=float(startup_timeout_s),
            first_job_extra_s=float(startup_timeout_s),
            retry_errors=True,
            cpus_per_worker=threads_per_worker,
            env_vars={
                "OMP_NUM_THREADS": str(threads_per_worker),
                **determinism.child_environ(),
                **(worker_env_vars or {}),
            },
            hint="Check the workers' logs (Ray: /tmp/ray/session_latest/logs); raise "
            "--trial_timeout_s if episodes are just slow.",
            ray_address=ray_address,
            ray_num_cpus=max(self.parallelism * threads_per_worker, os.cpu_count() or 1),
        )
        self._pool.wait_ready()  # every worker has built its networks (or the run stops here)

    @property
    def failures_total(self) -> int:
        """Failed batch attempts so far (each replaced its worker)."""
        return 0 if self._pool is None else self._pool.failures_total

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (for diagnostics and fault-injection tests)."""
        if self._local is not None:
            return [os.getpid()]
        import ray

        return ray.get([a.pid.remote() for a in self._pool.actors], timeout=60)

    def evaluate(self, params: np.ndarray, seeds, max_steps: int) -> dict:
        """params [J, N], seeds [J] -> {"returns": float64 [J], "steps": int64 [J]}."""
        params = np.asarray(params, np.float32)
        seeds = np.asarray(seeds, np.int64)
        if self._local is not None:
            return self._local.evaluate(params, seeds, max_steps)
        n, k = len(params), self.envs_per_worker
        chunks = [(a, min(a + k, n)) for a in range(0, n, k)]
        jobs = [
            Job(
                f"Trial batch {c} (jobs {a}-{b - 1})",
                (params[a:b], seeds[a:b], max_steps),
                self.trial_timeout_s,
            )
            for c, (a, b) in enumerate(chunks)
        ]
        outs = self._pool.run("evaluate", jobs)
        returns = np.zeros(n)
        steps = np.zeros(n, np.int64)
        for (a, b), out in zip(chunks, outs):
            returns[a:b] = out["returns"]
            steps[a:b] = out["steps"]
        return {"returns": returns, "steps": steps}

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
