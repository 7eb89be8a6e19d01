"""Truncated and damaged shards: found before compute, named in the error, nothing left behind
(rl755.common.shard_checks; stages 2, 3 and 4)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import tensorflow as tf
from encoder_helpers import pattern, save_untrained_vae, write_raw_rollouts

from rl755.common import config, shard_checks, sharded_io
from rl755.common.errors import BadInput

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDER = "find_corrupted_tfrecords.py"


def _shard(directory, compression, split="train", index=0, total=1):
    write_raw_rollouts(directory, split, num_files=total, per_file=2, compression=compression)
    return str(directory / sharded_io.shard_name(f"rollouts-{split}", index, total))


def _tf_reads(path) -> bool:
    try:
        ds = tf.data.TFRecordDataset(path, compression_type=sharded_io.detect_compression(path))
        for _ in ds:
            pass
    except tf.errors.DataLossError:
        return False
    return True


def _truncate(path, keep):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep] if keep >= 0 else data[:keep])


@pytest.mark.parametrize("compression", ["none", "GZIP", "ZLIB"])
def test_check_shard_finds_every_truncation_tensorflow_fails_on(tmp_path, compression):
    path = _shard(tmp_path, "" if compression == "none" else compression)
    data = open(path, "rb").read()
    assert shard_checks.check_shard(path) is None and _tf_reads(path)
    silently_short = []
    for cut in (1, 8, 9, 13, len(data) // 2 + 7, len(data) - 30, len(data) - 2):
        open(path, "wb").write(data[:cut])
        reason = shard_checks.check_shard(path)
        assert reason and "truncated" in reason, (cut, reason)
        if _tf_reads(path):
            silently_short.append(cut)
    # TensorFlow itself reads some truncated files without an error, as fewer (or no)
    # records: a shard cut inside its first header, or a GZIP file without its trailer.
    assert 1 in silently_short
    open(path, "wb").write(data + b"\0\0\0")
    assert shard_checks.check_shard(path)
    if compression != "none":  # a flipped bit fails the stream's checksum
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        open(path, "wb").write(bytes(flipped))
        assert "damaged" in shard_checks.check_shard(path)
    open(path, "wb").write(b"")
    assert shard_checks.check_shard(path) is None  # an empty shard holds no rollouts: valid


@pytest.mark.parametrize("record", [0, 1])
def test_a_broken_record_header_crc_in_an_uncompressed_shard_is_found(
    tmp_path, monkeypatch, record
):
    """The length is intact, its CRC is not: found by the walk (no TensorFlow read), and the
    stage stops before loading its encoder, naming the file and writing nothing."""
    from rl755.data_gen import encode

    path = _shard(tmp_path / "raw", "")
    data = bytearray(open(path, "rb").read())
    start = 0
    for _ in range(record):  # the header of record `record`: skip the ones before it
        start += 12 + int.from_bytes(data[start : start + 8], "little") + 4
    data[start + 9] ^= 0x01  # a bit of the length's masked CRC32C
    open(path, "wb").write(bytes(data))
    assert shard_checks.check_shard(path) == f"record {record + 1} has a broken length header"
    with pytest.raises(BadInput, match=re.escape(path) + ".*broken length header"):
        shard_checks.check_shards([path], pattern(tmp_path / "raw"))

    def no_compute(*args):
        raise AssertionError("the encoder was loaded for a broken shard")

    monkeypatch.setattr(encode, "load_encoder_for_encoding", no_compute)
    out = tmp_path / "encoded"
    with pytest.raises(BadInput, match=re.escape(path) + ".*broken length header"):
        encode.encode_raw_rollouts(
            "FAKE_PIXELS", "raw_rollout_vae_4ld", "train", str(out), "encoded", 1,
            rollouts_pattern=pattern(tmp_path / "raw"),
        )  # fmt: skip
    assert not out.exists()


def test_check_shards_names_every_bad_file_and_the_finder(tmp_path):
    write_raw_rollouts(tmp_path, "train", num_files=3, per_file=1, compression="GZIP")
    files = sharded_io.list_shards(str(tmp_path / "*.tfrecord-*"))
    _truncate(files[0], -10)
    _truncate(files[2], 40)
    with pytest.raises(BadInput) as e:
        shard_checks.check_shards(files, str(tmp_path / "rollouts-train*"))
    msg = str(e.value)
    assert files[0] in msg and files[2] in msg and files[1] not in msg
    assert "2 shard file(s)" in msg and FINDER in msg and "GZIP stream has no trailer" in msg


def _run(script, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.run(
        [sys.executable, os.path.join(REPO, script), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
    )  # fmt: skip


def _clean_error(proc, *names):
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "DataLossError" not in proc.stderr.split("error:")[0]
    for name in names:
        assert name in proc.stderr, (name, proc.stderr[-3000:])
    assert FINDER in proc.stderr


ENCODER_FLAGS = (
    "--environment=FAKE_PIXELS", "--model=vae.Vae", "--train_steps=4", "--batch_size=4",
    "--representation_size=4", "--save_every_n_steps=4", "--obs_sampled_per_rollout=4",
    "--learning_rate=1e-3", "--validation_steps=0",
)  # fmt: skip


def test_train_obs_encoder_names_a_truncated_gzip_shard_before_training(tmp_path):
    raw = tmp_path / "raw"
    write_raw_rollouts(raw, "train", num_files=3, per_file=2, compression="GZIP")
    bad = sharded_io.list_shards(str(raw / "*.tfrecord-*"))[1]
    _truncate(bad, -50)
    model_dir = tmp_path / "vae"
    proc = _run(
        "scripts/models/train_obs_encoder.py", *ENCODER_FLAGS,
        f"--model_dir={model_dir}", f"--rollouts_pattern={pattern(raw)}",
    )  # fmt: skip
    _clean_error(proc, bad, "GZIP stream has no trailer")
    assert not model_dir.exists()  # failed before any output


def _damage_a_record(path):
    """Flips a byte inside the second (last) record's data: the structure is whole, the
    record's CRC32C is not, so only TensorFlow's read (during the run) notices; the first
    record, which the fail-fast checks read, is intact."""
    data = bytearray(open(path, "rb").read())
    data[len(data) * 7 // 8] ^= 0xFF
    open(path, "wb").write(bytes(data))
    assert shard_checks.check_shard(path) is None and not _tf_reads(path)


def test_a_damaged_record_met_during_training_is_named_and_leaves_nothing_but_a_record(tmp_path):
    from rl755.models.encoders.train import train_obs_encoder

    raw = tmp_path / "raw"
    path = _shard(raw, "")
    _damage_a_record(path)
    write_raw_rollouts(raw, "validation", num_files=1, per_file=2)  # whole: the sample frames
    model_dir = tmp_path / "vae"

    def train():
        with pytest.raises(BadInput, match=f"(?s){re.escape(path)}: DataLossError.*{FINDER}"):
            train_obs_encoder(
                model_dir=str(model_dir), train_steps=4, environment="FAKE_PIXELS",
                model="vae.Vae", batch_size=4, representation_size=4, save_every_n_steps=4,
                obs_sampled_per_rollout=4, learning_rate=1e-3, validation_steps=1,
                rollouts_pattern=pattern(raw), verbose=0,
            )  # fmt: skip

    train()
    assert not model_dir.exists()  # the run made it: bad input leaves nothing behind
    model_dir.mkdir()  # a directory the user made: the failed run's record stays in it
    train()
    left = [
        os.path.relpath(os.path.join(d, f), model_dir)
        for d, _, fs in os.walk(model_dir)
        for f in fs
    ]
    assert len(left) == 1 and left[0].startswith("runs" + os.sep), left
    record = json.loads((model_dir / left[0]).read_text())
    assert record["status"] == "failed" and path in record["error"]


@pytest.fixture
def saved_vae():
    return save_untrained_vae(config.env_models_dir("fake") / "raw_rollout_vae_4ld", seed=4)


def test_encode_raw_rollouts_names_a_truncated_gzip_shard_before_encoding(tmp_path, saved_vae):
    raw = tmp_path / "raw"
    write_raw_rollouts(raw, "train", num_files=2, per_file=2, compression="GZIP")
    bad = sharded_io.list_shards(str(raw / "*.tfrecord-*"))[0]
    _truncate(bad, len(open(bad, "rb").read()) // 2)
    out = tmp_path / "encoded"
    proc = _run(
        "scripts/data_gen/encode_raw_rollouts.py", "--environment=FAKE_PIXELS",
        "--model=raw_rollout_vae_4ld", f"--out_dir={out}", f"--rollouts_pattern={pattern(raw)}",
    )  # fmt: skip
    _clean_error(proc, bad, "GZIP stream has no trailer")
    assert not out.exists()


def test_a_damaged_record_met_while_encoding_is_named_and_leaves_only_the_record(
    tmp_path, saved_vae
):
    from rl755.data_gen import encode

    raw = tmp_path / "raw"
    path = _shard(raw, "")
    _damage_a_record(path)
    out = tmp_path / "encoded"
    with pytest.raises(BadInput, match=f"(?s){re.escape(path)}: DataLossError.*{FINDER}"):
        encode.encode_raw_rollouts(
            "FAKE_PIXELS", "raw_rollout_vae_4ld", "train", str(out), "encoded", 1,
            rollouts_pattern=pattern(raw),
        )  # fmt: skip
    (record,) = os.listdir(out / "runs")
    assert sorted(os.listdir(out)) == ["runs"]  # no dataset_info.json, no shard
    assert json.loads((out / "runs" / record).read_text())["status"] == "failed"


def test_train_sequential_model_names_a_truncated_shard(tmp_path):
    from sequential_helpers import write_encoded_dataset

    from rl755.models.sequential import train as ts

    d = write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")
    bad = sharded_io.list_shards(os.path.join(str(d), "*train*.tfrecord-*"))[0]
    _truncate(bad, -3)
    with pytest.raises(BadInput, match=f"(?s){re.escape(bad)}.*{FINDER}"):
        ts.train_sequential_model(
            model_dir=str(tmp_path / "m"), train_steps=2, environment="FAKE_PIXELS",
            model="lstm.deterministic_lstm", rollouts_dataset="VaeEncodedRollouts",
            batch_size=2, sequence_length=4, learning_rate=1e-3, save_every_n_steps=2,
            validation_steps=0,
        )  # fmt: skip
    assert not (tmp_path / "m").exists()


def test_a_damaged_record_met_while_training_a_sequential_model_leaves_nothing_but_a_record(
    tmp_path, monkeypatch
):
    """Above FULL_READ_MAX_BYTES the error names the shard pattern and the finder instead."""
    from sequential_helpers import write_encoded_dataset

    from rl755.models.sequential import train as ts

    d = write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")
    path = sharded_io.list_shards(os.path.join(str(d), "*train*.tfrecord-*"))[0]
    records = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    sharded_io.write_tfrecord(path, records, "")  # uncompressed, so a flipped byte stays local
    _damage_a_record(path)
    model_dir = tmp_path / "m"
    monkeypatch.setattr(shard_checks, "FULL_READ_MAX_BYTES", 0)

    def train():
        damaged = f"(?s)A record of {re.escape(path)} is damaged.*{FINDER}"
        with pytest.raises(BadInput, match=damaged):
            ts.train_sequential_model(
                model_dir=str(model_dir), train_steps=40, environment="FAKE_PIXELS",
                model="lstm.deterministic_lstm", rollouts_dataset="VaeEncodedRollouts",
                batch_size=2, sequence_length=4, learning_rate=1e-3, save_every_n_steps=40,
                validation_steps=0,
            )  # fmt: skip

    train()
    assert not model_dir.exists()  # the run made it: bad input leaves nothing behind
    model_dir.mkdir()  # a directory the user made: the failed run's record stays in it
    train()
    (record,) = os.listdir(model_dir / "runs")
    assert sorted(os.listdir(model_dir)) == ["runs"]
    assert json.loads((model_dir / "runs" / record).read_text())["status"] == "failed"


def test_read_every_record_counts_every_record_past_the_first_batch(tmp_path):
    """(records read, None) for a whole file of 150 records (three of the reader's batches of
    64), and the whole batches read before the damage for a cut one."""
    path = str(tmp_path / "r.tfrecord")
    sharded_io.write_tfrecord(path, [b"x" * 10 for _ in range(150)], "")
    assert shard_checks.read_every_record(path) == (150, None)
    _truncate(path, 140 * (12 + 10 + 4) + 12 + 5)  # inside record 141's data
    n, why = shard_checks.read_every_record(path)
    assert n == 128 and why.startswith("DataLossError after 128 records: ")  # whole batches


def test_a_long_check_says_how_many_files_it_read_and_how_long_it_took(
    tmp_path, monkeypatch, caplog
):
    write_raw_rollouts(tmp_path, "train", num_files=3, per_file=1, compression="GZIP")
    files = sharded_io.list_shards(str(tmp_path / "*.tfrecord-*"))
    clock = iter([100.0, 107.4])
    monkeypatch.setattr(shard_checks.time, "monotonic", lambda: next(clock))
    with caplog.at_level("INFO", logger=shard_checks.__name__):
        assert shard_checks.find_bad_shards(files, threads=1) == []
    assert [r.getMessage() for r in caplog.records] == ["Checked 3 shard files in 7 s."]
