"""Stage 1 on Ray: exactly N rollouts on two workers, the same bytes as in-process, crashed and
hung tasks retried, reusable policies kept per worker and run, failures stopping the run."""

import os
import textwrap
import time

import pytest
from rollout_helpers import assert_same_rollout, read_shards, run_script

from rl755.common import ray_pool
from rl755.common.errors import WorkerFailure
from rl755.data_gen import collect, episodes
from rl755.data_gen import rollout_tasks as tasks_
from rl755.environments import Environments
from rl755.policies import generic

FAKE = Environments.FAKE_PIXELS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    from rl755.common.ray_pool import ray_session

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with ray_session(2):  # retries a start that timed out on a loaded machine
        assert ray.is_initialized()
        yield


def _crash_once_policy(marker: str, crash_seed: int):
    class CrashOnce(generic.UniformRandomPolicy):
        """Kills its worker process the first time it meets `crash_seed`."""

        def initialize(self, env, max_steps, **kwargs):
            super().initialize(env, max_steps, **kwargs)
            if kwargs.get("seed") == crash_seed and not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)

    return CrashOnce


def test_parallel_rollouts_on_two_ray_workers_exactly_n(ray_cluster, tmp_path):
    got = tasks_.parallel_rollouts(
        FAKE.make_fn(), generic.UniformRandomPolicy, num_rollouts=5, max_steps=24,
        parallelism=2, seed=7, progress=False,
    )  # fmt: skip
    assert len(got) == 5
    want = tasks_.serial_rollouts(
        FAKE.make_fn(), generic.UniformRandomPolicy, 5, 24, seed=7, progress=False
    )
    for a, b in zip(got, want):
        assert_same_rollout(a, b)
    # Direct shards from 2 workers, several rollouts per shard (progress counter actor).
    s = collect.collect_rollouts(
        "FAKE_PIXELS", "HastingsRandomPolicy", num_rollouts=5, parallelism=2, max_steps=24,
        out_dir=str(tmp_path / "raw"), out_format="tfrecord", seed=3, rollouts_per_shard=2,
        progress=True,
    )  # fmt: skip
    assert s["rollouts"] == 5 and len(read_shards(s["files"])) == 5


def test_same_seed_gives_the_same_shard_bytes_in_this_process_and_on_ray(ray_cluster, tmp_path):
    """Determinism and resumability do not depend on where the rollouts ran: the same files
    with the same bytes; a shard deleted from the Ray run is remade by a rerun in one process."""
    kw = dict(
        num_rollouts=5, parallelism=2, max_steps=24, out_format="tfrecord", seed=11,
        rollouts_per_shard=2, progress=False,
    )  # fmt: skip
    here = collect.collect_rollouts("FAKE_PIXELS", "HastingsRandomPolicy", use_ray=False,
                                    out_dir=str(tmp_path / "here"), **kw)  # fmt: skip
    ray = collect.collect_rollouts("FAKE_PIXELS", "HastingsRandomPolicy", use_ray=True,
                                   out_dir=str(tmp_path / "ray"), **kw)  # fmt: skip
    assert (here["ray"], ray["ray"]) == (False, True)
    assert ray["ray_start_s"] == 0.0 and ray["workers_ready_s"] > 0  # joined the session
    # Its idle workers stay up for the next run: both, or one when the other was still starting
    # as the three tasks ended (a race a loaded machine loses now and then).
    assert 1 <= len(ray_pool.KEPT["actors"]) <= 2

    def contents(summary):
        return {os.path.basename(f): open(f, "rb").read() for f in summary["files"]}

    want = contents(here)
    assert len(want) == 3 and contents(ray) == want
    os.remove(ray["files"][1])
    again = collect.collect_rollouts("FAKE_PIXELS", "HastingsRandomPolicy", use_ray=False,
                                     out_dir=str(tmp_path / "ray"), **kw)  # fmt: skip
    assert (again["written"], again["skipped"]) == (1, 2)
    assert contents(again) == want


def test_crashed_worker_is_retried(ray_cluster, tmp_path):
    marker = str(tmp_path / "crashed")
    crash_seed = episodes.rollout_seed(5, 1)
    got = tasks_.parallel_rollouts(
        FAKE.make_fn(), _crash_once_policy(marker, crash_seed), num_rollouts=3, max_steps=24,
        parallelism=2, seed=5, progress=False,
    )  # fmt: skip
    assert os.path.exists(marker)  # the worker did die once
    assert [r.metadata["seed"] for r in got] == [episodes.rollout_seed(5, i) for i in range(3)]


def _hang_policy(marker: str | None, hang_seed: int):
    class HangOnce(generic.UniformRandomPolicy):
        """Hangs its worker the first time it meets `hang_seed` (every time if no marker)."""

        def initialize(self, env, max_steps, **kwargs):
            super().initialize(env, max_steps, **kwargs)
            if kwargs.get("seed") == hang_seed and not (marker and os.path.exists(marker)):
                if marker:
                    open(marker, "w").close()
                time.sleep(3600)

    return HangOnce


def test_hung_task_is_killed_and_retried(ray_cluster, tmp_path):
    marker = str(tmp_path / "hung")
    hang_seed = episodes.rollout_seed(5, 2)
    got = tasks_.parallel_rollouts(
        FAKE.make_fn(), _hang_policy(marker, hang_seed), num_rollouts=3, max_steps=24,
        parallelism=2, seed=5, progress=False, rollout_timeout=8,
    )  # fmt: skip
    assert os.path.exists(marker)  # the worker did hang once
    assert [r.metadata["seed"] for r in got] == [episodes.rollout_seed(5, i) for i in range(3)]
    timed_out = (
        r"'0' \(1 rollouts.*failed 1 times: ran past its time limit \(3 s\).*Raise --rollout_t"
    )
    with pytest.raises(WorkerFailure, match=timed_out):
        tasks_.parallel_rollouts(
            FAKE.make_fn(), _hang_policy(None, episodes.rollout_seed(6, 0)), num_rollouts=1,
            max_steps=24, parallelism=1, seed=6, progress=False, rollout_timeout=3, max_retries=0,
        )  # fmt: skip


def _counted_policy(folder: str, reusable: bool):
    class Counted(generic.UniformRandomPolicy):
        """Leaves a file named after its process each time one is built."""

        reusable_across_tasks = reusable

        def __init__(self):
            super().__init__()
            path = os.path.join(folder, f"{os.getpid()}-{time.monotonic_ns()}")
            open(path, "w").close()

    return Counted


@pytest.mark.parametrize("parallelism", [1, 2])
def test_workers_keep_a_reusable_policy_for_all_their_tasks(ray_cluster, tmp_path, parallelism):
    """One-rollout tasks: a policy that says it can be reused is built once per worker and
    run (a trained controller loads its networks once), any other once per task; both give
    the rollouts of fresh policies."""
    want = tasks_.serial_rollouts(
        FAKE.make_fn(), generic.UniformRandomPolicy, 6, 24, seed=7, progress=False
    )
    for reusable in (True, False):
        folder = tmp_path / f"{reusable}-{parallelism}"
        folder.mkdir()
        got = tasks_.parallel_rollouts(
            FAKE.make_fn(), _counted_policy(str(folder), reusable), num_rollouts=6, max_steps=24,
            parallelism=parallelism, seed=7, progress=False,
        )  # fmt: skip
        for a, b in zip(got, want, strict=True):
            assert_same_rollout(a, b)
        builds = os.listdir(folder)
        workers = {name.split("-")[0] for name in builds}
        if reusable:
            assert len(builds) == len(workers) <= parallelism, builds
        else:
            assert len(builds) == 6, builds


def test_a_worker_reuses_a_policy_only_within_one_run(tmp_path):
    worker = tasks_.RolloutWorker(FAKE.make_fn())
    task = tasks_.RolloutTask("t", ((0, 3),))
    policy_fn = _counted_policy(str(tmp_path), reusable=True)
    for fn in [tasks_.RunPolicyFn(policy_fn, "run 1")] * 2 + [
        tasks_.RunPolicyFn(policy_fn, "run 2"),  # another run: a new policy
        policy_fn,  # no run key: a policy per task
        policy_fn,
    ]:
        worker.run(fn, task, 24)
    assert len(os.listdir(tmp_path)) == 4


def test_pickle_collection_workers_never_load_tensorflow(tmp_path):
    """Ray workers writing pickles with a numpy policy stay free of TF (~0.5 GB, ~3 s each)."""
    driver = tmp_path / "probe.py"
    driver.write_text(textwrap.dedent(f"""
        import os, sys
        from rl755.data_gen import rollout_tasks, sinks
        from rl755.environments import Environments
        from rl755.policies.generic import SmoothNoisePolicy

        class Probe(SmoothNoisePolicy):
            def initialize(self, env, max_steps, **kwargs):
                super().initialize(env, max_steps, **kwargs)
                tf = "tensorflow" in sys.modules
                open(os.path.join({str(tmp_path)!r}, f"{{os.getpid()}}-{{tf}}"), "w").close()

        tasks = [rollout_tasks.RolloutTask(f"r{{i}}.pickle", ((i, i),)) for i in range(4)]
        rollout_tasks.run_rollout_tasks(
            Environments.FAKE_PIXELS.make_fn(), Probe, tasks, 24, parallelism=2,
            sink=sinks.PickleSink({str(tmp_path / "out")!r}), progress=False, force_ray=True)
        assert "tensorflow" not in sys.modules
    """))  # fmt: skip
    os.makedirs(tmp_path / "out")
    proc = run_script(str(driver), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    probes = [n for n in os.listdir(tmp_path) if n.endswith(("-True", "-False"))]
    assert probes and all(n.endswith("-False") for n in probes), probes
    assert len(os.listdir(tmp_path / "out")) == 4


def test_policy_exception_stops_the_run(ray_cluster):
    class Broken(generic.UniformRandomPolicy):
        def sample_action(self, obs, step, rollout, **kwargs):
            raise ValueError("policy is broken")

    with pytest.raises(RuntimeError, match="policy is broken"):
        tasks_.parallel_rollouts(
            FAKE.make_fn(), Broken, 3, 24, parallelism=2, seed=0, progress=False, max_retries=0
        )
