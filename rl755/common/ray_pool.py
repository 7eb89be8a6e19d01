"""Ray workers that never hang a run: timeouts, retries and worker replacement, written once.

    with RayWorkerPool(RolloutWorker, args=(make_env,), size=4, max_retries=3,
                       startup_timeout=300.0, hint="Raise --rollout_timeout if ...") as pool:
        results = pool.run("run", [Job("rollout task 'a'", args=(task,), timeout=60.0), ...])
        # results[i] is what worker.run(*jobs[i].args) returned; job order, not finishing order

Used by stage 1's rollout scheduler (`rl755.data_gen.rollout_tasks`: --rollout_timeout,
--max_retries) and by the controller's real-environment evaluator
(`rl755.controller.real_eval`: --trial_timeout_s, --max_worker_failures).

How a run stays alive:
  - Each of `size` workers is a Ray actor built once (`worker_cls(*args)`) and reused for many
    jobs, so it keeps its environments and networks; at most one job runs on a worker.
  - A new worker has `startup_timeout` seconds to answer a first ping (imports, networks),
    and its first job `first_job_extra_s` seconds more than `job.timeout` (lazy set-up).
  - A job that is not done `job.timeout` seconds after it was submitted, or whose worker
    process died (SIGKILL, OOM, segfault), has its worker killed and replaced, and is queued
    again at the front.
  - An exception raised by the job itself either stops the run at once with the worker's
    traceback (`retry_errors=False`: a bug does not get better by retrying) or counts as a
    failure like the others (`retry_errors=True`).
  - After `max_retries` retries of the same job (or of the same worker's start) the run
    stops with `WorkerFailure` naming the job and every cause. The pool stays usable: failed
    and abandoned workers are replaced before the error is raised.
Only this module talks to Ray about failures; callers say what a job is and how long it may take.

Warm workers (`keep_workers=True`): when a pool closes inside a Ray session it did not start,
its idle workers are kept, and the next pool of the same worker class and constructor
arguments takes them instead of starting new processes (imports, environments and networks
already loaded). Kept workers of another kind are killed when a pool starts (they hold CPUs),
and all of them when `ray_session` ends.

Start-up: `pool.ray_start_s` is the time `ray.init` took (0 when joining a session) and
`pool.first_ready_s` the time from the pool's creation until its first worker answered; both
are logged once per pool.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from rl755.common.errors import WorkerFailure
from rl755.common.ray_session import (  # noqa: F401 - start_ray, ray_session: their old home
    KEPT,
    START_ATTEMPTS,
    drop_kept_workers,
    kept_for,
    ray_session,
    session_id,
    start_ray,
)

log = logging.getLogger(__name__)

# How often the driver wakes up (deadlines, progress callbacks), in seconds.
POLL_S = 0.5


@dataclasses.dataclass(frozen=True)
class Job:
    """One call of a worker method.

    Attributes:
      name: names the job in messages, e.g. "Rollout task 'rollouts-train-00003'".
      args: positional arguments of the worker method.
      timeout: seconds from submission until the job counts as hung (None: no limit).
    """

    name: str
    args: tuple = ()
    timeout: float | None = None


class RayWorkerPool:
    """`size` Ray actors of `worker_cls` that run `Job`s; see the module docstring.

    Args:
      worker_cls: the worker class; built once per worker as `worker_cls(*args)`.
      args: its constructor arguments (picklable).
      size: number of workers (actors).
      max_retries: retries of one job (or one worker start) before `WorkerFailure`.
      startup_timeout: seconds a new worker has to start (None: no limit).
      first_job_extra_s: extra seconds for the first job of each new worker (work its
        constructor leaves to the first call: environments, graph tracing).
      retry_errors: retry jobs that raised an exception (else: stop at once).
      cpus_per_worker: Ray CPUs per worker.
      env_vars: environment variables of the worker processes (e.g. OMP_NUM_THREADS). None:
        the session's; then workers may start in Ray's pre-started processes (faster).
      hint: what to do when a job keeps failing, appended to the `WorkerFailure` message.
      ray_address: join this cluster if Ray is not connected yet; else a local one with
        `ray_num_cpus` (default size * cpus_per_worker) CPUs, shut down by `close()`.
      keep_workers: keep the idle workers for the next pool of the same kind in this Ray
        session (see the module docstring); the constructor arguments must be picklable
        to the same bytes for a later pool to recognize them.
    """

    def __init__(
        self,
        worker_cls: type,
        args: tuple = (),
        size: int = 1,
        max_retries: int = 3,
        startup_timeout: float | None = 300.0,
        first_job_extra_s: float = 0.0,
        retry_errors: bool = False,
        cpus_per_worker: int = 1,
        env_vars: dict | None = None,
        hint: str = "",
        ray_address: str | None = None,
        ray_num_cpus: int | None = None,
        keep_workers: bool = False,
    ):
        import ray

        if size < 1:
            raise ValueError(f"A worker pool needs size >= 1, got {size}.")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}.")
        self.size = int(size)
        self.max_retries = int(max_retries)
        self.startup_timeout = startup_timeout or None
        self.first_job_extra_s = float(first_job_extra_s)
        self.retry_errors = retry_errors
        self.hint = hint
        self.failures_total = 0  # failed job attempts (not worker starts), for diagnostics
        self._args = args
        self._created = time.monotonic()
        self._started_ray = start_ray(ray_num_cpus or self.size * cpus_per_worker, ray_address)
        self.ray_start_s = time.monotonic() - self._created if self._started_ray else 0.0
        self.first_ready_s: float | None = None
        self._key = _kind(worker_cls, args, cpus_per_worker, env_vars) if keep_workers else None
        self._actor_cls = ray.remote(num_cpus=cpus_per_worker, max_restarts=0)(worker_cls)
        if env_vars:
            env = {"TF_CPP_MIN_LOG_LEVEL": "2", **env_vars}
            self._actor_cls = self._actor_cls.options(runtime_env={"env_vars": env})
        self._actors: list = [None] * self.size
        self._starting: dict = {}  # ping ref -> (worker index, deadline or None)
        self._start_failures = [0] * self.size
        self._fresh = [True] * self.size  # no job finished on it yet
        self._idle: collections.deque[int] = collections.deque()
        self.kept_workers_taken = 0
        kept = kept_for(self._key, self.size) if not self._started_ray else []
        for w in range(self.size):
            if w < len(kept):
                self._adopt(w, kept[w])
            else:
                self._start_worker(w)
        self.kept_workers_taken = len(kept)

    # ---- workers --------------------------------------------------------------------------
    @property
    def actors(self) -> list:
        """The current actor handles (replaced ones are gone)."""
        return list(self._actors)

    def _start_worker(self, w: int) -> None:
        self._actors[w] = self._actor_cls.remote(*self._args)
        self._fresh[w] = True
        deadline = None if self.startup_timeout is None else time.monotonic() + self.startup_timeout
        self._starting[self._actors[w].__ray_ready__.remote()] = (w, deadline)

    def _adopt(self, w: int, actor) -> None:
        """A kept worker of an earlier pool: asked once whether it is still alive."""
        self._actors[w] = actor
        self._fresh[w] = False
        deadline = None if self.startup_timeout is None else time.monotonic() + self.startup_timeout
        self._starting[actor.__ray_ready__.remote()] = (w, deadline)

    def _replace(self, w: int) -> None:
        import ray

        with contextlib.suppress(Exception):  # already dead
            ray.kill(self._actors[w], no_restart=True)
        with contextlib.suppress(ValueError):
            self._idle.remove(w)
        self._start_worker(w)

    def _start_failed(self, w: int, reason: str) -> None:
        self._start_failures[w] += 1
        log.warning("Worker %d failed to start: %s", w, reason)
        self._replace(w)
        if self._start_failures[w] > self.max_retries:
            raise WorkerFailure(
                f"A worker failed to start {self._start_failures[w]} times (last: {reason}). "
                "See the Ray logs (/tmp/ray/session_latest/logs); a Ray cluster with fewer free "
                "CPUs than workers looks the same."
            )

    def wait_ready(self) -> None:
        """Waits until every worker has started (bounded by startup_timeout and max_retries)."""
        self.run(None, [])

    # ---- jobs -----------------------------------------------------------------------------
    def run(
        self,
        method: str | None,
        jobs: Sequence[Job],
        on_result: Callable[[int, Any], None] | None = None,
        on_poll: Callable[[list[int]], None] | None = None,
    ) -> list[Any]:
        """Runs every job once on some worker (`worker.<method>(*job.args)`); returns the
        results in job order. `on_result(i, result)` is called as job i finishes;
        `on_poll(running job indices)` at every wake-up (e.g. for a progress bar).
        With no jobs, waits until every worker has started."""
        import ray

        results: list[Any] = [None] * len(jobs)
        queue = collections.deque(range(len(jobs)))
        failures: dict[int, list[str]] = collections.defaultdict(list)
        running: dict = {}  # job ref -> (job index, worker index, deadline or None)
        try:
            while queue or running or (not jobs and self._starting):
                while queue and self._idle:
                    i, w = queue.popleft(), self._idle.popleft()
                    ref = getattr(self._actors[w], method).remote(*jobs[i].args)
                    t = jobs[i].timeout
                    if t and self._fresh[w]:
                        t += self.first_job_extra_s
                    running[ref] = (i, w, None if not t else time.monotonic() + t)
                deadlines = [d for *_, d in running.values() if d is not None]
                deadlines += [d for _, d in self._starting.values() if d is not None]
                wait_s = POLL_S
                if deadlines:
                    wait_s = max(0.05, min(POLL_S, min(deadlines) - time.monotonic()))
                refs = [*running, *self._starting]
                ready, _ = ray.wait(refs, num_returns=1, timeout=wait_s)
                for ref in ready:
                    if ref in self._starting:
                        w, _ = self._starting.pop(ref)
                        try:
                            ray.get(ref)
                        except Exception as e:  # noqa: BLE001 - any failure to start
                            if _is_job_error(e) and not self.retry_errors:
                                self._replace(w)
                                raise RuntimeError(f"A worker failed to start: {e}") from e
                            self._start_failed(w, _reason(e))
                            continue
                        self._start_failures[w] = 0
                        self._idle.append(w)
                        self._note_ready()
                        continue
                    i, w, _ = running.pop(ref)
                    try:
                        results[i] = ray.get(ref)
                    except Exception as e:  # noqa: BLE001 - classified below
                        if _is_job_error(e) and not self.retry_errors:
                            self._idle.append(w)
                            raise RuntimeError(f"{jobs[i].name} failed: {e}") from e
                        self._job_failed(jobs, i, w, _reason(e), failures, queue)
                        continue
                    self._fresh[w] = False
                    self._idle.append(w)
                    if on_result is not None:
                        on_result(i, results[i])
                now = time.monotonic()
                for ref, (i, w, deadline) in list(running.items()):
                    if deadline is not None and deadline <= now and ref not in ready:
                        del running[ref]
                        reason = f"ran past its time limit ({jobs[i].timeout:g} s)"
                        self._job_failed(jobs, i, w, reason, failures, queue)
                for ref, (w, deadline) in list(self._starting.items()):
                    if deadline is not None and deadline <= now and ref not in ready:
                        del self._starting[ref]
                        self._start_failed(w, f"no answer within {self.startup_timeout:g} s")
                if on_poll is not None:
                    on_poll(sorted(i for i, _, _ in running.values()))
            return results
        finally:
            # Workers still busy with jobs nobody waits for (the run stopped) are replaced, so
            # the next run starts on idle workers.
            for _, w, _ in running.values():
                self._replace(w)

    def _note_ready(self) -> None:
        if self.first_ready_s is None:
            self.first_ready_s = time.monotonic() - self._created
            where = (
                f"local cluster started in {self.ray_start_s:.1f} s"
                if self._started_ray
                else "joined the running session"
            )
            log.info(
                "Ray start-up %.1f s: %s, first worker ready after %.1f s (%d of %d workers "
                "kept from an earlier run).",
                self.first_ready_s,
                where,
                self.first_ready_s,
                self.kept_workers_taken,
                self.size,
            )

    def _job_failed(self, jobs, i: int, w: int, reason: str, failures, queue) -> None:
        self.failures_total += 1
        failures[i].append(reason)
        n = len(failures[i])
        log.warning(
            "%s failed on worker %d: %s; replacing the worker (failure %d, at most %d retries).",
            jobs[i].name,
            w,
            reason,
            n,
            self.max_retries,
        )
        self._replace(w)  # the pool stays usable even when the run stops below
        if n > self.max_retries:
            raise WorkerFailure(
                f"{jobs[i].name} failed {n} times: {'; '.join(failures[i])}. Its worker was "
                f"killed and replaced each time. {self.hint}".rstrip()
            )
        queue.appendleft(i)

    # ---- shutdown -------------------------------------------------------------------------
    def close(self) -> None:
        """Kills the workers, and shuts Ray down if this pool started it."""
        import ray

        keep = set()
        if self._key is not None and not self._started_ray and ray.is_initialized():
            keep = set(self._idle)
            drop_kept_workers()
            KEPT.update(
                session=session_id(), key=self._key, actors=[self._actors[w] for w in sorted(keep)]
            )
        for w, actor in enumerate(self._actors):
            if w not in keep:
                with contextlib.suppress(Exception):
                    ray.kill(actor, no_restart=True)
        self._actors, self._starting, self._idle = [], {}, collections.deque()
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def __enter__(self) -> RayWorkerPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _kind(worker_cls: type, args: tuple, cpus: int, env_vars: dict | None) -> tuple | None:
    """What makes workers interchangeable: the class itself, and the pickled constructor
    arguments, CPUs and environment (None if they cannot be pickled: such workers are not
    kept)."""
    from ray import cloudpickle

    try:
        return worker_cls, cloudpickle.dumps((args, cpus, sorted((env_vars or {}).items())))
    except Exception:  # noqa: BLE001 - any pickling failure only means "not kept"
        return None


def _is_job_error(e: Exception) -> bool:
    """True for an exception raised by the caller's code: the job's, or the worker's
    constructor (as opposed to a worker process that died or a Ray failure)."""
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(e, RayActorError):
        return bool(getattr(e, "actor_init_failed", False))
    return isinstance(e, RayTaskError)


def _reason(e: Exception) -> str:
    from ray.exceptions import RayActorError

    if isinstance(e, RayActorError):
        return f"worker died ({type(e).__name__})"
    last = str(e).strip().splitlines()[-1:] or [""]
    return f"{type(e).__name__}: {last[0][:300]}"
