"""Environments, Rollout <-> TFRecord, sharded I/O, config and strict lookups."""

import json
import os
import socket
import time

import numpy as np
import pytest
import tensorflow as tf

from rl755.common import config, sharded_io
from rl755.common.lookup import resolve
from rl755.common.structs import Rollout, parse_rollout_tensors
from rl755.environments import Environments


def _random_rollout(rng, steps=7, shape=(16, 16, 3), done=True):
    return Rollout(
        obs_l=[rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(steps)],
        action_l=[rng.uniform(-1, 1, 3).astype(np.float32) for _ in range(steps)],
        reward_l=[float(r) for r in rng.normal(size=steps)],
        done=done,
    )


def test_environment_lookup_lists_valid_names():
    assert Environments.from_name("car_racing") is Environments.CAR_RACING
    with pytest.raises(ValueError, match="CAR_RACING, FAKE_PIXELS"):
        Environments.from_name("CAR_RAICNG")


def test_environment_specs_match_gymnasium():
    for env_enum in Environments:
        env = env_enum.make(seed=0)
        obs, _ = env.reset(seed=0)
        assert obs.shape == env_enum.observation_shape and obs.dtype == np.uint8
        assert env.action_space.shape == env_enum.action_shape
        np.testing.assert_allclose(env.action_space.low, env_enum.action_low)
        np.testing.assert_allclose(env.action_space.high, env_enum.action_high)
        env.close()


def test_fake_env_is_deterministic_given_seed_and_actions():
    def run(seed):
        env = Environments.FAKE_PIXELS.make()
        obs, _ = env.reset(seed=seed)
        frames, rewards = [obs], []
        for t in range(30):
            obs, r, term, trunc, _ = env.step(np.array([np.sin(t), 0.5, 0.0], np.float32))
            frames.append(obs)
            rewards.append(r)
            if term or trunc:
                break
        return np.stack(frames), np.array(rewards)

    f1, r1 = run(3)
    f2, r2 = run(3)
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(r1, r2)
    assert len(r1) == 24


def test_rollout_sequence_example_round_trip_is_bit_exact():
    rng = np.random.default_rng(0)
    rollout = _random_rollout(rng)
    back = Rollout.deserialize(rollout.serialize())
    np.testing.assert_array_equal(np.stack(back.obs_l), np.stack(rollout.obs_l))
    np.testing.assert_array_equal(np.stack(back.action_l), np.stack(rollout.action_l))
    np.testing.assert_allclose(back.reward_l, np.float32(rollout.reward_l))
    assert back.done is True


def test_rollout_parse_in_graph_matches(tmp_path):
    rng = np.random.default_rng(1)
    rollouts = [_random_rollout(rng, steps=s) for s in (3, 9)]
    for comp in ("", "GZIP", "ZLIB"):
        path = str(tmp_path / sharded_io.shard_name(f"r{comp}", 0, 1))
        sharded_io.write_tfrecord(path, [r.serialize() for r in rollouts], comp)
        assert sharded_io.detect_compression(path) == comp
    files = sharded_io.list_shards(str(tmp_path / "*.tfrecord-*"))
    assert len(files) == 3
    ds = sharded_io.tfrecord_dataset(files, deterministic=True, cycle_length=1)
    ds = ds.map(lambda s: parse_rollout_tensors(s, (16, 16, 3), 3))
    got = list(ds.as_numpy_iterator())
    assert len(got) == 6
    for i, g in enumerate(got):
        src = rollouts[i % 2]
        assert g["observations"].dtype == np.uint8
        np.testing.assert_array_equal(g["observations"], np.stack(src.obs_l))
        np.testing.assert_array_equal(g["actions"], np.stack(src.action_l))
        assert g["rewards"].shape == (len(src),)


def test_float_observations_round_trip_with_std_devs():
    rng = np.random.default_rng(2)
    r = Rollout(
        obs_l=[rng.normal(size=4).astype(np.float32) for _ in range(5)],
        action_l=[np.zeros(3, np.float32)] * 5,
        reward_l=[0.0] * 5,
        obs_std_l=[np.ones(4, np.float32)] * 5,
    )
    back = Rollout.deserialize(r.serialize())
    np.testing.assert_array_equal(np.stack(back.obs_l), np.stack(r.obs_l))
    parsed = parse_rollout_tensors(
        tf.constant(r.serialize()), (4,), 3, observation_dtype=tf.float32, with_std_devs=True
    )
    np.testing.assert_array_equal(parsed["observations"].numpy(), np.stack(r.obs_l))
    assert parsed["observation_std_devs"].shape == (5, 4)


def test_rollout_validate_rejects_mismatched_lists():
    r = Rollout(obs_l=[np.zeros((2, 2, 3), np.uint8)], action_l=[], reward_l=[0.0])
    with pytest.raises(ValueError, match="disagree"):
        r.validate()


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
    final = str(tmp_path / "x.tfrecord-00000-of-00001")
    with pytest.raises(RuntimeError):
        with sharded_io.atomic_output(final) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"partial")
            raise RuntimeError("killed")
    assert os.listdir(tmp_path) == []


def test_atomic_output_writes_a_hidden_temporary_file_and_renames_it(tmp_path):
    """Readers see the old complete file (or none) until the rename; a failed rewrite keeps
    the old file; the temporary name is hidden from shard globs and next to the final one."""
    final = tmp_path / "x.tfrecord-00000-of-00001"
    final.write_bytes(b"old complete")
    with pytest.raises(RuntimeError):
        with sharded_io.atomic_output(str(final)) as tmp:
            assert os.path.dirname(tmp) == str(tmp_path) and sharded_io.is_tmp_path(tmp)
            with open(tmp, "wb") as f:
                f.write(b"partial")
            raise RuntimeError("killed")
    assert final.read_bytes() == b"old complete" and os.listdir(tmp_path) == [final.name]
    with sharded_io.atomic_output(str(final)) as tmp:
        with open(tmp, "wb") as f:
            f.write(b"new")
        assert final.read_bytes() == b"old complete"
        assert sharded_io.list_shards(str(tmp_path / "*.tfrecord-*")) == [str(final)]
    assert final.read_bytes() == b"new" and os.listdir(tmp_path) == [final.name]


def _dead_pid() -> int:
    """A process id that no process of this host has right now."""
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_tmp_files_are_only_those_of_gone_writers(tmp_path):
    host = socket.gethostname().split(".")[0]
    live = sharded_io.tmp_path_for(str(tmp_path / "a.tfrecord-00000-of-00002"))
    assert f".tmp-{host}-{os.getpid()}-" in live
    dead = str(tmp_path / f".a.tfrecord-00001-of-00002.tmp-{host}-{_dead_pid()}-0123abcd")
    dead_h5 = str(tmp_path / f".model-003.weights.h5.tmp-{host}-{_dead_pid()}-89abcdef.weights.h5")
    other_host = str(tmp_path / f".b.json.tmp-some-other-node-{_dead_pid()}-0123abcd")
    old_other_host = str(tmp_path / ".c.json.tmp-some-other-node-12-0123abcd")
    final = str(tmp_path / "a.tfrecord-00000-of-00002")
    for p in (live, dead, dead_h5, other_host, old_other_host, final):
        open(p, "w").close()
    assert sharded_io.stale_tmp_files(str(tmp_path)) == []  # all were written just now
    day_ago, minutes_ago = time.time() - 25 * 3600, time.time() - 180
    for p in (live, dead, dead_h5, other_host):
        os.utime(p, (minutes_ago, minutes_ago))
    os.utime(old_other_host, (day_ago, day_ago))
    os.utime(final, (day_ago, day_ago))
    assert sharded_io.stale_tmp_files(str(tmp_path)) == sorted([dead, dead_h5, old_other_host])
    assert sharded_io.remove_stale_tmp_files(str(tmp_path)) == sorted(
        [dead, dead_h5, old_other_host]
    )
    assert sorted(os.listdir(tmp_path)) == sorted(
        os.path.basename(p) for p in (live, other_host, final)
    )
    assert sharded_io.stale_tmp_files(str(tmp_path / "missing")) == []


def test_shard_names():
    assert sharded_io.shard_name("rollouts", 3, 74) == "rollouts.tfrecord-00003-of-00074"
    assert sharded_io.parse_shard_name("/a/b/rollouts.tfrecord-00003-of-00074") == (
        "rollouts",
        3,
        74,
    )
    assert sharded_io.parse_shard_name("/a/.rollouts.tfrecord-00003-of-00074.tmp-ab") is None
    for index in (5, -1):
        with pytest.raises(ValueError) as e:
            sharded_io.shard_name("x", index, 5)
        assert str(e.value) == f"Shard index {index} is outside [0, 5)."


def test_config_resolution_order(tmp_path, monkeypatch):
    monkeypatch.delenv("RL755_DATA_DIR")
    cfg = tmp_path / "rl755_config.json"
    cfg.write_text(json.dumps({"data_dir": str(tmp_path / "from_file")}))
    assert config.data_dir() == tmp_path / "from_file"
    monkeypatch.setenv("RL755_DATA_DIR", str(tmp_path / "from_env"))
    assert config.data_dir() == tmp_path / "from_env"
    cfg.write_text(json.dumps({"dat_dir": "typo"}))
    monkeypatch.delenv("RL755_DATA_DIR")
    with pytest.raises(ValueError, match="unknown keys"):
        config.data_dir()


def test_strict_lookup_lists_choices():
    assert resolve("rl755", "environments.Environments") is Environments
    with pytest.raises(LookupError, match="EnvironmentSpec, Environments"):
        resolve("rl755", "environments.Nope")
    # A missing attribute of an attribute: the error names the object it was looked up on.
    with pytest.raises(LookupError, match=r"rl755\.environments\.Environments has no 'NOPE'"):
        resolve("rl755", "environments.Environments.NOPE")
    # The error calls it what the caller looks up ("name" unless said).
    with pytest.raises(LookupError, match="^Invalid name '1x': expected a dotted Python name"):
        resolve("rl755", "1x")
    with pytest.raises(LookupError, match="^Invalid --model '1x'"):
        resolve("rl755", "1x", what="--model")


def test_nonfinite_loss_error_names_terms_checkpoint_and_advice():
    from rl755.common.errors import NonFiniteLossError

    e = NonFiniteLossError.at_step(
        7, {"z": float("nan"), "r": 0.5}, "/m/model-002.weights.h5", "lower the rate", total=1.5
    )
    msg = str(e)
    assert msg.startswith("Non-finite loss at training step 7: loss term(s) z not finite")
    assert "(z=nan, r=0.5; total 1.5)" in msg and "/m/model-002.weights.h5" in msg
    assert msg.endswith(
        "--check_numerics (tf.debugging.enable_check_numerics) to stop at the "
        "first operation that produces a NaN/Inf, and lower the rate."
    )
    # Only the total is bad (every term finite), no checkpoint yet, no total given.
    msg = str(NonFiniteLossError.at_step(1, {"z": 0.1}, None, "x"))
    assert "loss term(s) total not finite (z=0.1)." in msg and "checkpoint is none." in msg


def test_visible_gpus_come_from_cuda_visible_devices_then_slurm():
    from rl755.common.devices import visible_gpu_count

    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "2,3"}) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": " 0 , 1 ,"}) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0  # "no GPU", as CUDA reads it
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "", "SLURM_GPUS_ON_NODE": "4"}) == 0
    assert visible_gpu_count({"SLURM_GPUS_ON_NODE": "4"}) == 4
    assert visible_gpu_count({"SLURM_GPUS_ON_NODE": "gpu:4"}) == 0
    assert visible_gpu_count({}) == 0


def test_dataset_info_agrees_with_what_json_would_store(tmp_path):
    """A second instance's info is compared as JSON stores it: a tuple and a list agree, and
    so do a value and its text where JSON keeps only the text; other values are refused."""
    d = str(tmp_path)
    sharded_io.write_dataset_info(d, {"observation_shape": (16, 16, 3), "path": tmp_path})
    sharded_io.write_dataset_info(d, {"observation_shape": [16, 16, 3], "path": str(tmp_path)})
    with pytest.raises(ValueError, match="describes different data"):
        sharded_io.write_dataset_info(d, {"observation_shape": [8, 8, 3]})


def test_a_checkpoint_that_does_not_fit_names_the_models_class(tmp_path):
    from rl755.common.checkpoints import load_weights_checked

    small, large = tf.keras.Sequential([tf.keras.layers.Dense(2)]), tf.keras.Sequential(
        [tf.keras.layers.Dense(3)]
    )
    small.build((None, 4))
    large.build((None, 4))
    path = str(tmp_path / "m.weights.h5")
    small.save_weights(path)
    with pytest.raises(ValueError) as info:
        load_weights_checked(large, path)
    assert f"Checkpoint {path} does not fit Sequential: the model expects 2" in str(info.value)
    with pytest.raises(ValueError, match="does not fit the big one:"):
        load_weights_checked(large, path, "the big one")


def test_replacing_a_worker_that_is_already_dead_starts_a_new_one(monkeypatch):
    import ray

    from rl755.common.ray_pool import RayWorkerPool

    def dead(actor, no_restart):
        raise ValueError(f"{actor} is dead already")

    monkeypatch.setattr(ray, "kill", dead)
    pool = RayWorkerPool.__new__(RayWorkerPool)
    started = []
    pool._actors, pool._idle = ["a0", "a1"], [0, 1]
    pool._start_worker = started.append
    pool._replace(1)
    assert started == [1] and pool._idle == [0]


def test_the_config_summary_says_whether_the_config_file_is_there(tmp_path):
    path = tmp_path / "rl755_config.json"  # where the test's RL755_CONFIG points
    assert config.describe().splitlines()[0] == f"config file: {path} (absent)"
    path.write_text("{}")
    assert config.describe().splitlines()[0] == f"config file: {path} (found)"


def test_a_multi_task_srun_says_which_task_of_how_many_it_is(monkeypatch, caplog):
    from rl755.common import devices

    class Resolver:
        task_id = 1

        def cluster_spec(self):
            return tf.train.ClusterSpec({"worker": ["a:1", "b:2"]})

    resolver = Resolver()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "2")
    monkeypatch.setattr(devices, "_slurm_resolver", lambda: resolver)
    monkeypatch.setattr(
        tf.distribute, "MultiWorkerMirroredStrategy", lambda cluster_resolver: cluster_resolver
    )
    with caplog.at_level("INFO", logger="absl"):
        assert devices.make_strategy() is resolver
    messages = [r.getMessage() for r in caplog.records]
    assert "Multi-worker training: task 1 of 2 ({'worker': ['a:1', 'b:2']})" in messages
