"""Rollouts of a `Policy` in a gymnasium environment: single, serial, and parallel on Ray.

    from rl755.environments import Environments
    from rl755.models.car_racing.policies import HastingsRandomPolicy

    env_enum = Environments.CAR_RACING
    rollout = single_rollout(env_enum.make_fn(), HastingsRandomPolicy(), max_steps=1000, seed=3)
    rollout.obs_l[t]     # uint8 [96, 96, 3], what the policy saw at step t (from reset/step)
    rollout.action_l[t]  # float32 [3], what it did
    rollout.reward_l[t]  # float, what followed
    rollouts = parallel_rollouts(env_enum.make_fn(), HastingsRandomPolicy, num_rollouts=8,
                                 max_steps=1000, parallelism=2, seed=0)   # exactly 8, in order

Every observation comes from `reset`/`step`; nothing is rendered a second time per step.
Rollout `i` of a run with base seed `s` uses the seed `rollout_seed(s, i)` for both the
environment's `reset` and the policy, so a run is reproducible and its rollouts differ.

Parallel runs use Ray: a local `ray.init(num_cpus=parallelism)` by default, or an existing
cluster with `ray_address="auto"` / "host:port". Each Ray task runs a group of rollouts in a
worker that keeps its environment between tasks; a `sink` (see `RolloutSink`) lets the
worker write its rollouts straight to disk so frames never travel through the object store.
A worker process that dies is retried (`max_retries`); an exception raised by the policy or
the environment stops the run at once with the worker's traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rl755.common.structs import Rollout

log = logging.getLogger(__name__)


class Policy:
    """What acts in the environment during a rollout.

    Usage (this is what `single_rollout` does):

        policy.initialize(env, max_steps, seed=seed)      # once per rollout, before reset's obs
        obs, _ = env.reset(seed=seed)                      # uint8 [H, W, C]
        for step in range(max_steps):
            action = policy.sample_action(obs, step, rollout)   # float32 [A] in the action box
            obs, reward, terminated, truncated, _ = env.step(action)

    `rollout` is the `Rollout` so far (steps 0..step-1; its obs_l/action_l/reward_l are lists).
    `initialize` receives `seed=` (an int, or None) for the policy's own randomness; a policy
    that derives its randomness from it makes rollouts reproducible. Subclasses override
    `sample_action` and usually `initialize`. A policy is built with no arguments
    (`--policy=RandomPolicy` resolves to the class `rl755.models.<env folder>.policies.RandomPolicy`
    and calls it), so defaults must make sense.
    """

    def initialize(self, env: gym.Env, max_steps: int, **kwargs) -> None:
        """Prepares for a new rollout of at most `max_steps` steps in `env`."""

    def sample_action(self, obs: np.ndarray, step: int, rollout: Rollout, **kwargs) -> np.ndarray:
        """Returns the action for observation `obs` (uint8 [H, W, C]) at `step`: float32 [A]."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement sample_action(self, obs, step, rollout, **kwargs)"
            " returning a float32 [A] action."
        )


PolicyFn = Callable[[], Policy]
MakeEnv = Callable[[], gym.Env]


def build_policy(policy_fn: PolicyFn | Policy) -> Policy:
    """Calls a policy class or factory with no arguments and checks the result is a Policy."""
    if isinstance(policy_fn, Policy):
        return policy_fn
    policy = policy_fn()
    if not isinstance(policy, Policy):
        raise TypeError(
            f"{policy_fn!r} returned {type(policy).__name__}, not a "
            "rl755.data_gen.gym_rollouts.Policy. A --policy must name a Policy subclass or a "
            "function returning one, callable with no arguments."
        )
    return policy


def rollout_seed(base_seed: int, index: int) -> int:
    """The seed of rollout `index` of a run with `base_seed` (distinct per index, in [0, 2**31))."""
    state = np.random.SeedSequence([int(base_seed), int(index)]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


def random_base_seed() -> int:
    """A fresh base seed (used when the user gives none; log it to reproduce the run)."""
    return int(np.random.SeedSequence().generate_state(1)[0]) & 0x7FFFFFFF


def single_rollout(
    env: gym.Env | MakeEnv,
    policy: Policy | PolicyFn,
    max_steps: int,
    seed: int | None = None,
) -> Rollout:
    """Runs one episode of at most `max_steps` steps and returns it as a `Rollout`.

    Args:
      env: a gymnasium environment, or a no-argument constructor (the env is then closed).
      policy: a `Policy`, or a no-argument factory returning one.
      max_steps: step limit; the rollout is shorter if the episode ends first.
      seed: seeds `env.reset` and the policy (None: unseeded).
    Returns:
      Rollout with T <= max_steps steps: obs_l [T x (H, W, C) uint8], action_l [T x (A,)
      float32], reward_l [T floats], done (terminated, not truncated, after the last step).
      `metadata["seed"]` holds the seed.
    """
    if max_steps <= 0:
        raise ValueError(f"max_steps must be positive, got {max_steps}.")
    owns_env = not isinstance(env, gym.Env)
    env_obj = env() if owns_env else env
    try:
        return _run_episode(env_obj, build_policy(policy), max_steps, seed)
    finally:
        if owns_env:
            env_obj.close()


def _run_episode(env: gym.Env, policy: Policy, max_steps: int, seed: int | None) -> Rollout:
    policy.initialize(env, max_steps, seed=seed)
    obs, _ = env.reset(seed=seed)
    rollout = Rollout(metadata={"seed": seed})
    for step in range(max_steps):
        action = np.asarray(policy.sample_action(obs, step, rollout), np.float32)
        rollout.obs_l.append(obs)
        rollout.action_l.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rollout.reward_l.append(float(reward))
        if terminated:
            rollout.done = True
            break
        if truncated:
            break
    return rollout


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


# ---- tasks, sinks and workers ----------------------------------------------------------------
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


_WORKER_ENV: dict[str, Any] = {}


def _worker_env(make_env: MakeEnv) -> gym.Env:
    """This process's environment for `make_env`, created once and reused across tasks."""
    try:
        key = hashlib.sha1(pickle.dumps(make_env)).hexdigest()
    except Exception:  # noqa: BLE001 - unpicklable constructors get a fresh env per call
        key = f"id-{id(make_env)}"
    if _WORKER_ENV.get("key") != key:
        old = _WORKER_ENV.get("env")
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()
        _WORKER_ENV.update(key=key, env=make_env())
    return _WORKER_ENV["env"]


def _run_task(
    make_env: MakeEnv,
    policy_fn: PolicyFn,
    task: RolloutTask,
    max_steps: int,
    sink: RolloutSink | None,
    on_rollout: Callable[[int], None] | None = None,
) -> Any:
    env = _worker_env(make_env)
    policy = build_policy(policy_fn)

    def generate() -> Iterator[Rollout]:
        for n, (index, seed) in enumerate(task.items):
            rollout = _run_episode(env, policy, max_steps, seed)
            rollout.metadata["index"] = index
            yield rollout
            if on_rollout is not None:
                on_rollout(n + 1)

    if sink is None:
        return list(generate())
    cpu_start = time.process_time()
    summary = sink.write(task, generate())
    if isinstance(summary, dict):
        summary.setdefault("cpu_seconds", time.process_time() - cpu_start)
    return summary


def _ray_task_body(make_env, policy_fn, task, max_steps, sink, progress_actor):
    from rl755.common import tf_setup

    tf_setup.quiet()
    # Sinks (TFRecords) and learned policies run TensorFlow here: one math thread per
    # worker, since there are as many workers as cores. Pickle-writing workers with simple
    # policies never load TF (~0.5 GB and ~3 s less per worker).
    tf_setup.limit_threads_without_importing(1)

    def report(n):
        if progress_actor is not None:
            progress_actor.set.remote(task.key, n)

    return _run_task(make_env, policy_fn, task, max_steps, sink, report)


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
) -> list[Any]:
    """Runs each task once; returns per-task results in task order.

    A result is the task's list of Rollouts (no sink) or the sink's summary dict. With
    `parallelism == 1` and no `ray_address` (and not `force_ray`) tasks run in this process;
    otherwise on Ray: a local cluster with `num_cpus=parallelism` unless Ray is already
    initialized or `ray_address` is given, at most `parallelism` tasks at once. Tasks whose
    output `sink.is_done` are skipped (their result is None). The progress bar counts rollouts
    as they finish.

    On Ray, a task that dies with its worker is retried up to `max_retries` times, and so is a
    task still running after `rollout_timeout` seconds per rollout in it (a hung environment
    or worker; None or 0: no limit): its worker is killed and the task starts again from
    scratch, which is safe because sinks publish a task's output only when it is complete.
    """
    if parallelism <= 0:
        raise ValueError(f"parallelism must be positive, got {parallelism}.")
    if max_steps <= 0:
        raise ValueError(f"max_steps must be positive, got {max_steps}.")
    if rollout_timeout is not None and rollout_timeout < 0:
        raise ValueError(f"rollout_timeout must be >= 0 seconds, got {rollout_timeout}.")
    keys = [t.key for t in tasks]
    if len(set(keys)) != len(keys):
        raise ValueError("Task keys must be unique.")
    results: list[Any] = [None] * len(tasks)
    todo = [i for i, t in enumerate(tasks) if sink is None or not sink.is_done(t)]
    skipped = len(tasks) - len(todo)
    if skipped:
        log.info("Skipping %d of %d tasks whose output already exists.", skipped, len(tasks))
    total = sum(len(tasks[i].items) for i in todo)
    bar = _progress_bar(total, progress)
    try:
        if not todo:
            return results
        if parallelism == 1 and ray_address is None and not force_ray:
            for i in todo:
                done_before = bar.n
                results[i] = _run_task(
                    make_env,
                    policy_fn,
                    tasks[i],
                    max_steps,
                    sink,
                    lambda n, b=done_before: _set_bar(bar, b + n),
                )
            return results
        _run_on_ray(
            make_env,
            policy_fn,
            tasks,
            todo,
            max_steps,
            parallelism,
            sink,
            ray_address,
            max_retries,
            bar,
            results,
            rollout_timeout or None,
        )
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


@contextlib.contextmanager
def ray_session(parallelism: int, ray_address: str | None = None) -> Iterator[None]:
    """Connects to Ray for the body: an existing session if there is one, else `ray_address`,
    else a local cluster with `num_cpus=parallelism`. Shuts down only what it started."""
    import ray

    if ray.is_initialized():
        yield
        return
    # Workers import TensorFlow when they unpickle rollout code: keep its start-up chatter out
    # (local workers inherit this process's environment; remote ones get runtime_env).
    from rl755.common import tf_setup

    tf_setup.quiet()
    runtime_env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
    if ray_address:
        ray.init(address=ray_address, runtime_env=runtime_env)
    else:
        ray.init(num_cpus=parallelism, include_dashboard=False, runtime_env=runtime_env)
    try:
        yield
    finally:
        ray.shutdown()


def _run_on_ray(
    make_env,
    policy_fn,
    tasks,
    todo,
    max_steps,
    parallelism,
    sink,
    ray_address,
    max_retries,
    bar,
    results,
    rollout_timeout=None,
) -> None:
    import ray

    with ray_session(parallelism, ray_address):
        remote = ray.remote(num_cpus=1, max_retries=max_retries)(_ray_task_body)
        # Per-rollout progress inside multi-rollout tasks comes from a tiny counter actor.
        multi = any(len(tasks[i].items) > 1 for i in todo)
        progress_actor = None
        if multi and not bar.disable:
            from rl755.data_gen.progress import ProgressCounts

            progress_actor = ray.remote(num_cpus=0)(ProgressCounts).remote()
        pending: dict[Any, int] = {}
        deadlines: dict[Any, float] = {}
        timeouts: dict[int, int] = {}
        queue = list(todo)
        finished_rollouts = 0
        try:
            while queue or pending:
                while queue and len(pending) < parallelism:
                    i = queue.pop(0)
                    ref = remote.remote(
                        make_env, policy_fn, tasks[i], max_steps, sink, progress_actor
                    )
                    pending[ref] = i
                    if rollout_timeout:
                        # At most `parallelism` tasks are submitted, so each starts now.
                        limit = rollout_timeout * len(tasks[i].items)
                        deadlines[ref] = time.monotonic() + limit
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                now = time.monotonic()
                for ref in [r for r, t in deadlines.items() if t <= now and r not in ready]:
                    i = pending.pop(ref)
                    del deadlines[ref]
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                    timeouts[i] = timeouts.get(i, 0) + 1
                    limit = rollout_timeout * len(tasks[i].items)
                    if timeouts[i] > max_retries:
                        raise RuntimeError(
                            f"Rollout task {tasks[i].key!r} ran past its time limit "
                            f"({limit:g} s: rollout_timeout={rollout_timeout:g} s x "
                            f"{len(tasks[i].items)} rollouts) {timeouts[i]} times; its worker "
                            "was killed each time. Raise --rollout_timeout if the environment "
                            "is just slow on these machines, or look for a hung environment."
                        )
                    log.warning(
                        "Rollout task %r ran past %g s; killed its worker and queued it again "
                        "(timeout %d of at most %d retries).",
                        tasks[i].key,
                        limit,
                        timeouts[i],
                        max_retries,
                    )
                    queue.insert(0, i)
                for ref in ready:
                    i = pending.pop(ref)
                    deadlines.pop(ref, None)
                    try:
                        results[i] = ray.get(ref)
                    except Exception as e:
                        raise RuntimeError(f"Rollout task {tasks[i].key!r} failed: {e}") from e
                    finished_rollouts += len(tasks[i].items)
                in_flight = 0
                if progress_actor is not None and pending:
                    with contextlib.suppress(Exception):
                        counts = ray.get(progress_actor.get.remote(), timeout=5)
                        in_flight = sum(
                            min(counts.get(tasks[i].key, 0), len(tasks[i].items))
                            for i in pending.values()
                        )
                _set_bar(bar, finished_rollouts + in_flight)
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if progress_actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(progress_actor)
