"""The encoded-rollout datasets (stage 3's output, stage 4's input): shapes, slices and their
alignment, episode starts and ends, file order, and errors that point at the encoding."""

import fnmatch
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from rl755.common import sharded_io
from rl755.common.structs import Rollout
from rl755.data.common.directories import EncodedRolloutsInDirectory
from rl755.data.fake.encoded_rollouts import VaeEncodedRollouts
from rl755.environments import Environments

Z = 4


def _write(directory, name, rollouts, compression="GZIP", index=0, total=1):
    path = directory / sharded_io.shard_name(name, index, total)
    sharded_io.write_tfrecord(str(path), [r.serialize() for r in rollouts], compression)


def _encoded_rollout(steps, done=False, offset=0.0, std_devs=True):
    # z_t = t + offset in every dimension: makes targets easy to check.
    return Rollout(
        obs_l=[np.full(Z, t + offset, np.float32) for t in range(steps)],
        action_l=[np.full(3, -t, np.float32) for t in range(steps)],
        reward_l=[float(t) for t in range(steps)],
        done=done,
        obs_std_l=[np.full(Z, 0.5, np.float32) for _ in range(steps)] if std_devs else None,
    )


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
