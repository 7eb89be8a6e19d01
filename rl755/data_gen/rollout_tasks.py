"""Many rollouts: groups of rollouts ("tasks") run in this process or by Ray workers.

    rollouts = parallel_rollouts(env_enum.make_fn(), policy_fn, num_rollouts=8,
                                 max_steps=1000, parallelism=2, seed=0)   # exactly 8, in order
    summaries = run_rollout_tasks(make_env, policy_fn, tasks, max_steps, parallelism=16,
                                  sink=TFRecordShardSink(out_dir))        # what stage 1 does

A `RolloutTask` is a group of rollouts run one after the other by one worker; a `RolloutSink`
(see `rl755.data_gen.sinks`) lets the worker write them straight to disk, so frames never
travel through Ray's object store. Workers are `RolloutWorker`s: each builds its environment
once and its policy once per task (from the picklable constructor `policy_fn`), or once per
run for a policy that says it can be reused (`Policy.reusable_across_tasks`: a trained
controller, whose networks take a while to load).

Where a run goes (`use_ray`; None decides by `runs_on_ray`): a small run (`parallelism` 1, a
single task, or at most `SMALL_RUN_FRAMES` frames, i.e. rollouts x max_steps) runs in this
process unless a Ray session is already connected or `ray_address` is given: starting a local
Ray cluster and its workers costs more than such a run gains from them. Rollout i is the same
either way (a function of its seed).

Parallel runs use Ray through `rl755.common.ray_pool`: a local cluster with
`num_cpus=parallelism` by default, or an existing one with `ray_address="auto"` /
"host:port". Inside a Ray session that outlives the run (a notebook, a driver that collects
several times), the workers stay up for the next run of the same environment (`keep_workers`).
A task whose worker died, or that ran past `rollout_timeout` seconds per rollout,
is retried on a new worker (`max_retries`); an exception raised by the policy or the
environment stops the run at once with the worker's traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rl755.common.structs import Rollout
from rl755.data_gen.episodes import MakeEnv, random_base_seed, rollout_seed, run_episode
from rl755.policies.base import PolicyFn, build_policy

log = logging.getLogger(__name__)

# Frames (rollouts x max_steps) up to which a run without a Ray session stays in this process.
SMALL_RUN_FRAMES = 5000


@dataclasses.dataclass(frozen=True)
class RolloutTask:
    """A group of rollouts run by one worker one after the other.

    Attributes:
      key: a name unique within the run (a shard name, a pickle name, ...).
      items: (rollout index, seed) pairs, in the order they are run and stored.
    """

    key: str
    items: tuple[tuple[int, int], ...]


class RolloutSink:
    """Consumes the rollouts of one task inside the worker (e.g. writes a shard).

    Must be picklable (it travels to Ray workers). `write` receives the task and an iterator
    that produces the task's rollouts lazily (one in memory at a time) and returns a small
    summary dict, which is what travels back to the driver.
    """

    def write(self, task: RolloutTask, rollouts: Iterator[Rollout]) -> dict:
        raise NotImplementedError

    def is_done(self, task: RolloutTask) -> bool:
        """True if the task's output already exists (a rerun skips it)."""
        return False


@dataclasses.dataclass(frozen=True)
class RunPolicyFn:
    """The policy constructor of one run, with a key its workers recognize the run by (the
    constructor itself arrives as a new object with every task on Ray)."""

    policy_fn: PolicyFn
    key: str

    def __call__(self):
        return build_policy(self.policy_fn)


class RolloutWorker:
    """Runs rollout tasks in one environment, built once (in this process or as a Ray actor).

    `on_ray=True` (a worker process of its own): quiet TensorFlow and one math thread, since
    there are as many workers as cores. Sinks (TFRecords) and learned policies run TF there;
    pickle-writing workers with simple policies never load it (less memory and start-up).
    """

    def __init__(self, make_env: MakeEnv, on_ray: bool = False):
        if on_ray:
            from rl755.common import tf_setup

            tf_setup.quiet()
            tf_setup.limit_threads_without_importing(1)
        self.env = make_env()
        self._kept = None  # (run key, policy) of a policy reusable across tasks

    def _policy(self, policy_fn):
        """The task's policy: the one kept from this run's earlier task if it is reusable."""
        key = policy_fn.key if isinstance(policy_fn, RunPolicyFn) else None
        if key is not None and self._kept is not None and self._kept[0] == key:
            return self._kept[1]
        policy = build_policy(policy_fn)
        reusable = key is not None and getattr(policy, "reusable_across_tasks", False)
        self._kept = (key, policy) if reusable else None
        return policy

    def run(
        self,
        policy_fn: PolicyFn,
        task: RolloutTask,
        max_steps: int,
        sink: RolloutSink | None = None,
        progress_actor: Any = None,
        on_rollout: Callable[[int], None] | None = None,
    ) -> Any:
        """The task's list of Rollouts (no sink) or the sink's summary dict (+ cpu_seconds).
        Reports rollouts done so far to `on_rollout(n)` and/or `progress_actor.set(key, n)`."""
        policy = self._policy(policy_fn)

        def generate() -> Iterator[Rollout]:
            for n, (index, seed) in enumerate(task.items):
                rollout = run_episode(self.env, policy, max_steps, seed)
                rollout.metadata["index"] = index
                yield rollout
                if on_rollout is not None:
                    on_rollout(n + 1)
                if progress_actor is not None:
                    progress_actor.set.remote(task.key, n + 1)

        if sink is None:
            return list(generate())
        cpu_start = time.process_time()
        summary = sink.write(task, generate())
        if isinstance(summary, dict):
            summary.setdefault("cpu_seconds", time.process_time() - cpu_start)
        return summary

    def close(self) -> None:
        self.env.close()


def _check(parallelism: int, max_steps: int, rollout_timeout: float | None, tasks) -> None:
    if parallelism <= 0:
        raise ValueError(f"parallelism must be positive, got {parallelism}.")
    if max_steps <= 0:
        raise ValueError(f"max_steps must be positive, got {max_steps}.")
    if rollout_timeout is not None and rollout_timeout < 0:
        raise ValueError(f"rollout_timeout must be >= 0 seconds, got {rollout_timeout}.")
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("Task keys must be unique.")


def runs_on_ray(
    parallelism: int, tasks: Sequence[RolloutTask], max_steps: int, ray_address: str | None
) -> bool:
    """Whether a run of `tasks` (those still to do) goes to Ray when the caller leaves it open:
    with `ray_address`, or in a connected Ray session, when it can use 2 workers; otherwise
    only when it is larger than `SMALL_RUN_FRAMES` too."""
    if ray_address:
        return True
    if parallelism == 1 or len(tasks) <= 1:
        return False
    ray = sys.modules.get("ray")  # a connected session implies Ray was imported
    if ray is not None and ray.is_initialized():
        return True
    return sum(len(t.items) for t in tasks) * max_steps > SMALL_RUN_FRAMES


def run_rollout_tasks(
    make_env: MakeEnv,
    policy_fn: PolicyFn,
    tasks: Sequence[RolloutTask],
    max_steps: int,
    parallelism: int = 1,
    sink: RolloutSink | None = None,
    ray_address: str | None = None,
    max_retries: int = 3,
    progress: bool = True,
    force_ray: bool = False,
    rollout_timeout: float | None = None,
    use_ray: bool | None = None,
    timings: dict | None = None,
) -> list[Any]:
    """Runs each task once; returns per-task results in task order.

    A result is the task's list of Rollouts (no sink) or the sink's summary dict. Tasks run
    on at most `parallelism` Ray workers (`rl755.common.ray_pool`) if `use_ray` (or
    `force_ray`) is true, or if it is None and `runs_on_ray` says so; otherwise in this
    process. Tasks whose output `sink.is_done` are skipped (their result is None). The
    progress bar counts rollouts as they finish. `timings`, if given, receives "ray" (True if
    the run used Ray), and on Ray "ray_start_s" (`ray.init`, 0 when joining a session) and
    "workers_ready_s" (from the pool's creation until its first worker answered).

    On Ray, a task whose worker died, or still running after `rollout_timeout` seconds per
    rollout in it (a hung environment or worker; None or 0: no limit), has its worker killed
    and replaced and starts again from scratch, at most `max_retries` times; that is safe
    because sinks publish a task's output only when it is complete.
    """
    _check(parallelism, max_steps, rollout_timeout, tasks)
    if not isinstance(policy_fn, RunPolicyFn):
        policy_fn = RunPolicyFn(policy_fn, uuid.uuid4().hex)
    results: list[Any] = [None] * len(tasks)
    todo = [i for i, t in enumerate(tasks) if sink is None or not sink.is_done(t)]
    skipped = len(tasks) - len(todo)
    if skipped:
        log.info("Skipping %d of %d tasks whose output already exists.", skipped, len(tasks))
    bar = _progress_bar(sum(len(tasks[i].items) for i in todo), progress)
    try:
        if not todo:
            return results
        if force_ray:
            use_ray = True
        if use_ray is None:
            use_ray = runs_on_ray(parallelism, [tasks[i] for i in todo], max_steps, ray_address)
        if timings is not None:
            timings["ray"] = bool(use_ray)
        if not use_ray:
            worker = RolloutWorker(make_env)
            try:
                for i in todo:
                    done_before = bar.n
                    results[i] = worker.run(
                        policy_fn,
                        tasks[i],
                        max_steps,
                        sink,
                        on_rollout=lambda n, b=done_before: _set_bar(bar, b + n),
                    )
            finally:
                worker.close()
            return results
        todo_results = _run_on_ray(
            make_env,
            policy_fn,
            [tasks[i] for i in todo],
            max_steps,
            parallelism,
            sink,
            ray_address,
            max_retries,
            bar,
            rollout_timeout or None,
            timings if timings is not None else {},
        )
        for i, r in zip(todo, todo_results):
            results[i] = r
        return results
    finally:
        bar.close()


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="rollout", desc="rollouts", disable=not enabled, smoothing=0.1)


def _set_bar(bar, n: int) -> None:
    if n != bar.n:
        bar.n = n
        bar.refresh()


def _run_on_ray(
    make_env, policy_fn, tasks, max_steps, parallelism, sink, ray_address, max_retries, bar,
    rollout_timeout, timings,
) -> list[Any]:  # fmt: skip
    import ray

    from rl755.common.ray_pool import Job, RayWorkerPool

    hint = (
        "Raise --rollout_timeout if the environment is just slow on these machines, or look "
        "for a hung environment; see the Ray logs (/tmp/ray/session_latest/logs)."
    )
    jobs = []
    for t in tasks:
        n = len(t.items)
        timeout = rollout_timeout * n if rollout_timeout else None
        name = f"Rollout task {t.key!r} ({n} rollouts" + (
            f", --rollout_timeout={rollout_timeout:g} s each)" if rollout_timeout else ")"
        )
        jobs.append(Job(name, (policy_fn, t, max_steps, sink), timeout))
    with RayWorkerPool(
        RolloutWorker,
        args=(make_env, True),
        size=min(parallelism, len(tasks)),
        max_retries=max_retries,
        # Without --rollout_timeout nothing is timed (a shared cluster may be slow to start
        # workers); with it, a worker that cannot even start is also not waited for forever.
        startup_timeout=300.0 if rollout_timeout else None,
        hint=hint,
        ray_address=ray_address,
        ray_num_cpus=parallelism,
        keep_workers=True,
    ) as pool:
        # Per-rollout progress inside multi-rollout tasks comes from a tiny counter actor.
        progress_actor = None
        if any(len(t.items) > 1 for t in tasks) and not bar.disable:
            from rl755.data_gen.progress import ProgressCounts

            progress_actor = ray.remote(num_cpus=0)(ProgressCounts).remote()
            jobs = [dataclasses.replace(j, args=(*j.args, progress_actor)) for j in jobs]
        finished = 0

        def on_result(i: int, _) -> None:
            nonlocal finished
            finished += len(tasks[i].items)

        def on_poll(running: list[int]) -> None:
            in_flight = 0
            if progress_actor is not None and running:
                with contextlib.suppress(Exception):
                    counts = ray.get(progress_actor.get.remote(), timeout=5)
                    in_flight = sum(
                        min(counts.get(tasks[i].key, 0), len(tasks[i].items)) for i in running
                    )
            _set_bar(bar, finished + in_flight)

        try:
            return pool.run("run", jobs, on_result=on_result, on_poll=on_poll)
        finally:
            timings.update(ray_start_s=pool.ray_start_s, workers_ready_s=pool.first_ready_s)
            if progress_actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(progress_actor)


def serial_rollouts(
    make_env: MakeEnv,
    policy_fn: PolicyFn,
    num_rollouts: int,
    max_steps: int,
    seed: int | None = None,
    progress: bool = True,
) -> list[Rollout]:
    """`num_rollouts` rollouts one after the other in this process (one env, reused)."""
    base = random_base_seed() if seed is None else seed
    tasks = [
        RolloutTask(key=str(i), items=((i, rollout_seed(base, i)),)) for i in range(num_rollouts)
    ]
    results = run_rollout_tasks(
        make_env, policy_fn, tasks, max_steps, parallelism=1, progress=progress
    )
    return [r for res in results for r in res]


def parallel_rollouts(
    make_env: MakeEnv,
    policy_fn: PolicyFn,
    num_rollouts: int,
    max_steps: int,
    parallelism: int,
    seed: int | None = None,
    ray_address: str | None = None,
    max_retries: int = 3,
    progress: bool = True,
    rollout_timeout: float | None = None,
) -> list[Rollout]:
    """Exactly `num_rollouts` rollouts, in index order, run `parallelism` at a time on Ray.

    The rollouts come back through Ray's object store; to write them to disk instead (and
    keep frames out of the driver), use `run_rollout_tasks` with a sink, as
    `rl755.data_gen.collect.collect_rollouts` does.
    """
    if num_rollouts <= 0:
        raise ValueError(f"num_rollouts must be positive, got {num_rollouts}.")
    base = random_base_seed() if seed is None else seed
    tasks = [
        RolloutTask(key=str(i), items=((i, rollout_seed(base, i)),)) for i in range(num_rollouts)
    ]
    results = run_rollout_tasks(
        make_env,
        policy_fn,
        tasks,
        max_steps,
        parallelism=parallelism,
        ray_address=ray_address,
        max_retries=max_retries,
        progress=progress,
        force_ray=True,
        rollout_timeout=rollout_timeout,
    )
    return [r for res in results for r in res]
