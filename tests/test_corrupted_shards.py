"""find_corrupted: truncated shards found and healthy ones not, the script's exit status,
quarantine and delete."""

import os

import pytest
from rollout_helpers import run_script

from rl755.common import sharded_io
from rl755.data_gen import corrupted
from rl755.data_gen import rollout_tasks as tasks_
from rl755.environments import Environments
from rl755.policies import generic

FAKE = Environments.FAKE_PIXELS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts", "data_gen")


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
    res = run_script(
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
    res = run_script(
        os.path.join(SCRIPTS, "find_corrupted_tfrecords.py"),
        f"--pattern={d}/*.tfrecord-*",
        "--delete",
    )
    assert res.returncode == 1 and f"deleted {truncated}" in res.stderr, res.stderr
    assert sorted(os.listdir(d)) == sorted(
        [os.path.basename(healthy), os.path.basename(other), tmp.name]
    )
    assert corrupted.find_corrupted_tfrecords(f"{d}/*.tfrecord-*", False) == ([], 2)
    res = run_script(
        os.path.join(SCRIPTS, "find_corrupted_tfrecords.py"),
        f"--pattern={d}/*.tfrecord-*",
        "--delete",
    )
    assert res.returncode == 0 and "0 of 2 files corrupted" in res.stderr
