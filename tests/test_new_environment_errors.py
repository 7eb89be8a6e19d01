"""The errors a new environment's user met on the way through the stages: each names the flag or
file and what to do, is printed once with no usage dump and no traceback, and leaves nothing
behind."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from encoder_helpers import save_untrained_vae, write_raw_rollouts
from sequential_helpers import train_tiny, write_encoded_dataset

from rl755.common.errors import BadInput
from rl755.environments.wrappers import OneHotActions

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script: str, *flags: str, tmp_path, data=None, models=None):
    env = dict(
        os.environ,
        PYTHONPATH=REPO,
        RL755_DATA_DIR=str(data or tmp_path / "data"),
        RL755_MODELS_DIR=str(models or tmp_path / "models"),
    )
    return subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", script), *flags],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=str(tmp_path),
    )


def _error(proc, start: str) -> str:
    """The one error line of a failed script (exit 2): no usage dump, no traceback."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "USAGE" not in proc.stderr, proc.stderr
    assert "--validation_fraction" not in proc.stdout + proc.stderr  # a flag's help text
    message = lines[0][len("error: ") :]
    assert message.startswith(start), message
    assert (proc.stdout + proc.stderr).count(start) == 1, proc.stderr  # printed once
    return message


def _left_behind(tmp_path, *names) -> list[str]:
    return [n for n in names if os.path.exists(tmp_path / n)]


def test_an_unknown_policy_is_one_line_without_the_usage_dump(tmp_path):
    proc = _run(
        "data_gen/collect_rollouts.py",
        "--environment=CATCH",
        "--policy=RepeatRandomPolicy",
        "--num_rollouts=2",
        "--out_format=tfrecord",
        f"--out_dir={tmp_path / 'rollouts'}",
        tmp_path=tmp_path,
    )
    message = _error(proc, "Unknown --policy 'RepeatRandomPolicy' for CATCH.")
    assert "RandomPolicy" in message
    assert _left_behind(tmp_path, "rollouts", "data") == []


def test_missing_raw_rollouts_are_said_once(tmp_path):
    proc = _run(
        "models/train_obs_encoder.py",
        "--environment=CATCH",
        "--model=vae.Vae",
        "--representation_size=4",
        "--train_steps=2",
        f"--model_dir={tmp_path / 'vae'}",
        tmp_path=tmp_path,
    )
    message = _error(proc, "RawRollouts: no 'train' shards match ")
    assert "--rollouts_pattern" in message and "collect" in message.lower()
    assert _left_behind(tmp_path, "vae") == []


def test_missing_encoded_rollouts_name_rollouts_pattern_and_where_encode_wrote(tmp_path):
    data = tmp_path / "data"
    written = write_encoded_dataset(data / "fake" / "encoded_rollouts" / "my_vae")
    proc = _run(
        "models/train_sequential_model.py",
        "--environment=FAKE_PIXELS",
        "--model=mdn_rnn.mdn_rnn",
        "--rollouts_dataset=VaeEncodedRollouts",
        "--train_steps=2",
        "--batch_size=2",
        "--sequence_length=4",
        f"--model_dir={tmp_path / 'seq'}",
        tmp_path=tmp_path,
    )
    message = _error(proc, "VaeEncodedRollouts: no 'train' shards match ")
    pattern = os.path.join(str(written), "encoded-{split}*.tfrecord-*")
    assert f"pass --rollouts_pattern='{pattern}' to read them" in message, message
    assert _left_behind(tmp_path, "seq") == []


def test_encoding_with_a_model_dir_that_does_not_exist_says_so(tmp_path):
    write_raw_rollouts(tmp_path / "data" / "fake" / "raw_rollouts", "train", 1, 1)
    flags = ["--environment=FAKE_PIXELS", "--model=vae.Vae", f"--out_dir={tmp_path / 'enc'}"]
    proc = _run(
        "data_gen/encode_raw_rollouts.py",
        *flags,
        f"--model_dir={tmp_path / 'nope'}",
        tmp_path=tmp_path,
    )
    message = _error(proc, f"--model_dir {tmp_path / 'nope'} does not exist: ")
    assert "train_obs_encoder.py" in message and "representation_size" not in message
    (tmp_path / "untrained").mkdir()
    proc = _run(
        "data_gen/encode_raw_rollouts.py",
        *flags,
        f"--model_dir={tmp_path / 'untrained'}",
        tmp_path=tmp_path,
    )
    _error(proc, f"--model_dir {tmp_path / 'untrained'} holds no trained checkpoint")
    assert _left_behind(tmp_path, "enc", "nope") == []


def test_a_representation_size_mismatch_in_stage_5_leaves_no_directory(tmp_path):
    save_untrained_vae(tmp_path / "vae", representation_size=4)
    proc = _run(
        "models/train_controller.py",
        "--environment=FAKE_PIXELS",
        f"--encoder_dir={tmp_path / 'vae'}",
        "--encoder_model=vae.Vae",
        "--representation_size=8",
        f"--model_dir={tmp_path / 'controller'}",
        "--parallelism=0",
        tmp_path=tmp_path,
    )
    message = _error(proc, "Checkpoint ")
    assert "representation_size=4" in message and "representation_size=8" in message
    assert _left_behind(tmp_path, "controller") == []


def test_encoder_and_sequential_model_of_different_z_fail_before_stage_5_writes(tmp_path):
    """The library call: the sizes named, nothing made (no runs/ directory)."""
    from rl755.controller.cma_train import CmaConfig, PoolConfig, train_controller

    save_untrained_vae(tmp_path / "vae", representation_size=6)
    encoded = write_encoded_dataset(tmp_path / "z4", z=4)
    seq_dir = tmp_path / "seq4"
    train_tiny(seq_dir, 1, "mdn_rnn.mdn_rnn", rollouts_pattern=str(encoded / "encoded-{split}*"))
    with pytest.raises(BadInput, match="Encoder representation size 6 does not match .* 4"):
        train_controller(
            environment="FAKE_PIXELS",
            model_dir=str(tmp_path / "controller"),
            encoder_dir=str(tmp_path / "vae"),
            encoder_model="vae.Vae",
            representation_size=6,
            sequential_model_dir=str(seq_dir),
            cma_config=CmaConfig(generations=1, population_size=2, trials_per_member=1),
            pool=PoolConfig(parallelism=0),
        )
    assert not os.path.exists(tmp_path / "controller")


def test_a_box_where_the_entry_declares_discrete_actions_says_why():
    import gymnasium as gym

    class BoxActions(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (4, 4, 3), np.uint8)
        action_space = gym.spaces.Box(-np.inf, np.inf, (17,), np.float32)

    with pytest.raises(TypeError) as e:
        OneHotActions(BoxActions())
    message = str(e.value)
    assert "reads as Box(-inf, inf, (17,), float32)" in message
    assert "num_discrete_actions" in message and "action_low/action_high" in message


def test_a_run_that_made_its_directory_and_fails_on_bad_input_removes_it(tmp_path):
    from rl755.common import run_record

    with pytest.raises(BadInput):
        with run_record.record_run(tmp_path / "new", {}, "s"):
            raise BadInput("--x: wrong")
    assert not os.path.exists(tmp_path / "new")
    # A directory that was there, or that holds other outputs now, keeps the failed record.
    (tmp_path / "old").mkdir()
    with pytest.raises(BadInput):
        with run_record.record_run(tmp_path / "old", {}, "s"):
            raise BadInput("--x: wrong")
    (record,) = run_record.read_records(str(tmp_path / "old"))
    assert record["status"] == "failed" and record["error"] == "BadInput: --x: wrong"
    with pytest.raises(BadInput):
        with run_record.record_run(tmp_path / "made", {}, "s"):
            (tmp_path / "made" / "checkpoint").write_text("x")
            raise BadInput("--x: wrong")
    assert len(run_record.read_records(str(tmp_path / "made"))) == 1
    # Other failures keep their record too.
    with pytest.raises(ValueError):
        with run_record.record_run(tmp_path / "other", {}, "s"):
            raise ValueError("a bug")
    assert len(run_record.read_records(str(tmp_path / "other"))) == 1
