"""Stage 1: rollouts, policies, direct TFRecord shards, pickle conversion, corrupted-shard finder."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tensorflow as tf

from rl755.common import ray_pool, sharded_io
from rl755.common.errors import BadInput, WorkerFailure
from rl755.common.structs import Rollout
from rl755.data_gen import collect, convert, corrupted, episodes, shards
from rl755.data_gen import rollout_tasks as tasks_
from rl755.data_gen.pickles import list_pickles, load_rollouts
from rl755.environments import Environments
from rl755.policies import generic, resolve_policy

FAKE = Environments.FAKE_PIXELS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts", "data_gen")


def _read_shards(files):
    """Rollouts from shard files, in file order then record order."""
    out = []
    for f in files:
        ds = tf.data.TFRecordDataset(f, compression_type=sharded_io.detect_compression(f))
        out.extend(Rollout.deserialize(r.numpy()) for r in ds)
    return out


def _assert_same(a: Rollout, b: Rollout):
    assert len(a) == len(b) and a.done == b.done
    for x, y in zip(a.obs_l, b.obs_l):
        assert x.dtype == y.dtype == np.uint8
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(np.stack(a.action_l), np.stack(b.action_l))
    np.testing.assert_array_equal(np.float32(a.reward_l), np.float32(b.reward_l))


def _run_script(*args, timeout=120):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )


# ---- single / serial rollouts ---------------------------------------------------------------------
class _NoRender:
    """Wraps the fake env so that any render() call fails the test."""

    def __init__(self):
        self.env = FAKE.make()

        def boom():
            raise AssertionError("render() called: observations must come from reset/step")

        self.env.unwrapped.render = boom

    def __call__(self):
        return self.env


def test_single_rollout_takes_observations_from_reset_and_step():
    make = _NoRender()
    r = episodes.single_rollout(make, generic.UniformRandomPolicy, max_steps=30, seed=5)
    env = FAKE.make()
    obs0, _ = env.reset(seed=5)
    np.testing.assert_array_equal(r.obs_l[0], obs0)
    # obs_l[t+1] is what step(action_l[t]) returned.
    obs1, rew0, *_ = env.step(r.action_l[0])
    np.testing.assert_array_equal(r.obs_l[1], obs1)
    assert r.reward_l[0] == pytest.approx(rew0)
    assert len(r) == 24 and not r.done  # the fake env truncates at 24 steps
    assert all(o.shape == (16, 16, 3) and o.dtype == np.uint8 for o in r.obs_l)


def test_seeds_are_distinct_and_reproducible():
    seeds = [episodes.rollout_seed(0, i) for i in range(2000)]
    assert len(set(seeds)) == 2000
    assert episodes.rollout_seed(1, 0) != episodes.rollout_seed(0, 0)
    a = tasks_.serial_rollouts(FAKE.make_fn(), generic.UniformRandomPolicy, 3, 24, seed=4)
    b = tasks_.serial_rollouts(FAKE.make_fn(), generic.UniformRandomPolicy, 3, 24, seed=4)
    for x, y in zip(a, b):
        _assert_same(x, y)
    assert not np.array_equal(np.stack(a[0].action_l), np.stack(a[1].action_l))


def test_real_car_racing_rollout():
    r = episodes.single_rollout(
        Environments.CAR_RACING.make_fn(),
        resolve_policy("CAR_RACING", "HastingsRandomPolicy"),
        max_steps=5,
        seed=0,
    )
    assert len(r) == 5
    frames = np.stack(r.obs_l)
    assert frames.shape == (5, 96, 96, 3) and frames.dtype == np.uint8
    actions = np.stack(r.action_l)
    assert actions.shape == (5, 3) and actions.dtype == np.float32
    assert np.all(actions >= Environments.CAR_RACING.action_low)
    assert np.all(actions <= Environments.CAR_RACING.action_high)
    back = Rollout.deserialize(r.serialize())
    _assert_same(r, back)


# ---- plans: exactly N rollouts ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "n,per_shard,frac", [(8, 3, 0.0), (10, 4, 0.2), (1, 1, 0.5), (7, 16, 0.05)]
)
def test_plan_covers_every_rollout_exactly_once(n, per_shard, frac):
    tasks = collect.plan_tasks("tfrecord", n, 3, "tag", "rollouts", per_shard, frac)
    indices = sorted(i for t in tasks for i, _ in t.items)
    assert indices == list(range(n))
    assert len({t.key for t in tasks}) == len(tasks)
    for t in tasks:
        assert len(t.items) <= per_shard
        assert sharded_io.parse_shard_name(t.key) is not None
    pickles = collect.plan_tasks("pickle", n, 3, "tag")
    assert sorted(i for t in pickles for i, _ in t.items) == list(range(n))
    # Rollout i plays its own seed, rollout_seed(base seed, i): no two rollouts repeat.
    for plan in (tasks, pickles):
        seeds = {i: s for t in plan for i, s in t.items}
        assert seeds == {i: episodes.rollout_seed(3, i) for i in range(n)}


def test_validation_indices():
    assert shards.validation_indices(100, 0.05) == {10, 30, 50, 70, 90}
    assert len(shards.validation_indices(3, 0.05)) == 1
    assert shards.validation_indices(1, 0.5) == set() and shards.validation_indices(9, 0.0) == set()


# ---- round trips, bit exact -------------------------------------------------------------------------
@pytest.mark.parametrize("compression", ["none", "GZIP", "ZLIB"])
def test_direct_tfrecord_round_trip_bit_exact(tmp_path, compression):
    out = str(tmp_path / "raw")
    s = collect.collect_rollouts(
        "FAKE_PIXELS", "HastingsRandomPolicy", num_rollouts=5, parallelism=1, max_steps=30,
        out_dir=out, out_format="tfrecord", seed=11, compression=compression,
        rollouts_per_shard=2, validation_fraction=0.2, progress=False,
    )  # fmt: skip
    assert s["rollouts"] == 5 and s["frames"] == 5 * 24
    want = {c: c for c in ("GZIP", "ZLIB")}.get(compression, "")
    assert all(sharded_io.detect_compression(f) == want for f in s["files"])
    got = {}
    for split in shards.SPLITS:
        files = sharded_io.list_shards(os.path.join(out, f"rollouts-{split}*.tfrecord-*"))
        assert files
        got[split] = _read_shards(files)
    assert len(got["train"]) == 4 and len(got["validation"]) == 1
    expected = tasks_.serial_rollouts(
        FAKE.make_fn(), resolve_policy(FAKE, "HastingsRandomPolicy"), 5, 30, seed=11, progress=False
    )
    val = sorted(shards.validation_indices(5, 0.2))
    train_idx = [i for i in range(5) if i not in val]
    by_index = dict(zip(train_idx, got["train"])) | dict(zip(val, got["validation"]))
    for i in range(5):
        _assert_same(by_index[i], expected[i])
    info = sharded_io.read_dataset_info(out)
    assert info["environment"] == "FAKE_PIXELS" and info["observation_shape"] == [16, 16, 3]
    assert info["observation_dtype"] == "uint8" and info["action_size"] == 3
    assert info["compression"] == (want or "none")
    assert not [n for n in os.listdir(out) if sharded_io.is_tmp_path(n)]


@pytest.mark.parametrize("compression", ["none", "GZIP", "ZLIB"])
def test_pickle_then_convert_round_trip_bit_exact(tmp_path, compression):
    pdir, out = str(tmp_path / "pickles"), str(tmp_path / "tfr")
    collect.collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=5, parallelism=1, max_steps=24,
        out_dir=pdir, seed=2, progress=False,
    )  # fmt: skip
    pickles = list_pickles(pdir)
    assert len(pickles) == 5
    originals = [load_rollouts(p)[0] for p in pickles]
    assert originals[0].metadata["environment"] == "FAKE_PIXELS"
    s = convert.convert_pickles_to_tfrecords(
        pdir, out, "rollouts", pickles_per_tfrecord_file=2, compression=compression,
        validation_fraction=0.2, progress=False,
        parallelism=2 if compression == "GZIP" else 1,  # a process pool once
    )  # fmt: skip
    names = sorted(os.path.basename(f) for f in sharded_io.list_shards(f"{out}/*.tfrecord-*"))
    assert names == [
        "rollouts-train.tfrecord-00000-of-00002",
        "rollouts-train.tfrecord-00001-of-00002",
        "rollouts-validation.tfrecord-00000-of-00001",
    ]
    assert s["rollouts"] == 5 and s["written"] == 3
    val = sorted(shards.validation_indices(5, 0.2))
    train = _read_shards(sharded_io.list_shards(f"{out}/rollouts-train.tfrecord-*"))
    valid = _read_shards(sharded_io.list_shards(f"{out}/rollouts-validation.tfrecord-*"))
    for got, i in zip(train + valid, [i for i in range(5) if i not in val] + val):
        _assert_same(got, originals[i])
    assert sharded_io.read_dataset_info(out)["environment"] == "FAKE_PIXELS"


def test_dataset_builder_reads_default_location(tmp_path):
    from rl755.data.fake.raw_rollouts import RawRollouts

    s = collect.collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=4, parallelism=1, max_steps=24,
        out_format="tfrecord", seed=0, validation_fraction=0.25, progress=False,
    )  # fmt: skip
    assert s["out_dir"] == str(tmp_path / "data" / "fake" / "raw_rollouts")
    r = next(iter(RawRollouts().rollouts_ds("validation")))
    assert r["observations"].shape == (24, 16, 16, 3) and r["observations"].dtype == tf.uint8
    assert r["actions"].shape == (24, 3)


def test_rerun_with_same_seed_skips_and_different_seeds_coexist(tmp_path):
    out = str(tmp_path / "raw")
    kw = dict(num_rollouts=3, parallelism=1, max_steps=24, out_dir=out, out_format="tfrecord")
    a = collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", seed=1, progress=False, **kw)
    mtimes = {f: os.stat(f).st_mtime_ns for f in a["files"]}
    again = collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", seed=1, progress=False, **kw)
    assert again["written"] == 0 and again["skipped"] == len(a["files"])
    assert {f: os.stat(f).st_mtime_ns for f in a["files"]} == mtimes
    with pytest.raises(BadInput, match="another --num_rollouts, --rollouts_per_shard"):
        collect.collect_rollouts(
            "FAKE_PIXELS", "RandomPolicy", seed=1, progress=False, **(kw | {"num_rollouts": 4})
        )
    b = collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", seed=2, progress=False, **kw)
    assert not set(a["files"]) & set(b["files"])
    assert len(_read_shards(sharded_io.list_shards(f"{out}/rollouts-*.tfrecord-*"))) == 6


def test_small_runs_stay_in_this_process(tmp_path):
    """Without a Ray session (this test runs before the module's Ray cluster starts), a run
    that one process does in less time than Ray takes to start starts no Ray."""
    s = collect.collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=4, parallelism=2, max_steps=24,
        out_dir=str(tmp_path), out_format="tfrecord", seed=1, progress=False,
    )  # fmt: skip
    assert s["rollouts"] == 4 and s["ray"] is False and s["ray_start_s"] is None
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    assert collect.timing_line(dict(s, seconds=2.04)) == "Took 2.0 s in this process (no Ray)."

    def tasks(n, per_task=1):
        return [tasks_.RolloutTask(str(i), ((i, i),) * per_task) for i in range(n)]

    small = tasks_.SMALL_RUN_FRAMES
    assert not tasks_.runs_on_ray(2, tasks(2), small // 2, None)  # exactly SMALL_RUN_FRAMES
    assert tasks_.runs_on_ray(2, tasks(2), small // 2 + 1, None)
    assert tasks_.runs_on_ray(2, tasks(2, per_task=small), 1, None) == (2 * small > small)
    assert not tasks_.runs_on_ray(1, tasks(8), small, None)  # parallelism 1
    assert not tasks_.runs_on_ray(8, tasks(1, per_task=9), small, None)  # one task
    assert tasks_.runs_on_ray(2, tasks(2), 1, "auto")  # a cluster to join: always


def test_timing_line_names_ray_start_up_apart():
    on_ray = {"seconds": 31.24, "ray": True, "ray_start_s": 6.06, "workers_ready_s": 9.81}
    assert collect.timing_line(on_ray) == (
        "Took 31.2 s, of which Ray start-up 9.8 s (local cluster 6.1 s, first worker ready "
        "after 9.8 s)."
    )
    joined = dict(on_ray, ray_start_s=0.0, workers_ready_s=0.42)
    assert collect.timing_line(joined) == (
        "Took 31.2 s, of which Ray start-up 0.4 s (joined a running session, first worker ready "
        "after 0.4 s)."
    )


# ---- Ray ---------------------------------------------------------------------------------------------
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
        _assert_same(a, b)
    # Direct shards from 2 workers, several rollouts per shard (progress counter actor).
    s = collect.collect_rollouts(
        "FAKE_PIXELS", "HastingsRandomPolicy", num_rollouts=5, parallelism=2, max_steps=24,
        out_dir=str(tmp_path / "raw"), out_format="tfrecord", seed=3, rollouts_per_shard=2,
        progress=True,
    )  # fmt: skip
    assert s["rollouts"] == 5 and len(_read_shards(s["files"])) == 5


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
    assert len(ray_pool.KEPT["actors"]) == 2  # its workers stay up for the next run

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
            _assert_same(a, b)
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
    proc = _run_script(str(driver), timeout=180)
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


# ---- concurrency ------------------------------------------------------------------------------------
def test_two_concurrent_instances_share_one_out_dir(tmp_path):
    """One instance through the original path (an alias), one through the script itself."""
    out = str(tmp_path / "pickles")
    args = [
        "--environment=FAKE_PIXELS", "--policy=RandomPolicy", "--num_rollouts=3",
        "--parallelism=1", "--max_steps=24", f"--out_dir={out}",
    ]  # fmt: skip
    scripts = [
        os.path.join(SCRIPTS, "car_racing", "parallel_rollout_main.py"),
        os.path.join(SCRIPTS, "collect_rollouts.py"),
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    procs = [subprocess.Popen([sys.executable, s, *args], env=env, cwd=REPO) for s in scripts]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    pickles = list_pickles(out)
    assert len(pickles) == 6  # each instance drew its own seed: no name collides
    assert not [n for n in os.listdir(out) if sharded_io.is_tmp_path(n)]
    seeds = {load_rollouts(p)[0].metadata["seed"] for p in pickles}
    assert len(seeds) == 6
    assert len(os.listdir(os.path.join(out, "runs"))) == 2  # both runs recorded


# ---- corrupted shards -------------------------------------------------------------------------------
def _write_shards(directory, n=3, compression="GZIP"):
    rollouts = tasks_.serial_rollouts(
        FAKE.make_fn(), generic.UniformRandomPolicy, n, 24, seed=0, progress=False
    )
    paths = []
    for i, r in enumerate(rollouts):
        p = os.path.join(directory, sharded_io.shard_name("rollouts-train", i, n))
        sharded_io.write_tfrecord(p, [r.serialize(), r.serialize()], compression)
        paths.append(p)
    return paths


@pytest.mark.parametrize("compression", ["none", "GZIP", "ZLIB"])
def test_truncated_shard_found_healthy_not(tmp_path, compression):
    healthy, truncated, _ = _write_shards(str(tmp_path), compression=compression)
    data = open(truncated, "rb").read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) * 2 // 3])
    (tmp_path / ".rollouts-train.tfrecord-00005-of-00009.tmp-abc").write_bytes(b"partial")
    bad, checked = corrupted.find_corrupted_tfrecords(str(tmp_path / "*.tfrecord-*"), False)
    assert checked == 3  # the writer's temporary file is not a shard
    assert [p for p, _ in bad] == [truncated]
    assert corrupted.check_tfrecord_file(healthy) == (2, None)


def test_find_corrupted_script_exit_status_and_quarantine(tmp_path):
    d = tmp_path / "shards"
    d.mkdir()
    _, truncated, _ = _write_shards(str(d))
    data = open(truncated, "rb").read()
    open(truncated, "wb").write(data[:-20])
    bad, _ = corrupted.find_corrupted_tfrecords(f"{d}/*.tfrecord-*", False)
    assert corrupted.dispose_corrupted(bad) == [] and os.path.exists(truncated)  # no flag: kept
    q = tmp_path / "quarantine"
    res = _run_script(
        os.path.join(SCRIPTS, "find_corrupted_tfrecords.py"),
        f"--pattern={d}/*.tfrecord-*",
        f"--quarantine_dir={q}",
    )
    assert res.returncode == 1 and truncated in res.stdout, res.stderr
    assert "1 of 3 files corrupted" in res.stderr
    assert not os.path.exists(truncated) and os.listdir(q) == [os.path.basename(truncated)]
    assert corrupted.find_corrupted_tfrecords(f"{d}/*.tfrecord-*", False) == ([], 2)
    with pytest.raises(ValueError, match="matches no files"):
        corrupted.find_corrupted_tfrecords(f"{tmp_path}/nothing*", False)


def test_find_corrupted_delete_removes_only_the_corrupted_shards(tmp_path):
    d = tmp_path / "shards"
    d.mkdir()
    healthy, truncated, other = _write_shards(str(d), compression="GZIP")
    data = open(truncated, "rb").read()
    open(truncated, "wb").write(data[: len(data) // 2])
    tmp = d / ".rollouts-train.tfrecord-00007-of-00009.tmp-host-1-abcdef12"
    tmp.write_bytes(b"a writer's work in progress")
    res = _run_script(
        os.path.join(SCRIPTS, "find_corrupted_tfrecords.py"),
        f"--pattern={d}/*.tfrecord-*",
        "--delete",
    )
    assert res.returncode == 1 and f"deleted {truncated}" in res.stderr, res.stderr
    assert sorted(os.listdir(d)) == sorted(
        [os.path.basename(healthy), os.path.basename(other), tmp.name]
    )
    assert corrupted.find_corrupted_tfrecords(f"{d}/*.tfrecord-*", False) == ([], 2)
    res = _run_script(
        os.path.join(SCRIPTS, "find_corrupted_tfrecords.py"),
        f"--pattern={d}/*.tfrecord-*",
        "--delete",
    )
    assert res.returncode == 0 and "0 of 2 files corrupted" in res.stderr


# ---- killed conversions -----------------------------------------------------------------------------
def _pickle_dir(tmp_path, n):
    pdir = str(tmp_path / "pickles")
    collect.collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=n, parallelism=1, max_steps=24,
        out_dir=pdir, seed=9, progress=False,
    )  # fmt: skip
    return pdir


def test_failed_conversion_leaves_nothing_corrupted_and_rerun_resumes(tmp_path, monkeypatch):
    pdir, out = _pickle_dir(tmp_path, 6), str(tmp_path / "tfr")
    real = convert.convert_shard
    calls = []

    def failing(*args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated kill between shards")
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(convert, "convert_shard", failing)
    kw = dict(pickles_per_tfrecord_file=1, validation_fraction=0.0, progress=False)
    with pytest.raises(KeyboardInterrupt):
        convert.convert_pickles_to_tfrecords(pdir, out, **kw)
    done = sharded_io.list_shards(f"{out}/*.tfrecord-*")
    assert done == sorted(calls)
    assert corrupted.find_corrupted_tfrecords(f"{out}/*.tfrecord-*", False)[0] == []
    mtimes = {f: os.stat(f).st_mtime_ns for f in done}
    monkeypatch.setattr(convert, "convert_shard", real)
    s = convert.convert_pickles_to_tfrecords(pdir, out, **kw)
    assert s["skipped"] == 2 and s["written"] == 4
    assert {f: os.stat(f).st_mtime_ns for f in done} == mtimes
    assert len(_read_shards(sharded_io.list_shards(f"{out}/*.tfrecord-*"))) == 6


def test_sigkilled_conversion_leaves_nothing_corrupted_and_rerun_resumes(tmp_path):
    pdir, out = _pickle_dir(tmp_path, 8), str(tmp_path / "tfr")
    driver = tmp_path / "slow_convert.py"
    driver.write_text(textwrap.dedent(f"""
        import time
        from rl755.data_gen import convert
        real = convert.convert_shard
        def slow(*a, **k):
            out = real(*a, **k)
            time.sleep(0.4)
            return out
        convert.convert_shard = slow
        convert.convert_pickles_to_tfrecords({pdir!r}, {out!r}, pickles_per_tfrecord_file=1,
                                             validation_fraction=0.0, progress=False)
    """))  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(driver)], env=dict(os.environ), cwd=REPO)
    deadline = time.time() + 120
    while len(sharded_io.list_shards(f"{out}/*.tfrecord-*")) < 2:
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sharded_io.list_shards(f"{out}/*.tfrecord-*")
    assert 2 <= len(done) < 8
    assert corrupted.find_corrupted_tfrecords(f"{out}/*.tfrecord-*", False)[0] == []
    mtimes = {f: os.stat(f).st_mtime_ns for f in done}
    # What the killed process was writing, had it been mid-shard (its name carries the pid).
    leftover = sharded_io.tmp_path_for(os.path.join(out, "rollouts-train.tfrecord-00007-of-00008"))
    leftover = leftover.replace(f"-{os.getpid()}-", f"-{proc.pid}-")
    with open(leftover, "wb") as f:
        f.write(b"half a shard")
    os.utime(leftover, (time.time() - 180,) * 2)  # written before the kill, minutes ago
    s = convert.convert_pickles_to_tfrecords(
        pdir, out, pickles_per_tfrecord_file=1, validation_fraction=0.0, progress=False
    )
    assert not os.path.exists(leftover)  # the rerun cleaned up after the killed run
    assert not [n for n in os.listdir(out) if sharded_io.is_tmp_path(n)]
    assert s["skipped"] == len(done) and s["written"] == 8 - len(done)
    assert {f: os.stat(f).st_mtime_ns for f in done} == mtimes
    assert len(_read_shards(sharded_io.list_shards(f"{out}/*.tfrecord-*"))) == 8


def test_conversion_refuses_to_mix_with_other_plans(tmp_path):
    pdir, out = _pickle_dir(tmp_path, 3), str(tmp_path / "tfr")
    convert.convert_pickles_to_tfrecords(pdir, out, pickles_per_tfrecord_file=1, progress=False)
    with pytest.raises(BadInput, match="other arguments"):
        convert.convert_pickles_to_tfrecords(pdir, out, pickles_per_tfrecord_file=2, progress=False)


def test_conversion_script_and_its_original_path_take_the_same_flags(tmp_path):
    pdir = _pickle_dir(tmp_path, 2)
    for script in ("convert_pickles_to_tfrecords.py", "car_racing/rollout_pickles_to_tfrecords.py"):
        out = str(tmp_path / script.replace("/", "_"))
        res = _run_script(
            os.path.join(SCRIPTS, script), f"--pickle_dir={pdir}", f"--out_dir={out}",
            "--pickles_per_tfrecord_file=1", "--validation_fraction=0.5", "--compression=ZLIB",
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
        assert len(_read_shards(sharded_io.list_shards(f"{out}/*.tfrecord-*"))) == 2
        assert sharded_io.list_shards(f"{out}/rollouts-validation.tfrecord-*")
    bad = _run_script(os.path.join(SCRIPTS, "car_racing", "rollout_pickles_to_tfrecords.py"))
    assert bad.returncode != 0 and "pickle_dir" in bad.stderr


# ---- bad input -----------------------------------------------------------------------------------------
def test_bad_conversion_inputs_fail_fast_with_advice(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(BadInput, match="does not exist.*collect_rollouts"):
        convert.convert_pickles_to_tfrecords(str(tmp_path / "nope"), out, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match="holds no \\*.pickle files.*Collect rollouts first"):
        convert.convert_pickles_to_tfrecords(str(empty), out, progress=False)
    pdir = _pickle_dir(tmp_path, 2)
    with pytest.raises(BadInput, match="pickles_per_tfrecord_file must be a positive"):
        convert.convert_pickles_to_tfrecords(pdir, out, pickles_per_tfrecord_file=0, progress=False)
    with pytest.raises(BadInput, match="parallelism must be a positive"):
        convert.convert_pickles_to_tfrecords(pdir, out, parallelism=-1, progress=False)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BadInput, match="is a file; pass a directory"):
        convert.convert_pickles_to_tfrecords(pdir, str(afile), progress=False)
    good = list_pickles(pdir)[0]
    cases = {
        "dict.pickle": pickle.dumps({"a": 1}),
        "ints.pickle": pickle.dumps([1, 2, 3]),
        "rollout.pickle": pickle.dumps(load_rollouts(good)[0]),
        "truncated.pickle": open(good, "rb").read()[:-100],
        "text.pickle": b"hello.",
    }
    for name, data in cases.items():
        bad_dir = tmp_path / f"bad_{name}"
        bad_dir.mkdir()
        (bad_dir / "a.pickle").write_bytes(open(good, "rb").read())
        (bad_dir / name).write_bytes(data)
        with pytest.raises(BadInput, match=f"{name} is not a pickled list of Rollouts"):
            convert.convert_pickles_to_tfrecords(str(bad_dir), out + name, progress=False)
        assert not os.path.exists(out + name) or not os.listdir(out + name)


def test_bad_collection_inputs_fail_fast_with_advice(tmp_path):
    kw = dict(parallelism=1, max_steps=10, progress=False)
    with pytest.raises(BadInput, match="Valid --environment values: CAR_RACING, FAKE_PIXELS"):
        collect.collect_rollouts("CARRACING", "RandomPolicy", num_rollouts=1, **kw)
    with pytest.raises(BadInput, match="num_rollouts must be a positive integer"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", num_rollouts=0, **kw)
    with pytest.raises(BadInput, match="parallelism must be a positive integer"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", 1, parallelism=0, max_steps=3)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BadInput, match="is a file"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", 1, out_dir=str(afile), **kw)
    with pytest.raises(BadInput, match="apply to --out_format=tfrecord only"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", 1, compression="GZIP", **kw)
    with pytest.raises(BadInput, match="apply to --out_format=tfrecord only"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", 1, rollouts_per_shard=4, **kw)
    with pytest.raises(BadInput, match="rollout_timeout must be >= 0"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", 1, rollout_timeout=-1, **kw)


def test_a_pickle_of_other_things_is_refused_saying_what_it_holds(tmp_path):
    path = tmp_path / "x.pickle"
    for data, kind in (({"a": 1}, "dict"), ([1, 2], "a list of other things"), ([], "a list of other things")):  # fmt: skip
        path.write_bytes(pickle.dumps(data))
        with pytest.raises(BadInput) as info:
            load_rollouts(str(path))
        assert str(info.value) == (
            f"{path} holds {kind}, not a non-empty list of rl755.common.structs.Rollout. "
            "Remove it from the pickle dir (or regenerate it with collect_rollouts.py)."
        )


@pytest.mark.parametrize("stray", [3, 4])
def test_shards_of_another_conversion_are_refused_naming_three(tmp_path, stray):
    pdir, out = _pickle_dir(tmp_path, 2), tmp_path / "tfr"
    out.mkdir()
    names = [f"rollouts-train.tfrecord-{i:05d}-of-00009" for i in range(stray)]
    for name in names:
        (out / name).write_bytes(b"")
    with pytest.raises(BadInput) as info:
        convert.convert_pickles_to_tfrecords(pdir, str(out), progress=False)
    more = ", ..." if stray > 3 else ""
    assert str(info.value) == (
        f"{out} already holds shards named 'rollouts' from another conversion "
        f"({', '.join(names[:3])}{more}). Pass another --out_dir or --out_name, or delete them."
    )
