"""Stage 3: encoding raw rollouts across outer/sub shards, reading them back, the runner."""

from __future__ import annotations

import collections
import os
import stat

import numpy as np
import pytest
import tensorflow as tf
from encoder_helpers import pattern, save_untrained_vae, write_raw_rollouts

from rl755.common import config, devices, sharded_io
from rl755.common.structs import Rollout
from rl755.data_gen import encode, encode_instances, encode_shards

SAVED = "raw_rollout_vae_4ld"


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """5 train shard files of 2 rollouts each (one GZIP), 1 validation file."""
    d = tmp_path_factory.mktemp("raw")
    rollouts = write_raw_rollouts(d, "train", num_files=4, per_file=2, seed=1)
    extra = tmp_path_factory.mktemp("extra")
    rollouts += write_raw_rollouts(
        extra, "train", num_files=1, per_file=2, seed=9, compression="GZIP"
    )
    os.replace(
        extra / sharded_io.shard_name("rollouts-train", 0, 1),
        d / "rollouts-train.tfrecord-zz-gzip",
    )
    write_raw_rollouts(d, "validation", num_files=1, per_file=1, seed=2)
    return d, rollouts


@pytest.fixture
def saved_vae():
    return save_untrained_vae(config.env_models_dir("fake") / SAVED, seed=4)


def _key(actions) -> tuple:
    return tuple(np.round(np.asarray(actions, np.float32).ravel(), 5))


def _read_all(out_dir, split="train"):
    files = sharded_io.list_shards(os.path.join(str(out_dir), f"encoded-{split}*.tfrecord-*"))
    out = []
    for f in files:
        ds = tf.data.TFRecordDataset(f, compression_type=sharded_io.detect_compression(f))
        out += [Rollout.deserialize(r.numpy()) for r in ds]
    return files, out


def test_encode_then_read_matches_the_model(raw, saved_vae, caplog):
    raw_dir, rollouts = raw
    result = encode.encode_raw_rollouts(
        "FAKE_PIXELS", SAVED, "train", None, "encoded", num_sub_shards=2,
        gpu_index=0, batch_size=7, rollouts_pattern=pattern(raw_dir),
    )  # fmt: skip
    assert "ignored" in caplog.text  # --gpu_index on a CPU-only machine
    assert result["out_dir"] == str(config.env_data_dir("fake") / "encoded_rollouts" / SAVED)
    assert result["rollouts"] == len(rollouts)
    info = sharded_io.read_dataset_info(result["out_dir"])
    assert info["representation_size"] == 4 and info["has_std_devs"]
    assert info["encoder"]["checkpoint"].endswith("model-001.weights.h5")

    from rl755.data.fake.encoded_rollouts import RawRolloutVae4ld

    by_key = {_key(r.action_l): r for r in rollouts}
    seen = 0
    for r in RawRolloutVae4ld().rollouts_ds("train").as_numpy_iterator():
        src = by_key[_key(r["actions"])]
        mean, extras = saved_vae.compute_full_representation(tf.constant(np.stack(src.obs_l)))
        np.testing.assert_allclose(r["observations"], mean.numpy(), atol=1e-5)
        np.testing.assert_allclose(r["observation_std_devs"], extras["std_devs"].numpy(), rtol=1e-5)
        np.testing.assert_allclose(r["rewards"], src.reward_l, atol=1e-6)
        assert bool(r["done"]) == src.done
        seen += 1
    assert seen == len(rollouts)
    batch = next(iter(RawRolloutVae4ld().get_autoregressive_slices(8).batch(2)))
    assert batch["inputs"].shape == (2, 8, 4 + 3)


@pytest.mark.parametrize(
    # 5 input files: 2 outer shards of 3 and 2 files into 3 sub shards (one stays empty);
    # 6 outer shards (one gets no file at all).
    "num_outer, num_sub",
    [(2, 3), (6, 1)],
)
def test_outer_and_sub_shards_cover_every_rollout_once(
    tmp_path, raw, saved_vae, num_outer, num_sub
):
    raw_dir, rollouts = raw
    out = tmp_path / "out"
    for outer in range(num_outer):
        encode.encode_raw_rollouts(
            "FAKE_PIXELS", SAVED, "train", str(out), "encoded", num_sub_shards=num_sub,
            num_outer_shards=num_outer, outer_shard_index=outer, rollouts_pattern=pattern(raw_dir),
        )  # fmt: skip
    files, encoded = _read_all(out)
    assert len(files) == num_outer * num_sub
    assert {sharded_io.parse_shard_name(f)[1:] for f in files} == {
        (j, num_sub) for j in range(num_sub)
    }
    counts = collections.Counter(_key(r.action_l) for r in encoded)
    assert counts == collections.Counter(_key(r.action_l) for r in rollouts)


def test_rerun_resumes_and_refuses_another_encoder(tmp_path, raw, saved_vae):
    raw_dir, rollouts = raw
    out = tmp_path / "out"
    kw = dict(num_sub_shards=3, rollouts_pattern=pattern(raw_dir))
    first = encode.encode_raw_rollouts("FAKE_PIXELS", SAVED, "train", str(out), "encoded", **kw)
    assert len(first["written"]) == 3
    os.remove(first["written"][1])
    second = encode.encode_raw_rollouts("FAKE_PIXELS", SAVED, "train", str(out), "encoded", **kw)
    assert second["written"] == [first["written"][1]] and len(second["skipped"]) == 2
    assert collections.Counter(_key(r.action_l) for r in _read_all(out)[1]) == collections.Counter(
        _key(r.action_l) for r in rollouts
    )
    # The validation split goes beside it, under its own names.
    encode.encode_raw_rollouts("FAKE_PIXELS", SAVED, "validation", str(out), "encoded", **kw)
    assert len(_read_all(out, "validation")[0]) == 3 and len(_read_all(out)[0]) == 3
    # Another encoder (a training dir with Z=2) into the same dir is refused.
    save_untrained_vae(tmp_path / "other", representation_size=2)
    with pytest.raises(ValueError, match="different"):
        encode.encode_raw_rollouts(
            "FAKE_PIXELS", "vae.Vae", "train", str(out), "encoded", model_dir=str(tmp_path / "other"),
            **kw,
        )  # fmt: skip
    # So is another encoder of the same Z (other weights): its shards would mix with these
    # under one dataset_info.json. The refusal names the encoder and leaves the shards as they were.
    save_untrained_vae(tmp_path / "same_z", representation_size=4, seed=11)
    before = {f: os.path.getmtime(f) for f in _read_all(out)[0]}
    os.remove(first["written"][2])  # a shard to write: the refusal comes before it
    with pytest.raises(ValueError, match="describes different data.*'encoder'.*same_z"):
        encode.encode_raw_rollouts(
            "FAKE_PIXELS", "vae.Vae", "train", str(out), "encoded", model_dir=str(tmp_path / "same_z"),
            **kw,
        )  # fmt: skip
    assert not os.path.exists(first["written"][2])
    assert {f: os.path.getmtime(f) for f in _read_all(out)[0]} == {
        f: t for f, t in before.items() if f != first["written"][2]
    }
    assert "same_z" not in sharded_io.read_dataset_info(str(out))["encoder"]["checkpoint"]
    with pytest.raises(LookupError, match="raw_rollout_vae_4ld"):
        encode.encode_raw_rollouts("FAKE_PIXELS", "nope", "train", str(out), "encoded", **kw)
    with pytest.raises(ValueError, match="outer_shard_index"):
        encode.encode_raw_rollouts(
            "FAKE_PIXELS", SAVED, "train", str(out), "e", 1, 2, 2, rollouts_pattern=pattern(raw_dir)
        )


def test_partition_functions_cover_all_files():
    for n_files in (0, 1, 5, 12):
        files = [f"f{i:02d}" for i in range(n_files)]
        for n_outer in (1, 2, 5, 13):
            for n_sub in (1, 3):
                got = [
                    f
                    for o in range(n_outer)
                    for group in encode_shards.sub_shard_files(
                        encode_shards.outer_shard_files(files, n_outer, o), n_sub
                    )
                    for f in group
                ]
                assert got == files
                sizes = [
                    len(encode_shards.outer_shard_files(files, n_outer, o)) for o in range(n_outer)
                ]
                assert max(sizes) - min(sizes) <= 1


def test_slurm_array_position_and_gpus():
    env = {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4", "SLURM_ARRAY_TASK_COUNT": "3"}
    assert encode_instances.slurm_array_position(env) == (1, 3)
    assert encode_instances.slurm_array_position({}) == (0, 1)
    env.update(SLURM_ARRAY_TASK_MAX="8")  # --array=4-8:2
    with pytest.raises(ValueError, match="contiguous"):
        encode_instances.slurm_array_position(env)
    assert devices.visible_gpu_count({"CUDA_VISIBLE_DEVICES": "2,3"}) == 2
    assert devices.visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert devices.visible_gpu_count({}) == 0


def _stub_python(tmp_path, exit_code=0):
    """An executable standing in for python: appends its arguments to calls.txt."""
    stub = tmp_path / "stub_python"
    stub.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls.txt\nexit {exit_code}\n')
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    return str(stub)


def test_runner_job_array_covers_every_outer_shard(tmp_path):
    python = _stub_python(tmp_path)
    flags = {"environment": "FAKE_PIXELS", "model": SAVED, "split": "train", "model_dir": None}
    for task in range(3):  # sbatch --array=0-2 --gres=gpu:2
        environ = {
            "SLURM_ARRAY_TASK_ID": str(task),
            "SLURM_ARRAY_TASK_MIN": "0",
            "SLURM_ARRAY_TASK_COUNT": "3",
            "CUDA_VISIBLE_DEVICES": "0,1",
        }
        ran = encode_instances.run_instances(
            flags, str(tmp_path / "out"), python=python, environ=environ
        )
        assert ran == [2 * task, 2 * task + 1]
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    args = [dict(a.lstrip("-").split("=", 1) for a in c.split()[1:]) for c in calls]
    assert sorted(int(a["outer_shard_index"]) for a in args) == list(range(6))
    assert {a["num_outer_shards"] for a in args} == {"6"}
    assert sorted(a["gpu_index"] for a in args) == ["0", "0", "0", "1", "1", "1"]
    assert all("model_dir" not in a and a["model"] == SAVED for a in args)

    (tmp_path / "f").mkdir()
    failing = _stub_python(tmp_path / "f", exit_code=3)
    with pytest.raises(RuntimeError, match=r"(?s)2 of 2 encoding instances failed.*exited 3"):
        encode_instances.run_instances(
            flags, str(tmp_path / "out"), instances_per_job=2, python=failing, environ={}
        )


@pytest.mark.slow  # one TF subprocess: ~5 s on an idle 2-core machine
def test_runner_runs_a_real_instance_on_cpu(tmp_path, raw, saved_vae):
    """Job 1 of 2 through the runner (a real encode_raw_rollouts.py process); job 0 in-process."""
    raw_dir, rollouts = raw
    out = tmp_path / "out"
    flags = {
        "environment": "FAKE_PIXELS",
        "model": SAVED,
        "split": "train",
        "num_sub_shards": 2,
        "rollouts_pattern": pattern(raw_dir),
    }
    environ = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    ran = encode_instances.run_instances(flags, str(out), job_index=1, num_jobs=2, environ=environ)
    assert ran == [1]
    assert len(os.listdir(out / "logs")) == 1
    encode.encode_raw_rollouts(
        "FAKE_PIXELS", SAVED, "train", str(out), "encoded", 2, num_outer_shards=2,
        outer_shard_index=0, rollouts_pattern=pattern(raw_dir),
    )  # fmt: skip
    files, encoded = _read_all(out)
    assert [os.path.basename(f).split(".")[0] for f in files] == [
        "encoded-train-o00000of00002"
    ] * 2 + ["encoded-train-o00001of00002"] * 2
    assert collections.Counter(_key(r.action_l) for r in encoded) == collections.Counter(
        _key(r.action_l) for r in rollouts
    )


@pytest.mark.parametrize(
    "script, required",
    [
        ("scripts/models/train_obs_encoder.py", "model_dir"),
        ("scripts/data_gen/encode_raw_rollouts.py", "environment"),
        ("scripts/data_gen/encode_raw_rollouts_multi.py", "model"),
    ],
)
def test_scripts_parse_their_flags(repo_root, script, required):
    import subprocess
    import sys

    path = os.path.join(repo_root, script)
    args = ["--environment=FAKE_PIXELS", "--model=m", "--model_dir=d"]
    if "train_obs_encoder" in script:
        args.append("--train_steps=1")
    ok = subprocess.run(
        [sys.executable, path, "--only_check_args", *args], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    missing = subprocess.run(
        [sys.executable, path, "--only_check_args"], capture_output=True, text=True
    )
    assert missing.returncode != 0 and required in missing.stderr


def test_cpu_instances_share_the_cores_and_each_logs_its_place(tmp_path, monkeypatch, caplog):
    """Without GPUs, K instances get cores / K threads each (at least 1), and each start is
    logged as "instance k/K (outer shard o/n)"."""
    python = _stub_python(tmp_path)
    flags = {"environment": "FAKE_PIXELS", "model": SAVED, "split": "train"}
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    with caplog.at_level("INFO"):
        encode_instances.run_instances(
            flags, str(tmp_path / "out"), instances_per_job=2, job_index=1, num_jobs=2,
            python=python, environ={},
        )  # fmt: skip
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert ["--num_threads=4" in c for c in calls] == [True, True]
    starts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("instance")]
    assert [s.split(":")[0] for s in starts] == [
        "instance 1/2 (outer shard 2/4)",
        "instance 2/2 (outer shard 3/4)",
    ]
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    encode_instances.run_instances(
        flags, str(tmp_path / "out"), instances_per_job=2, python=python, environ={}
    )
    assert all(
        "--num_threads=1" in c for c in (tmp_path / "calls.txt").read_text().splitlines()[2:]
    )


def test_sub_shards_must_be_positive():
    with pytest.raises(ValueError, match="^--num_sub_shards must be positive, got 0.$"):
        encode_shards.sub_shard_files(["a"], 0)
