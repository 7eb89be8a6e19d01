"""The raw-rollout datasets (stage 1's output): shapes, observations and slices, dataset-info
checks, shard checks and a machine-independent order (encoded ones: test_encoded_datasets)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from rl755.common import sharded_io
from rl755.common.structs import Rollout
from rl755.data.fake.raw_rollouts import RawRollouts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(directory, name, rollouts, compression="GZIP", index=0, total=1):
    path = directory / sharded_io.shard_name(name, index, total)
    sharded_io.write_tfrecord(str(path), [r.serialize() for r in rollouts], compression)


def _raw_rollout(rng, steps, done=False):
    return Rollout(
        obs_l=[rng.integers(0, 256, (16, 16, 3), dtype=np.uint8) for _ in range(steps)],
        action_l=[rng.uniform(-1, 1, 3).astype(np.float32) for _ in range(steps)],
        reward_l=list(rng.normal(size=steps)),
        done=done,
    )


@pytest.fixture
def raw_dir(tmp_path):
    d = tmp_path / "data" / "fake" / "raw_rollouts"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    _write(d, "rollouts-train", [_raw_rollout(rng, 10), _raw_rollout(rng, 5)], "GZIP", 0, 2)
    _write(d, "rollouts-train", [_raw_rollout(rng, 7)], "", 1, 2)
    _write(d, "rollouts-validation", [_raw_rollout(rng, 6)], "ZLIB")
    return d


def test_raw_rollouts_ds_shapes_and_default_location(raw_dir):
    ds = RawRollouts().rollouts_ds("train", shuffle_files=False)
    items = list(ds.as_numpy_iterator())
    assert sorted(len(r["actions"]) for r in items) == [5, 7, 10]
    for r in items:
        assert r["observations"].dtype == np.uint8
        assert r["observations"].shape[1:] == (16, 16, 3)
        assert r["actions"].shape[1:] == (3,) and r["actions"].dtype == np.float32
        assert r["rewards"].shape == r["actions"].shape[:1]
    assert len(list(RawRollouts().rollouts_ds("validation").as_numpy_iterator())) == 1


def test_random_rollout_observations(raw_dir):
    ds = RawRollouts().random_rollout_observations(obs_sampled_per_rollout=3, repeat=False)
    assert ds.element_spec == tf.TensorSpec((16, 16, 3), tf.uint8)
    frames = list(ds.as_numpy_iterator())
    assert len(frames) == 9  # 3 rollouts x 3 frames
    # Every sampled frame is one of the stored frames.
    stored = {
        f.tobytes()
        for r in RawRollouts().rollouts_ds().as_numpy_iterator()
        for f in r["observations"]
    }
    assert all(f.tobytes() in stored for f in frames)
    # Fewer frames than asked: a rollout gives all its frames, each once.
    ds = RawRollouts().random_rollout_observations(obs_sampled_per_rollout=50, repeat=False)
    frames = [f.tobytes() for f in ds.as_numpy_iterator()]
    assert len(frames) == 22 and len(set(frames)) == 22


def test_random_rollout_slices(raw_dir):
    """One slice per long-enough rollout: 6 consecutive steps of it, in order, with the
    actions and rewards of those steps."""
    stored = list(RawRollouts().rollouts_ds(shuffle_files=False).as_numpy_iterator())
    starts = set()
    # Random starts: the two rollouts allow 2 + 5 distinct (length, start) pairs. Draw until three
    # are seen; 20 passes make a false failure about 1e-7 likely (3 passes failed once in CI).
    for _ in range(20):
        if len(starts) > 2:
            break
        items = list(RawRollouts().random_rollout_slices_ds(6, repeat=False).as_numpy_iterator())
        assert len(items) == 2  # the 5-step rollout is skipped
        for r in items:
            assert r["observations"].shape == (6, 16, 16, 3) and r["actions"].shape == (6, 3)
            (src,) = [
                x
                for x in stored
                if any(np.array_equal(r["observations"][0], o) for o in x["observations"])
            ]
            n = len(src["actions"])
            (start,) = [
                i
                for i in range(n - 5)
                if np.array_equal(src["observations"][i], r["observations"][0])
            ]
            for key in ("observations", "actions", "rewards"):
                np.testing.assert_array_equal(r[key], src[key][start : start + 6], err_msg=key)
            starts.add((n, start))
    assert len(starts) > 2  # random starts


def test_a_rollout_exactly_one_slice_long_is_that_slice(raw_dir):
    """Only rollouts shorter than the slice are skipped: the 6-step validation rollout gives
    one 6-step slice, itself."""
    (whole,) = list(RawRollouts().rollouts_ds("validation").as_numpy_iterator())
    (got,) = list(RawRollouts().random_rollout_slices_ds(6, split="validation").as_numpy_iterator())
    for key in ("observations", "actions", "rewards"):
        np.testing.assert_array_equal(got[key], whole[key], err_msg=key)
    assert list(RawRollouts().random_rollout_slices_ds(7, split="validation")) == []


def test_random_samplers_under_determinism_log_no_tf_data_rewrite_error(raw_dir):
    """Every encoder training began with two ERROR lines ("NodeDef mentions attribute
    use_unbounded_threadpool ...", issue 16's logs): a map with random ops, asked to run in
    parallel under op determinism, which tf.data then rewrote. C++ writes to file descriptor
    2, so the samplers run in a child process."""
    code = """
        from rl755.common import determinism
        determinism.configure(seed=3, deterministic=True)
        from rl755.data.fake.raw_rollouts import RawRollouts
        r = RawRollouts()
        frames = list(r.random_rollout_observations(obs_sampled_per_rollout=2, repeat=False))
        slices = list(r.random_rollout_slices_ds(5, repeat=False))
        print(len(frames), len(slices))
        """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["6", "3"], proc.stdout
    assert "NodeDef mentions attribute" not in proc.stderr, proc.stderr[-3000:]
    assert "has no effect" not in proc.stderr, proc.stderr[-3000:]  # map's `deterministic`


def test_missing_data_fails_with_hint(tmp_path):
    with pytest.raises(FileNotFoundError, match="collect_rollouts.py"):
        RawRollouts().rollouts_ds()
    with pytest.raises(ValueError, match="Unknown split"):
        RawRollouts().get_tfrecord_files("test")
    with pytest.raises(ValueError, match="positive"):
        RawRollouts().random_rollout_observations(obs_sampled_per_rollout=0)
    with pytest.raises(ValueError, match="placeholder"):
        RawRollouts(tfrecords_pattern=str(tmp_path / "*.tfrecord-*")).get_tfrecord_files()


def test_mismatched_dataset_info_fails_fast(raw_dir):
    sharded_io.write_dataset_info(str(raw_dir), {"environment": "CAR_RACING"})
    with pytest.raises(ValueError, match="holds CAR_RACING rollouts"):
        RawRollouts().get_tfrecord_files()


def test_dataset_info_conflict_detected(tmp_path):
    sharded_io.write_dataset_info(str(tmp_path), {"environment": "FAKE_PIXELS", "n": 1})
    sharded_io.write_dataset_info(str(tmp_path), {"environment": "FAKE_PIXELS", "n": 1})
    with pytest.raises(ValueError, match="different data"):
        sharded_io.write_dataset_info(str(tmp_path), {"environment": "CAR_RACING"})
    assert json.loads((tmp_path / "dataset_info.json").read_text())["n"] == 1


def test_shard_checks_read_the_train_split_unless_told(raw_dir):
    builder = RawRollouts()
    assert builder.check_shards() == builder.get_tfrecord_files("train")
    assert builder.check_shards("validation") == builder.get_tfrecord_files("validation")
    assert len(builder.check_shards()) == 2


def test_dataset_info_of_another_observation_shape_fails_fast(raw_dir):
    sharded_io.write_dataset_info(
        str(raw_dir), {"environment": "FAKE_PIXELS", "observation_shape": [32, 32, 3]}
    )
    with pytest.raises(ValueError, match=r"expects observations of shape \(16, 16, 3\) but .* "
                       r"holds \(32, 32, 3\) \(dataset_info.json\)"):  # fmt: skip
        RawRollouts().get_tfrecord_files()


def test_unshuffled_rollouts_come_in_one_order_on_any_machine(tmp_path):
    """Without shuffling: one rollout of each of up to 8 shards in turn, then the next, the
    same order whatever the number of cores (a parallel read keeps it)."""
    d = tmp_path / "data" / "fake" / "raw_rollouts"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for shard in range(10):  # shard s holds rollouts of 10 * s + 1 and 10 * s + 2 steps
        rollouts = [_raw_rollout(rng, 10 * shard + k) for k in (1, 2)]
        _write(d, "rollouts-train", rollouts, "GZIP", shard, 10)
    ds = RawRollouts().rollouts_ds(shuffle_files=False)
    lengths = [len(r["rewards"]) for r in ds.as_numpy_iterator()]
    first_eight = [10 * s + 1 for s in range(8)] + [10 * s + 2 for s in range(8)]
    assert lengths == first_eight + [81, 91, 82, 92]


def test_a_rollouts_fingerprint_is_an_int64_of_its_frames_bytes():
    from rl755.data.common.rollout_datasets import rollout_fingerprint

    frames = np.random.default_rng(0).integers(0, 256, (3, 4, 4, 3), dtype=np.uint8)
    fp = rollout_fingerprint(tf.constant(frames))
    assert fp.dtype == tf.int64 and fp.shape == ()
    assert int(fp) == int(rollout_fingerprint(tf.constant(frames.copy())))
    frames[2, 3, 3, 2] ^= 1
    assert int(fp) != int(rollout_fingerprint(tf.constant(frames)))
