"""scripts/models/evaluate_world_model.py end to end on a trained tiny MDN-RNN: its JSON, table
and pictures, and bad input naming the flag."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rl755.common.errors import BadInput
from rl755.evaluation import benchmark
from rl755.testing import fake_env

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def mdn_run(tmp_path_factory):
    """A scripts/models/train_sequential_model.py directory: the tiny MDN-RNN with heads
    after one training step (the weights do not matter here)."""
    from sequential_helpers import fake_model, fixed_slices

    from rl755.common import devices
    from rl755.models.sequential import loop as sequential_loop

    model_dir = tmp_path_factory.mktemp("runs") / "mdn_run"
    sequential_loop.fit_sequential_model(
        fake_model("mdn_rnn.mdn_rnn_with_heads"),
        fixed_slices(),
        str(model_dir),
        train_steps=1,
        batch_size=2,
        learning_rate=1e-3,
        save_every_n_steps=1,
        validation_steps=0,
        strategy=devices.cpu_strategy(1),
        model_info={"environment": "FAKE_PIXELS", "model": "mdn_rnn.mdn_rnn_with_heads"},
    )
    return model_dir


def _saved_models(mdn_run):
    """An untrained saved encoder and `mdn_run` as a saved sequential model, where
    the zoo looks for them (this test's models dir)."""
    from rl755.common import checkpoints, config
    from rl755.models.encoders.train import build_encoder, make_encoder

    models = config.env_models_dir("fake")
    vae = make_encoder("FAKE_PIXELS", "vae.Vae", 4)
    build_encoder(vae, fake_env.FakePixelEnv().observation_space.shape)
    info = {"model": "vae.Vae", "representation_size": 4, "environment": "FAKE_PIXELS"}
    checkpoints.save_checkpoint(str(models / "raw_rollout_vae_4ld"), 1, vae, info)
    shutil.copytree(mdn_run, models / "mdn_rnn_with_heads_vae_4ld")


def _pattern(directory, **kw):
    from sequential_helpers import write_encoded_dataset

    return str(write_encoded_dataset(directory, **kw) / "encoded-{split}*.tfrecord-*")


def _start_script(*args):
    return subprocess.Popen(
        [sys.executable, os.path.join(REPO, "scripts/models/evaluate_world_model.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
    )


def _finish(proc):
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


def test_script_end_to_end_writes_json_table_and_pictures(tmp_path, mdn_run):
    _saved_models(mdn_run)
    pattern = _pattern(tmp_path / "enc", rollouts_per_split=3, steps=12)
    out_dir = tmp_path / "bench"
    good = _start_script(
        "--environment=FAKE_PIXELS",
        "--encoder=raw_rollout_vae_4ld",
        "--sequential_model=mdn_rnn_with_heads_vae_4ld",
        f"--sequential_model_dir={mdn_run}",
        f"--rollouts_pattern={pattern}",
        "--horizons=1,2,5",
        "--context_length=2",
        "--num_starts=6",
        "--chunk_length=6",
        "--dream_gap_episodes=2",
        "--dream_max_steps=6",
        "--num_examples=2",
        f"--out_dir={out_dir}",
    )
    bad = _start_script(  # at the same time (the machine's other core)
        "--environment=FAKE_PIXELS",
        "--sequential_model=no_such_model",
        f"--rollouts_pattern={pattern}",
        f"--out_dir={tmp_path / 'bad'}",
    )
    code, stdout, stderr = _finish(good)
    bad_code, _, bad_stderr = _finish(bad)
    assert code == 0, stderr[-3000:]
    assert "mdn_rnn_with_heads_vae_4ld" in stdout and "mdn_run" in stdout
    result = json.loads((out_dir / "world_model_benchmark.json").read_text())
    assert [m["model"] for m in result["models"]] == ["mdn_rnn_with_heads_vae_4ld", "mdn_run"]
    saved, run = result["models"]
    assert saved["next_step"] == run["next_step"]  # the same weights, found both ways
    assert saved["mixture"] and np.isfinite(saved["next_step"]["z_nll_per_dim"])
    for m in result["models"]:
        assert m["open_loop"]["horizons"] == [1, 2, 5] and len(m["open_loop"]["frame_mse"]) == 3
        assert m["episode_end"]["num_steps"] == 36 and m["reward"]["mse"] >= 0
        assert m["dream_gap"]["num_episodes"] == 2 and m["dream_gap"]["mean_abs_gap"] >= 0
    assert result["rollouts"]["num_rollouts"] == 3 and result["rollouts"]["split"] == "validation"
    for name in (
        "table.txt",
        "open_loop_error.png",
        "calibration.png",
        "frames_mdn_rnn_with_heads_vae_4ld.png",
        "frames_mdn_run.png",
    ):
        assert (out_dir / name).stat().st_size > 0, name
    assert not [p for p in os.listdir(out_dir) if ".tmp" in p]
    assert os.listdir(out_dir / "runs")

    assert bad_code != 0 and "Traceback" not in bad_stderr
    assert "no_such_model" in bad_stderr and "mdn_rnn_vae_4ld" in bad_stderr


def test_bad_input_names_the_flag(tmp_path, mdn_run):
    from rl755.evaluation.run import run_benchmark

    pattern = _pattern(tmp_path / "enc", rollouts_per_split=2, steps=8)
    ok = dict(
        environment="FAKE_PIXELS",
        out_dir=str(tmp_path / "o"),
        rollouts_pattern=pattern,
        settings=benchmark.Settings(horizons=(1, 2), context_length=2, num_starts=4),
    )

    def fails(match, **kw):
        with pytest.raises(BadInput, match=match):
            run_benchmark(**{**ok, **kw})

    fails("at least one --sequential_model")
    fails("saved_models.*mdn_rnn_vae_4ld", sequential_models=["nope"])
    fails("--sequential_model_dir=.*missing", sequential_model_dirs=[str(tmp_path / "missing")])
    seq_dir = tmp_path / "seq"
    seq_dir.mkdir()
    fails("--sequential_model_dir.*seq", sequential_model_dirs=[str(seq_dir)])  # empty dir
    fails("--split", sequential_models=["mdn_rnn_vae_4ld"], split="test")
    fails("--encoder", sequential_models=["mdn_rnn_vae_4ld"], dream_gap_episodes=2)
    fails("nope.*--encoder", sequential_models=["mdn_rnn_vae_4ld"], encoder="nope")
    fails("'\\{split\\}'", sequential_models=["mdn_rnn_vae_4ld"], rollouts_pattern="/x/*.tfrecord")
    fails(  # a pattern alone needs its dataset_info.json
        "--rollouts_pattern=.*dataset_info",
        sequential_models=["mdn_rnn_vae_4ld"],
        rollouts_pattern=str(tmp_path / "none-{split}*"),
    )
    fails(
        "--rollouts_dataset/--rollouts_pattern.*no 'validation' shards",
        sequential_models=["mdn_rnn_vae_4ld"],
        rollouts_dataset="RawRolloutVae4ld",
        rollouts_pattern=str(tmp_path / "none-{split}*"),
    )
    fails("--rollouts_dataset", sequential_models=["mdn_rnn_vae_4ld"], rollouts_dataset="Nope")
    fails(
        "--horizons",
        sequential_models=["mdn_rnn_vae_4ld"],
        settings=benchmark.Settings(horizons=(1, 50)),
    )
    (tmp_path / "f").write_text("")
    fails("--out_dir", sequential_models=["mdn_rnn_vae_4ld"], out_dir=str(tmp_path / "f"))
    fails(  # a model of another Z than the data
        "Z=4.*Z=2",
        sequential_model_dirs=[str(mdn_run)],
        rollouts_pattern=_pattern(tmp_path / "z2", rollouts_per_split=2, steps=8, z=2),
    )
