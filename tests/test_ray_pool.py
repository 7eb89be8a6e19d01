"""rl755.common.ray_pool, the one place that handles Ray timeouts, retries and worker
replacement (stage 1's rollout scheduler and the controller's real evaluator both use it).

Faults are injected with marker files in tmp_path: a job kills its worker process (SIGKILL),
hangs, or raises, once or every time. The worker class is built inside a function so Ray ships
it by value (test modules are not importable in workers)."""

import os
import signal
import time

import pytest

from rl755.common import ray_pool
from rl755.common.errors import WorkerFailure
from rl755.common.ray_pool import Job, RayWorkerPool


def _worker_cls():
    class Worker:
        """job(x, fault, marker): 2 * x, unless `fault` fires (once if `marker` is given)."""

        def __init__(self, fail_init: bool = False):
            if fail_init:
                raise ValueError("constructor is broken")

        def pid(self):
            return os.getpid()

        def job(self, x, fault=None, marker=None):
            if fault and not (marker and os.path.exists(marker)):
                if marker:
                    open(marker, "w").close()
                if fault == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if fault == "hang":
                    time.sleep(3600)
                if fault == "raise":
                    raise ValueError(f"job {x} is broken")
            return 2 * x

    return Worker


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # 4 logical CPUs: the shared pool holds 2, the pools of the last test need 1 more.
    with ray_pool.ray_session(4):  # retries a start that timed out on a loaded machine
        assert ray.is_initialized()
        yield


@pytest.fixture(scope="module")
def pool(ray_cluster):
    """One pool of 2 workers for the tests below (a worker start costs seconds)."""
    with RayWorkerPool(
        _worker_cls(), size=2, max_retries=1, startup_timeout=120, hint="Raise --the_timeout."
    ) as p:
        yield p


def _jobs(n, timeout=None, faults=None):
    faults = faults or {}
    return [Job(f"job {i}", (i, *faults.get(i, ())), timeout) for i in range(n)]


def _pids(pool):
    import ray

    return ray.get([a.pid.remote() for a in pool.actors])


def test_results_in_job_order_despite_a_killed_and_a_hung_worker(pool, tmp_path):
    pool.wait_ready()
    pids, failures = _pids(pool), pool.failures_total
    killed, hung = str(tmp_path / "killed"), str(tmp_path / "hung")
    faults = {1: ("kill", killed), 4: ("hang", hung)}
    polled = []
    out = pool.run("job", _jobs(6, timeout=5, faults=faults), on_poll=polled.append)
    assert out == [0, 2, 4, 6, 8, 10]
    assert os.path.exists(killed) and os.path.exists(hung)  # both faults did fire
    assert pool.failures_total == failures + 2
    assert set(_pids(pool)) - set(pids)  # failed workers were replaced
    assert polled  # the driver woke up to check deadlines while jobs ran
    assert pool.run("job", _jobs(3)) == [0, 2, 4]  # the same pool keeps working


def test_a_job_that_keeps_failing_stops_the_run_with_every_cause(pool):
    with pytest.raises(
        WorkerFailure,
        match=r"job 1 failed 2 times: ran past its time limit \(2 s\); ran past its time "
        r"limit \(2 s\)\. Its worker was killed and replaced each time\. Raise --the_timeout",
    ):
        pool.run("job", _jobs(3, timeout=2, faults={1: ("hang",)}))
    with pytest.raises(WorkerFailure, match=r"job 0 failed 2 times: worker died"):
        pool.run("job", _jobs(1, faults={0: ("kill",)}))
    assert pool.run("job", _jobs(4)) == [0, 2, 4, 6]  # repaired: both workers usable
    assert len(set(_pids(pool))) == 2


def test_job_errors_stop_at_once_or_are_retried(pool, tmp_path):
    failures = pool.failures_total
    with pytest.raises(RuntimeError, match="(?s)job 1 failed: .*job 1 is broken") as e:
        pool.run("job", _jobs(2, faults={1: ("raise",)}))
    assert not isinstance(e.value, WorkerFailure) and pool.failures_total == failures
    with RayWorkerPool(
        _worker_cls(), size=1, max_retries=1, startup_timeout=120, retry_errors=True
    ) as retrying:
        assert retrying.run("job", _jobs(2, faults={1: ("raise", str(tmp_path / "r"))})) == [0, 2]
        with pytest.raises(WorkerFailure, match="(?s)job 0 failed 2 times: .*job 0 is broken"):
            retrying.run("job", _jobs(1, faults={0: ("raise",)}))
    with pytest.raises(RuntimeError, match="(?s)A worker failed to start: .*constructor is broken"):
        with RayWorkerPool(_worker_cls(), args=(True,), size=1, startup_timeout=120) as broken:
            broken.run("job", _jobs(1))


def test_start_ray_retries_a_local_start_that_timed_out(monkeypatch):
    """On a loaded machine Ray's node may not register within its fixed 30 s."""
    import ray

    from rl755.common import ray_pool

    calls = []

    def flaky_init(**kwargs):
        calls.append(kwargs)
        if len(calls) < 3:
            raise Exception("The current node timed out during startup. This could happen ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", flaky_init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    assert ray_pool.start_ray(2) is True  # third time lucky
    assert len(calls) == 3

    def slow_init(**kwargs):
        calls.append(kwargs)
        raise Exception("The current node timed out during startup. This could happen ...")

    calls.clear()
    monkeypatch.setattr(ray, "init", slow_init)
    with pytest.raises(
        RuntimeError, match=r"did not start in 3 attempts.*collect_rollouts.py --parallelism=1"
    ):
        ray_pool.start_ray(2)
    assert len(calls) == ray_pool.START_ATTEMPTS

    def broken_init(**kwargs):
        calls.append(kwargs)
        raise Exception("something else")

    calls.clear()
    monkeypatch.setattr(ray, "init", broken_init)
    with pytest.raises(Exception, match="something else"):
        ray_pool.start_ray(2)
    assert len(calls) == 1  # only start-up time-outs are retried


def test_kept_workers_serve_the_next_pool_of_their_kind_only(pool):
    """keep_workers: the next pool of the same class and arguments takes the idle workers of
    the last one (same processes); a dead kept worker is replaced; another kind kills them."""
    cls = _worker_cls()

    def kept_pool(args=()):
        return RayWorkerPool(cls, args=args, size=1, startup_timeout=120, keep_workers=True)

    with kept_pool() as first:
        assert first.run("job", _jobs(1)) == [0]
        pid = _pids(first)
        assert first.ray_start_s == 0.0 and first.first_ready_s > 0  # joined the session
    assert len(ray_pool.KEPT["actors"]) == 1
    with kept_pool() as second:
        assert second.run("job", _jobs(2)) == [0, 2]
        assert _pids(second) == pid and second.kept_workers_taken == 1
    os.kill(pid[0], signal.SIGKILL)  # dies while kept
    with kept_pool() as third:
        assert third.run("job", _jobs(2)) == [0, 2]
        replaced = _pids(third)
        assert replaced != pid
    with kept_pool(args=(False,)) as other:  # another kind: not taken
        assert other.run("job", _jobs(1)) == [0]
        assert _pids(other) != replaced and other.kept_workers_taken == 0
    ray_pool.drop_kept_workers()
    assert ray_pool.KEPT["actors"] == []
    with RayWorkerPool(cls, size=1, startup_timeout=120) as plain:  # keep_workers off
        plain.run("job", _jobs(1))
    assert ray_pool.KEPT["actors"] == []


def test_the_first_ready_worker_logs_the_start_up_once(caplog):
    """What a user reads about Ray's start-up cost, said once per pool."""
    p = RayWorkerPool.__new__(RayWorkerPool)  # no Ray needed for the bookkeeping
    p.first_ready_s, p._created, p.ray_start_s = None, time.monotonic() - 2.0, 1.25
    p._started_ray, p.kept_workers_taken, p.size = True, 1, 3
    with caplog.at_level("INFO", logger=ray_pool.__name__):
        p._note_ready()
        p._note_ready()
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("Ray start-up 2.")
    assert line.endswith(": local cluster started in 1.2 s, first worker ready after "
                         f"{p.first_ready_s:.1f} s (1 of 3 workers kept from an earlier run).")  # fmt: skip


def test_taking_kept_workers_of_an_ended_session_leaves_none_kept():
    from rl755.common import ray_session

    ray_session.KEPT.update(session="an ended one", key="k", actors=["handle"])
    assert ray_session.kept_for("k", 1) == []
    assert ray_session.KEPT == {"session": None, "key": None, "actors": []}
