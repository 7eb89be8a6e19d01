"""Stage 1: rollouts, policies, direct TFRecord shards, pickle conversion, corrupted-shard finder."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from rollout_helpers import assert_same_rollout, read_shards

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.common.structs import Rollout
from rl755.data_gen import collect, convert, episodes, shards
from rl755.data_gen import rollout_tasks as tasks_
from rl755.data_gen.pickles import list_pickles, load_rollouts
from rl755.environments import Environments
from rl755.policies import generic, resolve_policy

FAKE = Environments.FAKE_PIXELS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts", "data_gen")


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
        assert_same_rollout(x, y)
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
    assert_same_rollout(r, back)


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
        got[split] = read_shards(files)
    assert len(got["train"]) == 4 and len(got["validation"]) == 1
    expected = tasks_.serial_rollouts(
        FAKE.make_fn(), resolve_policy(FAKE, "HastingsRandomPolicy"), 5, 30, seed=11, progress=False
    )
    val = sorted(shards.validation_indices(5, 0.2))
    train_idx = [i for i in range(5) if i not in val]
    by_index = dict(zip(train_idx, got["train"])) | dict(zip(val, got["validation"]))
    for i in range(5):
        assert_same_rollout(by_index[i], expected[i])
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
    train = read_shards(sharded_io.list_shards(f"{out}/rollouts-train.tfrecord-*"))
    valid = read_shards(sharded_io.list_shards(f"{out}/rollouts-validation.tfrecord-*"))
    for got, i in zip(train + valid, [i for i in range(5) if i not in val] + val):
        assert_same_rollout(got, originals[i])
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
    assert len(read_shards(sharded_io.list_shards(f"{out}/rollouts-*.tfrecord-*"))) == 6


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


# ---- bad input -----------------------------------------------------------------------------------------


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
