"""Repeatable runs: rl755.common.determinism, each stage's outputs bit for bit under the same
seed, and the stage-by-stage comparison of two runs (rl755.pipeline.compare)."""

from __future__ import annotations

import glob
import json
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from encoder_helpers import pattern, write_raw_rollouts
from sequential_helpers import write_encoded_dataset

from rl755.common import determinism, run_record
from rl755.pipeline import compare


# ---- the switch --------------------------------------------------------------------------------
def _draws():
    import keras

    layer = keras.layers.Dense(3)
    layer.build((None, 2))
    return (
        random.random(),
        float(np.random.uniform()),
        float(tf.random.uniform([])),
        layer.kernel.numpy().copy(),
    )


def test_configure_seeds_python_numpy_tf_and_keras_initializers():
    determinism.configure(7, deterministic=True)
    first = _draws()
    determinism.configure(7, deterministic=True)
    again = _draws()
    determinism.configure(8, deterministic=True)
    other = _draws()
    for a, b, c in zip(first, again, other):
        assert np.array_equal(a, b)
        assert not np.array_equal(a, c)


def test_configure_turns_op_determinism_on_and_off_and_says_why(monkeypatch):
    s = determinism.configure(1, deterministic=True)
    assert determinism.op_determinism_enabled() and s.decided_by == "--deterministic"
    assert os.environ[determinism.ENV_VAR] == "1"  # Ray workers and subprocesses inherit it
    s = determinism.configure(1, deterministic=False)
    assert not determinism.op_determinism_enabled() and s.decided_by == "--nodeterministic"
    assert determinism.child_environ() == {determinism.ENV_VAR: "0"}
    # Not given: on without a GPU, off with one.
    monkeypatch.setattr(determinism, "gpu_visible", lambda: False)
    s = determinism.configure(1)
    assert s.deterministic and "no GPU" in s.decided_by
    monkeypatch.setattr(determinism, "gpu_visible", lambda: True)
    s = determinism.configure(1)
    assert not s.deterministic and "GPU is visible" in s.decided_by
    with pytest.raises(ValueError, match="--seed"):
        determinism.configure(-1)


def test_run_records_say_how_the_run_was_seeded(tmp_path):
    determinism.configure(5, deterministic=True)
    with run_record.record_run(str(tmp_path), {"x": 1}, stage="toy") as record:
        pass
    data = json.loads(open(record.path).read())
    assert data["determinism"]["seed"] == 5
    assert data["determinism"]["deterministic"] is True
    assert data["determinism"]["op_determinism"] is True
    assert data["determinism"]["tensorflow"] == tf.__version__


def test_stage_scripts_accept_deterministic_and_seed():
    """Every stage script has --deterministic; the trainers also --seed (absl parses them)."""
    from rl755.slurm.launcher import check_stage

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    needs = {
        "scripts/data_gen/collect_rollouts.py": {"num_rollouts": 1, "policy": "RandomPolicy"},
        "scripts/models/train_obs_encoder.py": {
            "model_dir": "/x",
            "train_steps": 1,
            "environment": "FAKE_PIXELS",
            "model": "vae.Vae",
            "seed": 2,
        },
        "scripts/data_gen/encode_raw_rollouts.py": {"environment": "FAKE_PIXELS", "model": "m"},
        "scripts/data_gen/encode_raw_rollouts_multi.py": {
            "environment": "FAKE_PIXELS",
            "model": "m",
        },
        "scripts/models/train_sequential_model.py": {
            "model_dir": "/x",
            "train_steps": 1,
            "environment": "FAKE_PIXELS",
            "model": "m",
            "rollouts_dataset": "d",
            "batch_size": 1,
            "sequence_length": 2,
            "seed": 2,
        },
        "scripts/models/train_controller.py": {"environment": "FAKE_PIXELS", "model_dir": "/x"},
        "scripts/models/evaluate_controller.py": {"environment": "FAKE_PIXELS"},
        "scripts/models/dream_gap.py": {"environment": "FAKE_PIXELS"},
        "scripts/pipeline.py": {"out_dir": "/x"},
    }
    for i, (script, flags) in enumerate(needs.items()):
        check_stage(os.path.join(repo, script), {**flags, "deterministic": i % 2 == 0})


# ---- each stage, twice --------------------------------------------------------------------------
def _same_files(dir_a, dir_b, suffixes):
    files = sorted(
        os.path.relpath(p, dir_a)
        for s in suffixes
        for p in glob.glob(os.path.join(str(dir_a), "**", f"*{s}"), recursive=True)
    )
    assert files
    return {f: compare.compare_files(os.path.join(dir_a, f), os.path.join(dir_b, f)) for f in files}


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("raw")
    # Several shards: an interleave that does not keep order would mix them differently.
    write_raw_rollouts(d, "train", num_files=4, per_file=2, seed=1)
    write_raw_rollouts(d, "validation", num_files=1, per_file=2, seed=2)
    return d


def _train_encoder(model_dir, raw_dir, seed, deterministic=True):
    from rl755.models.encoders.train import train_obs_encoder

    return train_obs_encoder(
        model_dir=str(model_dir),
        train_steps=6,
        environment="FAKE_PIXELS",
        model="vae.Vae",
        batch_size=8,
        representation_size=4,
        save_every_n_steps=3,
        obs_sampled_per_rollout=4,
        learning_rate=3e-3,
        validation_steps=1,
        rollouts_pattern=pattern(raw_dir),
        verbose=0,
        seed=seed,
        deterministic=deterministic,
    )


def test_encoder_training_repeats_bit_for_bit(tmp_path, raw_dir):
    for name in ("a", "b"):
        _train_encoder(tmp_path / name, raw_dir, seed=4)
    diffs = _same_files(tmp_path / "a", tmp_path / "b", (".weights.h5",))
    assert all(d is None for d in diffs.values()), diffs
    _train_encoder(tmp_path / "c", raw_dir, seed=5)
    diffs = _same_files(tmp_path / "a", tmp_path / "c", (".weights.h5",))
    assert all(d is not None for d in diffs.values())  # the seed matters


def _train_sequential(model_dir, seed):
    from rl755.models.sequential.train import train_sequential_model

    return train_sequential_model(
        model_dir=str(model_dir),
        train_steps=4,
        environment="FAKE_PIXELS",
        model="mdn_rnn.mdn_rnn_with_heads",
        rollouts_dataset="VaeEncodedRollouts",
        batch_size=4,
        sequence_length=6,
        learning_rate=1e-3,
        sample_observations=True,  # z drawn from the stored posteriors: seeded too
        save_every_n_steps=2,
        validation_steps=1,
        run_flags={"test": True},
        seed=seed,
        deterministic=True,
    )


def test_sequential_training_repeats_bit_for_bit(tmp_path):
    write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")
    for name in ("a", "b"):
        _train_sequential(tmp_path / name, seed=2)
    diffs = _same_files(tmp_path / "a", tmp_path / "b", (".weights.h5", ".optimizer.npz"))
    assert all(d is None for d in diffs.values()), diffs
    _train_sequential(tmp_path / "c", seed=3)
    diffs = _same_files(tmp_path / "a", tmp_path / "c", (".weights.h5",))
    assert all(d is not None for d in diffs.values())


def test_dream_cma_es_repeats_bit_for_bit(tmp_path):
    """CMA-ES sampling, trial choice, dream sampling and the real evaluations are seeded."""
    from controller_helpers import exact_spec, small

    from rl755.controller.cma_train import run_cma_es

    cfg = small(mode="dream", generations=3, eval_every=3, eval_episodes=2, dream_initial_states=4)
    outs = []
    for name in ("a", "b"):
        determinism.configure(cfg.seed, deterministic=True)
        outs.append(run_cma_es(exact_spec(), str(tmp_path / name), cfg))
    a, b = (np.load(tmp_path / n / "controller_params.npy") for n in ("a", "b"))
    assert np.array_equal(a, b)
    assert [h["mean"] for h in outs[0]["history"]] == [h["mean"] for h in outs[1]["history"]]
    assert (
        compare.compare_files(tmp_path / "a" / "summary.json", tmp_path / "b" / "summary.json")
        is None
    )


# ---- comparing two runs -------------------------------------------------------------------------
def test_compare_files_reports_the_largest_difference(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez(a, w=np.zeros(3), v=np.ones(2))
    np.savez(b, w=np.array([0.0, 0.5, -2.0]), v=np.ones(2))
    assert compare.compare_files(str(a), str(a)) is None
    assert compare.compare_files(str(a), str(b)) == ("w", 2.0)
    np.savez(b, w=np.zeros(4), v=np.ones(2))
    assert compare.compare_files(str(a), str(b)) == ("w", float("inf"))
    # -0.0 and 0.0 compare equal as numbers but are not the same bits.
    np.savez(b, w=-np.zeros(3), v=np.ones(2))
    assert compare.compare_files(str(a), str(b)) == ("w", 0.0)


def test_compare_runs_names_the_first_differing_stage(tmp_path):
    from rl755 import pipeline

    preset = pipeline.PRESETS["tiny"]
    paths = {n: pipeline.Paths(str(tmp_path / n), _env(preset)) for n in ("a", "b")}
    for n, p in paths.items():
        os.makedirs(p.raw_dir)
        write_raw_rollouts(p.raw_dir, "train", num_files=1, per_file=1, seed=1)
        ctrl = p.model_dir(preset.controller_name)
        os.makedirs(ctrl)
        np.save(os.path.join(ctrl, "controller_params.npy"), np.arange(3.0) * (n == "a"))
        os.makedirs(p.evaluation_dir)
        with open(os.path.join(p.evaluation_dir, "evaluation.json"), "w") as f:
            json.dump({"returns": [1.0, 2.0 + (n == "b")], "steps": [3, 4], "seeds": [0, 1]}, f)
    diffs = {
        d.stage: d for d in compare.compare_runs(str(tmp_path / "a"), str(tmp_path / "b"), preset)
    }
    evaluations = [os.path.join(p.evaluation_dir, "evaluation.json") for p in paths.values()]
    for path, t in zip(evaluations, "ab"):  # only the returns, steps and seeds count
        with open(path) as f:
            record = json.load(f)
        with open(path, "w") as f:
            json.dump({**record, "returns": [1.0, 2.0], "t": t}, f)
    assert compare.compare_files(*evaluations) is None
    assert diffs["collect"].identical is True
    assert diffs["train_encoder"].identical is None  # neither run has it
    assert diffs["evaluate"].identical is False and diffs["evaluate"].max_abs_diff == 1.0
    assert diffs["train_controller"].identical is False
    assert diffs["train_controller"].max_abs_diff == 2.0
    first = compare.first_difference(list(diffs.values()))  # the source, not what follows
    assert first.stage == "train_controller" and "controller_params.npy" in first.detail
    table = compare.format_diffs(list(diffs.values()))
    assert "DIFFER" in table and "identical" in table


def _env(preset):
    from rl755.environments import Environments

    return Environments.from_name(preset.environment)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # (with the shared tiny run's set-up; a loaded machine)
def test_tiny_pipeline_twice_with_the_same_seed_is_identical(tiny_local_run, tmp_path, cold_python):
    """`pipeline.py --preset=tiny --seed=3 --deterministic` run twice gives identical
    controller_params.npy, evaluation returns and, stage by stage, outputs. The first run is
    the session's shared one (conftest.tiny_local_run, the same flags and config), its
    scripts forked from the suite's warm interpreter; this one runs them in fresh
    interpreters (cold_python), each with its own str hash seed."""
    from pipeline_helpers import TINY_RUN_FLAGS, run_pipeline

    from rl755 import pipeline

    a, _ = tiny_local_run
    b = tmp_path / "b"
    env = dict(os.environ, RL755_CONFIG=str(tmp_path / "no_config.json"))
    run_pipeline("tiny", b, *TINY_RUN_FLAGS, env=env)
    diffs = compare.compare_runs(str(a), str(b), pipeline.PRESETS["tiny"])
    assert compare.first_difference(diffs) is None, compare.format_diffs(diffs)
    assert all(d.identical for d in diffs), compare.format_diffs(diffs)
    ctrl = "models/fake/linear_controller_vae_mdn_rnn/controller_params.npy"
    assert (a / ctrl).read_bytes() == (b / ctrl).read_bytes()
    evals = [json.loads((d / "evaluation/evaluation.json").read_text()) for d in (a, b)]
    assert evals[0]["returns"] == evals[1]["returns"]
    assert evals[0]["random_policy"]["returns"] == evals[1]["random_policy"]["returns"]
    record = json.loads(open(glob.glob(str(a / "models/fake/*_4ld/runs/*.json"))[0]).read())
    assert record["determinism"]["deterministic"] is True


def test_pipeline_refuses_to_resume_a_run_of_another_seed(tmp_path):
    from rl755 import pipeline

    out = tmp_path / "run"
    out.mkdir()
    (out / "pipeline_summary.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(ValueError, match="--seed=1"):
        pipeline.run_local(pipeline.PRESETS["tiny"], str(out), seed=2)
    assert sorted(os.listdir(out)) == ["pipeline_summary.json"]  # nothing ran


def test_make_demo_passes_the_seed_and_keeps_seeds_apart():
    import subprocess

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def demo_command(*args):
        out = subprocess.run(
            ["make", "-n", "-C", repo, "demo", "STAMP=Makefile", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return next(line for line in out.splitlines() if "scripts/pipeline.py" in line)

    assert demo_command().endswith("--out_dir=runs/demo --seed=0")
    assert demo_command("SEED=2").endswith("--out_dir=runs/demo-seed2 --seed=2")
