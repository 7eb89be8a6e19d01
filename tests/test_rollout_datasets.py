"""Shapes, dtypes and semantics of every dataset builder method."""

import fnmatch
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
from rl755.data.common.directories import EncodedRolloutsInDirectory
from rl755.data.fake.encoded_rollouts import VaeEncodedRollouts
from rl755.data.fake.raw_rollouts import RawRollouts
from rl755.environments import Environments

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
Z = 4


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


def _encoded_rollout(steps, done=False, offset=0.0, std_devs=True):
    # z_t = t + offset in every dimension: makes targets easy to check.
    return Rollout(
        obs_l=[np.full(Z, t + offset, np.float32) for t in range(steps)],
        action_l=[np.full(3, -t, np.float32) for t in range(steps)],
        reward_l=[float(t) for t in range(steps)],
        done=done,
        obs_std_l=[np.full(Z, 0.5, np.float32) for _ in range(steps)] if std_devs else None,
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


def _encoded_dir(tmp_path, rollouts):
    """`rollouts` as the FAKE_PIXELS encoded training split where VaeEncodedRollouts reads it."""
    d = tmp_path / "data" / "fake" / "encoded_rollouts" / "vae"
    d.mkdir(parents=True)
    _write(d, "encoded-train", rollouts)
    sharded_io.write_dataset_info(
        str(d), {"environment": "FAKE_PIXELS", "representation_size": Z, "has_std_devs": True}
    )
    return d


@pytest.fixture
def encoded_dir(tmp_path):
    return _encoded_dir(
        tmp_path, [_encoded_rollout(12, done=True), _encoded_rollout(3, done=True, offset=100.0)]
    )


def test_encoded_rollouts_shapes(encoded_dir):
    builder = VaeEncodedRollouts()
    assert builder.representation_size() == Z
    r = next(builder.rollouts_ds(shuffle_files=False).as_numpy_iterator())
    assert r["observations"].shape == (12, Z) and r["observations"].dtype == np.float32
    assert r["observation_std_devs"].shape == (12, Z)


def test_an_encoder_without_std_devs_gives_rollouts_without_them(tmp_path):
    """dataset_info.json's has_std_devs: False (a deterministic encoder) reads the shards without
    a std-devs feature; a directory whose info predates the key has them (the VAE's)."""
    d = tmp_path / "data" / "fake" / "encoded_rollouts" / "vae"
    d.mkdir(parents=True)
    _write(d, "encoded-train", [_encoded_rollout(6, std_devs=False)])
    info = {"environment": "FAKE_PIXELS", "representation_size": Z, "has_std_devs": False}
    sharded_io.write_dataset_info(str(d), info)
    r = next(VaeEncodedRollouts().rollouts_ds(shuffle_files=False).as_numpy_iterator())
    assert r["observations"].shape == (6, Z) and "observation_std_devs" not in r
    older = _encoded_dir(tmp_path / "older", [_encoded_rollout(6)])
    info = json.loads((older / "dataset_info.json").read_text())
    del info["has_std_devs"]
    (older / "dataset_info.json").write_text(json.dumps(info))
    pattern = str(older / "encoded-{split}*.tfrecord-*")
    r = next(
        VaeEncodedRollouts(tfrecords_pattern=pattern).rollouts_ds(shuffle_files=False)
        .as_numpy_iterator()
    )  # fmt: skip
    assert r["observation_std_devs"].shape == (6, Z)


def test_encoded_datasets_read_the_file_names_the_encoding_stage_writes():
    """encode_raw_rollouts.py writes <out_name>-<split>-o..-of-...tfrecord-..-of-.. with
    --out_name=encoded by default: every encoded dataset's pattern matches those names."""
    from rl755.data_gen.encode_shards import output_file_name

    for builder in (VaeEncodedRollouts(), *(c() for c in _all_encoded_classes())):
        pattern = builder.tfrecords_pattern()
        for split in ("train", "validation"):
            name = os.path.join(
                builder.directory(), output_file_name("encoded", split, 3, 12, 1, 4)
            )
            assert fnmatch.fnmatch(name, pattern.format(split=split)), (name, pattern)


def _all_encoded_classes():
    """Every environment's encoded dataset classes, built anew: the cached ones were made when
    a test module imported them (rl755.data.fake), before any test ran."""
    from rl755.data import registry

    build = registry._encoded_rollouts_classes.__wrapped__
    return [c for env in Environments for _, c in build(env)]


def test_each_built_encoded_dataset_class_hints_at_encoding_when_nothing_is_encoded(tmp_path):
    root = tmp_path / "data" / "fake" / "encoded_rollouts"
    [vae] = [c for c in _all_encoded_classes() if c.ENVIRONMENT.name == "FAKE_PIXELS"][:1]
    assert vae.__name__ == "VaeEncodedRollouts" and vae.__module__ == "rl755.data.registry"
    hint = vae()._missing_data_hint()
    assert hint.startswith(f"No encoded rollouts under {root}. Encode raw rollouts first")
    assert hint.endswith("or --rollouts_pattern='<dir>/encoded-{split}*.tfrecord-*'.")


def test_slices_of_one_step_are_allowed_and_of_none_refused(encoded_dir):
    s = next(VaeEncodedRollouts().get_autoregressive_slices(1).as_numpy_iterator())
    assert s["inputs"].shape == (1, Z + 3)  # z and action of one step
    with pytest.raises(ValueError, match="sequence_length must be a positive integer, got 0"):
        VaeEncodedRollouts().get_autoregressive_slices(0)


def test_shuffled_files_come_in_a_new_order_each_pass(tmp_path):
    """rollouts_ds(repeat=True): the shard order is drawn again for every pass over them."""
    d = tmp_path / "data" / "fake" / "encoded_rollouts" / "vae"
    d.mkdir(parents=True)
    for i in range(6):
        _write(d, "encoded-train", [_encoded_rollout(2, offset=100.0 * i)], "GZIP", i, 6)
    info = {"environment": "FAKE_PIXELS", "representation_size": Z, "has_std_devs": True}
    sharded_io.write_dataset_info(str(d), info)
    from rl755.common import determinism

    determinism.set_op_determinism(True)  # the interleave's order is the files' (reset after)
    tf.random.set_seed(0)
    ds = VaeEncodedRollouts().rollouts_ds(repeat=True, shuffle_files=True).take(36)
    order = [int(r["observations"][0, 0]) // 100 for r in ds.as_numpy_iterator()]
    passes = {tuple(order[i : i + 6]) for i in range(0, 36, 6)}
    assert sorted(set(order)) == list(range(6)) and len(passes) > 1, order


def test_episode_start_slices_begin_at_each_rollouts_first_step(encoded_dir):
    """slice_start="episode_start": every slice is the rollout's first L steps (z_t = t, or
    100 + t), never a later window; an unknown value fails naming the valid ones."""
    ds = VaeEncodedRollouts().get_autoregressive_slices(5, slice_start="episode_start")
    seen = set()
    for s in ds.take(40).as_numpy_iterator():
        offset = 100.0 if s["inputs"][0, 0] >= 100 else 0.0
        steps = int(s["mask"].sum())
        assert steps == (3 if offset else 5)
        np.testing.assert_array_equal(s["inputs"][:steps, 0], offset + np.arange(steps))
        seen.add(offset)
    assert seen == {0.0, 100.0}
    with pytest.raises(ValueError, match="uniform, episode_start"):
        VaeEncodedRollouts().get_autoregressive_slices(5, slice_start="middle")


def test_autoregressive_slices_alignment(encoded_dir):
    # Two terminated rollouts: 12 steps with z_t = t, and 3 steps with z_t = 100 + t;
    # a_t = -t and r_t = t in both.
    ds = VaeEncodedRollouts().get_autoregressive_slices(5, repeat=True)
    assert ds.element_spec["inputs"].shape == (5, Z + 3)
    tf.random.set_seed(1)
    starts = {12: set(), 3: set()}
    for s in ds.take(300).as_numpy_iterator():
        offset = 100.0 if s["inputs"][0, 0] >= 100 else 0.0
        n = 3 if offset else 12
        start = int(s["rewards"][0])
        steps = int(s["mask"].sum())
        assert steps == min(5, n - start)
        t = start + np.arange(steps)
        np.testing.assert_array_equal(s["inputs"][:steps, 0], offset + t)
        np.testing.assert_array_equal(s["inputs"][:steps, Z], -t)
        np.testing.assert_array_equal(s["rewards"][:steps], t)
        np.testing.assert_array_equal(s["mask"], (np.arange(5) < steps).astype(np.float32))
        # z_{t+1} exists for every valid step but the rollout's last one.
        has_next = t + 1 < n
        np.testing.assert_array_equal(s["target_mask"][:steps], has_next.astype(np.float32))
        np.testing.assert_array_equal(s["targets"][:steps, 0][has_next], offset + (t + 1)[has_next])
        # done only at the very last step of a (terminated) rollout.
        np.testing.assert_array_equal(s["dones"][:steps], (t == n - 1).astype(np.float32))
        np.testing.assert_array_equal(s["inputs"][steps:], 0.0)
        starts[n].add(start)
    # Every start is possible, so an episode's last step is trained on as often as the others.
    assert starts == {12: set(range(12)), 3: set(range(3))}


def test_a_rollout_cut_by_the_time_limit_has_no_episode_end(tmp_path):
    """Slices mark an episode end ("dones" 1) only at the last step of a rollout that
    terminated: one cut by the time limit (done False) ends no episode, so the done head never
    learns ends that did not happen."""
    _encoded_dir(
        tmp_path, [_encoded_rollout(6, done=False), _encoded_rollout(3, done=True, offset=100.0)]
    )
    ds = VaeEncodedRollouts().get_autoregressive_slices(
        6, slice_start="episode_start", shuffle_files=False
    )
    seen = {}
    for s in ds.take(20).as_numpy_iterator():
        steps = int(s["mask"].sum())
        seen[steps] = s["dones"][:steps].tolist()
    assert seen == {6: [0.0] * 6, 3: [0.0, 0.0, 1.0]}


def test_difference_targets_and_sampling(encoded_dir):
    builder = VaeEncodedRollouts()
    tf.random.set_seed(0)
    diff = list(builder.get_autoregressive_slices(4, difference_targets=True, repeat=False))
    for d in diff:
        m = d["target_mask"].numpy() == 1
        np.testing.assert_allclose(d["targets"].numpy()[m], 1.0)  # z_{t+1} - z_t = 1
    sampled = list(builder.get_autoregressive_slices(4, sample_observations=True, repeat=False))
    for s in sampled:
        z_in = s["inputs"].numpy()[:, :Z]
        m = s["mask"].numpy() == 1
        assert np.std(z_in[m] - np.round(z_in[m])) > 0.05  # noise with std 0.5 was added
        # The target at t is the (same) sampled input at t + 1.
        both = (s["target_mask"].numpy()[:-1] == 1) & (s["mask"].numpy()[1:] == 1)
        np.testing.assert_allclose(s["targets"].numpy()[:-1][both], z_in[1:][both])


def test_representation_size_missing_is_explained(tmp_path):
    class Nowhere(EncodedRolloutsInDirectory):
        ENVIRONMENT = Environments.FAKE_PIXELS
        SUBDIR = "nothing_here"

    with pytest.raises(FileNotFoundError) as info:
        Nowhere().representation_size()
    where = tmp_path / "data" / "fake" / "encoded_rollouts" / "nothing_here"
    assert str(info.value) == (
        f"Nowhere: no representation_size known: {where} has no dataset_info.json. Encode "
        "rollouts there first (scripts/data_gen/encode_raw_rollouts.py) or pass "
        "representation_size=."
    )
    assert Nowhere(representation_size=8).representation_size() == 8


def test_a_missing_encoded_dataset_points_at_the_encoded_shards_that_are_there(tmp_path):
    """A dataset class of one's own (not the registry's) with no shards: the error says how to
    encode, and names a directory of encoded shards with the --rollouts_pattern reading it."""
    from sequential_helpers import write_encoded_dataset

    from rl755.common.errors import MissingData

    class Nowhere(EncodedRolloutsInDirectory):
        ENVIRONMENT = Environments.FAKE_PIXELS
        SUBDIR = "nothing_here"

    root = tmp_path / "data" / "fake" / "encoded_rollouts"
    advice = (
        "Encode raw rollouts first: python scripts/data_gen/encode_raw_rollouts.py "
        f"--environment=FAKE_PIXELS ... (with --model_dir=D it writes to {root}/<D's name>/), "
        "or point --rollouts_pattern at encoded shards (a glob with '{split}')."
    )
    with pytest.raises(MissingData) as info:
        Nowhere(representation_size=4).get_tfrecord_files()
    assert f"{advice} Data locations come from" in str(info.value)
    write_encoded_dataset(root / "mine")
    with pytest.raises(MissingData) as info:
        Nowhere(representation_size=4).get_tfrecord_files()
    pattern = root / "mine" / "encoded-{split}*.tfrecord-*"
    assert (
        f"{advice} Encoded shards are in {root / 'mine'}: pass --rollouts_pattern='{pattern}' "
        "to read them. Data locations come from"
    ) in str(info.value)


def test_shard_checks_read_the_train_split_unless_told(raw_dir):
    builder = RawRollouts()
    assert builder.check_shards() == builder.get_tfrecord_files("train")
    assert builder.check_shards("validation") == builder.get_tfrecord_files("validation")
    assert len(builder.check_shards()) == 2


def test_missing_encoded_shards_name_the_flags_and_the_directories_found(tmp_path):
    """Stage 4 on a dataset name with no shards: the error names --rollouts_dataset for each
    encoded directory that is there that has a name, and the --rollouts_pattern that reads each
    one that has none."""
    from sequential_helpers import train_tiny, write_encoded_dataset

    def error():
        with pytest.raises(FileNotFoundError) as e:
            train_tiny(tmp_path / "model", 2, "lstm.deterministic_lstm")  # VaeEncodedRollouts
        return str(e.value)

    root = tmp_path / "data" / "fake" / "encoded_rollouts"
    (root / "half_done").mkdir(parents=True)  # a directory without shards is not named
    nothing = error()
    assert f"No encoded rollouts under {root}." in nothing
    assert "--model=<a zoo encoder> --split=train" in nothing
    assert "or --rollouts_pattern='<dir>/encoded-{split}*.tfrecord-*'." in nothing
    write_encoded_dataset(root / "raw_rollout_vae_4ld")
    write_encoded_dataset(root / "my_encoder")
    found = error()
    assert f"no 'train' shards match {root / 'vae' / 'encoded-train'}" in found
    assert (
        f"Encoded rollouts found in {root / 'my_encoder'}: pass --rollouts_pattern="
        f"'{root / 'my_encoder' / 'encoded-{split}*.tfrecord-*'}' to read them; in "
        f"{root / 'raw_rollout_vae_4ld'}: pass --rollouts_dataset=RawRolloutVae4ld."
    ) in found
    assert not (tmp_path / "model").exists()


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


def test_a_named_encoded_dataset_knows_its_z_without_a_sidecar():
    from rl755.data import registry

    cls = registry.encoded_rollouts_class(Environments.FAKE_PIXELS, "RawRolloutVae4ld")
    assert cls().representation_size() == 4


def test_unshuffled_autoregressive_slices_come_in_shard_order(tmp_path):
    d = tmp_path / "data" / "fake" / "encoded_rollouts" / "vae"
    d.mkdir(parents=True)
    for i in range(8):  # rollout i (z = t + 10 i) alone in shard i
        _write(d, "encoded-train", [_encoded_rollout(6, offset=10.0 * i)], "GZIP", i, 8)
    info = {"environment": "FAKE_PIXELS", "representation_size": Z, "has_std_devs": True}
    sharded_io.write_dataset_info(str(d), info)
    slices = VaeEncodedRollouts().get_autoregressive_slices(3, repeat=False, shuffle_files=False)
    assert [int(x["inputs"][0, 0] // 10) for x in slices.as_numpy_iterator()] == list(range(8))
