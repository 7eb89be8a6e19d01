"""Evaluating many controller parameter vectors in the real environment, in parallel.

    evaluator = RealEvaluator(spec, make_env=Environments.CAR_RACING.make_fn(), parallelism=8)
    result = evaluator.evaluate(params, seeds, max_steps=1000)   # params [J, N], seeds [J]
    result["returns"], result["steps"]                          # [J], [J]
    evaluator.close()

Each of `parallelism` Ray actors builds its environments and networks once
(`EvaluationWorker`) and evaluates batches of `envs_per_worker` jobs with batched networks
(`agent.run_episodes`). `parallelism=0` runs one worker in this process (no Ray).

A run never waits forever: every batch is awaited with `ray.wait(timeout=...)`. A batch
whose actor crashed (process killed, segfault, exception) or that did not finish within
`trial_timeout_s` (plus `startup_timeout_s` for an actor's first batch, which builds
networks) has its actor killed and replaced and is re-submitted. After `max_failures`
failures of the same batch the run stops with an error naming the batch and the causes.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Callable

import numpy as np

from rl755.common.errors import WorkerFailure
from rl755.controller.agent import AgentSpec, run_episodes

log = logging.getLogger(__name__)


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

    def ready(self) -> bool:
        return True

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
        self.spec = spec
        self.make_env = make_env
        self.parallelism = int(parallelism)
        self.envs_per_worker = max(1, int(envs_per_worker))
        self.trial_timeout_s = float(trial_timeout_s)
        self.startup_timeout_s = float(startup_timeout_s)
        self.max_failures = int(max_failures)
        self.threads_per_worker = threads_per_worker
        self.failures_total = 0
        self._started_ray = False
        self._local = None
        self._actors: list = []
        self._fresh: list[bool] = []
        if self.parallelism <= 0:
            self._local = EvaluationWorker(spec, make_env, self.envs_per_worker, num_threads=0)
            return
        import ray

        if not ray.is_initialized():
            if ray_address:
                ray.init(address=ray_address, include_dashboard=False)
            else:
                ray.init(
                    num_cpus=max(self.parallelism, os.cpu_count() or 1), include_dashboard=False
                )
            self._started_ray = True
        env_vars = {"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": str(threads_per_worker)}
        env_vars.update(worker_env_vars or {})
        self._actor_cls = ray.remote(num_cpus=threads_per_worker, max_restarts=0)(
            EvaluationWorker
        ).options(runtime_env={"env_vars": env_vars})
        for _ in range(self.parallelism):
            self._actors.append(self._new_actor())
            self._fresh.append(True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Waits (bounded) until every worker has built its networks; replaces dead ones."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        for _ in range(self.max_failures):
            refs = [a.ready.remote() for a in self._actors]
            bad = []
            for i, ref in enumerate(refs):
                try:
                    ray.get(ref, timeout=self.startup_timeout_s)
                    self._fresh[i] = False
                except (GetTimeoutError, RayError) as e:
                    log.warning("Worker %d failed to start: %s", i, str(e).splitlines()[-1][:300])
                    bad.append(i)
            if not bad:
                return
            for i in bad:
                self._replace(i)
        raise WorkerFailure(
            f"Evaluation workers failed to start {self.max_failures} times; see the Ray logs "
            "(/tmp/ray/session_latest/logs)."
        )

    def _new_actor(self):
        return self._actor_cls.remote(
            self.spec, self.make_env, self.envs_per_worker, self.threads_per_worker
        )

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (for diagnostics and fault-injection tests)."""
        if self._local is not None:
            return [os.getpid()]
        import ray

        return ray.get([a.pid.remote() for a in self._actors], timeout=self.startup_timeout_s)

    def evaluate(self, params: np.ndarray, seeds, max_steps: int) -> dict:
        """params [J, N], seeds [J] -> {"returns": float64 [J], "steps": int64 [J]}."""
        params = np.asarray(params, np.float32)
        seeds = np.asarray(seeds, np.int64)
        if self._local is not None:
            return self._local.evaluate(params, seeds, max_steps)
        return self._evaluate_ray(params, seeds, max_steps)

    def _replace(self, idx: int) -> None:
        import ray

        try:
            ray.kill(self._actors[idx], no_restart=True)
        except Exception:  # already dead
            pass
        self._actors[idx] = self._new_actor()
        self._fresh[idx] = True

    def _evaluate_ray(self, params, seeds, max_steps) -> dict:
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayError

        n = len(params)
        chunks = [
            (start, min(start + self.envs_per_worker, n))
            for start in range(0, n, self.envs_per_worker)
        ]
        returns = np.zeros(n)
        steps = np.zeros(n, np.int64)
        queue = collections.deque(range(len(chunks)))
        failures: dict[int, list[str]] = collections.defaultdict(list)
        idle = collections.deque(range(len(self._actors)))
        pending: dict = {}  # ref -> (chunk index, actor index, deadline)

        def fail(chunk: int, actor: int, reason: str) -> None:
            self.failures_total += 1
            failures[chunk].append(reason)
            log.warning(
                "Trial batch %d (jobs %d-%d) failed on worker %d: %s; replacing the worker "
                "(failure %d of %d allowed).",
                chunk,
                *chunks[chunk],
                actor,
                reason,
                len(failures[chunk]),
                self.max_failures,
            )
            self._replace(actor)  # the pool stays usable even when the run stops below
            if len(failures[chunk]) >= self.max_failures:
                raise WorkerFailure(
                    f"Trial batch {chunk} (jobs {chunks[chunk][0]}-{chunks[chunk][1] - 1}) failed "
                    f"{len(failures[chunk])} times: {failures[chunk]}. Check the workers' logs "
                    "(Ray: /tmp/ray/session_latest/logs); raise --trial_timeout_s if episodes "
                    "are just slow."
                )
            queue.appendleft(chunk)
            idle.append(actor)

        while queue or pending:
            while queue and idle:
                chunk, actor = queue.popleft(), idle.popleft()
                a, b = chunks[chunk]
                timeout = self.trial_timeout_s + (
                    self.startup_timeout_s if self._fresh[actor] else 0
                )
                ref = self._actors[actor].evaluate.remote(params[a:b], seeds[a:b], max_steps)
                pending[ref] = (chunk, actor, time.monotonic() + timeout)
            next_deadline = min(d for _, _, d in pending.values())
            wait_s = max(0.05, min(5.0, next_deadline - time.monotonic()))
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
            for ref in ready:
                chunk, actor, _ = pending.pop(ref)
                try:
                    out = ray.get(ref, timeout=60)
                except (RayActorError, GetTimeoutError) as e:
                    fail(chunk, actor, f"worker died ({type(e).__name__})")
                    continue
                except RayError as e:
                    fail(chunk, actor, f"{type(e).__name__}: {str(e).splitlines()[-1][:300]}")
                    continue
                a, b = chunks[chunk]
                returns[a:b] = out["returns"]
                steps[a:b] = out["steps"]
                self._fresh[actor] = False
                idle.append(actor)
            now = time.monotonic()
            for ref, (chunk, actor, deadline) in list(pending.items()):
                if now > deadline:
                    pending.pop(ref)
                    fail(
                        chunk, actor, f"no result within the timeout ({self.trial_timeout_s:.0f} s)"
                    )
        return {"returns": returns, "steps": steps}

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            return
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:
                pass
        self._actors = []
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
