"""End to end: the five stages chained by scripts/pipeline.py, each reading the previous
stage's outputs, on the fake environment and on CarRacing at a tiny size."""

import json
import os

import numpy as np
import pytest
from pipeline_helpers import TINY_RUN_FLAGS, run_pipeline

from rl755 import pipeline
from rl755.common import sharded_io

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_pipeline(preset, out_dir, *extra):
    return run_pipeline(preset, out_dir, "--num_threads=1", *extra).stdout


def _check_chain(preset_name, out_dir, monkeypatch):
    """Each stage's outputs are what the next stage reads."""
    preset = pipeline.get_preset(preset_name)
    for key, value in pipeline.stage_environ(str(out_dir)).items():
        monkeypatch.setenv(key, value)
    from rl755.common.lookup import resolve
    from rl755.environments import Environments

    env = Environments.from_name(preset.environment)
    models, data = env.folder_module("models"), env.folder_module("data")
    # Stage 1 -> 2: raw rollouts readable by RawRollouts.
    raw = resolve(data, "raw_rollouts.RawRollouts")()
    frames = next(raw.random_rollout_observations(repeat=False).as_numpy_iterator())
    assert frames.shape == env.observation_shape and frames.dtype == np.uint8
    # Stage 2 -> 3: the registry loads the trained encoder.
    encoder = resolve(models, f"saved_models.{preset.encoder_name}")()
    z = preset.train_encoder["representation_size"]
    assert encoder.representation_size == z
    # Stage 3 -> 4: the encoded dataset matches the encoder.
    encoded = resolve(data, f"encoded_rollouts.{preset.encoded_dataset}")()
    assert encoded.representation_size() == z
    rollout = next(encoded.rollouts_ds(shuffle_files=False).as_numpy_iterator())
    assert rollout["observations"].shape[1:] == (z,)
    # Stage 4 -> 5: the registry loads the trained sequential model with fitting sizes.
    seq = resolve(models, f"saved_models.{preset.sequential_name}")()
    assert seq.representation_size == z
    # Stage 5 -> evaluation: scores of the controller and of the random policy.
    evaluation = json.loads((out_dir / "evaluation" / "evaluation.json").read_text())
    assert len(evaluation["returns"]) == preset.evaluate["num_episodes"]
    assert "random_policy" in evaluation
    summary = json.loads((out_dir / "pipeline_summary.json").read_text())
    assert [r["stage"] for r in summary["stages"]][:7] == [
        "collect",
        "train_encoder",
        "encode_train",
        "encode_validation",
        "train_sequential",
        "train_controller",
        "evaluate",
    ]
    assert all(r["status"] == "ok" for r in summary["stages"])
    return summary


@pytest.mark.slow
@pytest.mark.timeout(1800)  # (with the shared tiny run's set-up; a loaded machine)
def test_tiny_pipeline_on_fake_env_chains_and_resumes(tiny_local_run, monkeypatch):
    out, stdout = tiny_local_run
    assert "Real-environment score" in stdout and "random policy" in stdout
    summary = _check_chain("tiny", out, monkeypatch)
    pictures = sorted(os.listdir(out / "pictures"))
    assert pictures == [
        "controller_learning_curve.png",
        "episode.gif",
        "predicted_frames.png",
        "vae_reconstructions.png",
    ], pictures
    # Rerun on the same directory: every stage resumes and nothing is redone.
    raw_files = sharded_io.list_shards(str(out / "data/fake/raw_rollouts/*.tfrecord-*"))
    mtimes = {f: os.path.getmtime(f) for f in raw_files}
    run_pipeline("tiny", out, *TINY_RUN_FLAGS)  # the fixture's command
    assert {f: os.path.getmtime(f) for f in raw_files} == mtimes
    assert sharded_io.list_shards(str(out / "data/fake/raw_rollouts/*.tfrecord-*")) == raw_files
    assert summary["scores"]["controller"]["mean"] is not None


@pytest.mark.slow
@pytest.mark.timeout(1800)  # (a loaded machine)
def test_tiny_pipeline_on_car_racing(tmp_path, monkeypatch):
    out = tmp_path / "car"
    _run_pipeline("tiny_car_racing", out)
    _check_chain("tiny_car_racing", out, monkeypatch)


def test_presets_resolve_and_bad_names_fail_fast():
    for preset in pipeline.PRESETS.values():
        pipeline.check_preset(preset)
    with pytest.raises(ValueError, match="valid: demo"):
        pipeline.get_preset("huge")
    import dataclasses

    tiny = pipeline.PRESETS["tiny"]
    bad = dataclasses.replace(
        tiny, train_sequential={**tiny.train_sequential, "model": "mdn_rnn.x"}
    )
    with pytest.raises(LookupError, match="mdn_rnn_with_heads"):
        pipeline.check_preset(bad)
    # The flags that connect the stages are the pipeline's, not a preset's.
    wired = dataclasses.replace(tiny, train_encoder={**tiny.train_encoder, "model_dir": "/x"})
    with pytest.raises(ValueError, match="set by the pipeline"):
        pipeline.check_preset(wired)
    # A preset that connects its stages through the zoo: each name is looked up as its flag.
    zoo_preset = next(p for p in pipeline.PRESETS.values() if p.connect == "zoo")
    for field, flag in (
        ("encoder_name", "encoder"),
        ("sequential_name", "sequential_model"),
        ("controller_name", "saved_controller"),
    ):
        with pytest.raises(LookupError, match=rf"\(--{flag} takes one of those, or 'none'\.\)"):
            pipeline.check_preset(dataclasses.replace(zoo_preset, **{field: "no_such_row"}))


def test_world_models_preset_carries_the_paper_settings():
    p = pipeline.PRESETS["world_models"]
    stages = {s.name: s for s in pipeline.build_stages(p, "/tmp/unused")}
    assert stages["collect"].flags["num_rollouts"] == 10000
    controller = stages["train_controller"].flags
    assert (controller["cma_population_size"], controller["cma_trials_per_member"]) == (64, 16)
    assert stages["train_encoder"].flags["representation_size"] == 32
    assert stages["collect"].array is not None and stages["collect"].array.split == (
        "num_rollouts",
    )


def test_every_preset_gives_each_stage_script_flags_it_accepts():
    """The presets use the scripts' own flag names: absl parses them (nothing runs)."""
    from rl755.slurm.launcher import ArraySpec, check_stage, expand_instances

    for preset in pipeline.PRESETS.values():
        for stage in pipeline.build_stages(preset, "/tmp/unused", threads=1):
            first_task = expand_instances(stage.flags, stage.array or ArraySpec())[0][0]
            check_stage(stage.script, first_task)


def test_summary_table_lists_stages_and_scores():
    summary = {
        "out_dir": "/x",
        "total_seconds": 75.0,
        "stages": [{"stage": "collect", "seconds": 12.0, "status": "ok", "outputs": "/x/data"}],
        "scores": {
            "controller": {"mean": 12.5, "std": 1.0},
            "random_policy": {"mean": -3.0, "std": 2.0},
            "episodes": 4,
        },
    }
    text = pipeline.format_summary(summary)
    assert "collect" in text and "12.0 s" in text and "1 min 15 s" in text
    assert "controller 12.5 ± 1.0  vs  random policy -3.0 ± 2.0" in text


def test_deterministic_reaches_every_stage_or_none_when_left_to_the_machine():
    preset = pipeline.PRESETS["tiny"]
    for value in (True, False):
        stages = pipeline.build_stages(preset, "/tmp/unused", deterministic=value)
        assert {s.name: s.flags.get("deterministic") for s in stages} == {
            s.name: value for s in stages
        }
    stages = pipeline.build_stages(preset, "/tmp/unused")
    assert not any("deterministic" in s.flags for s in stages)


def test_world_models_collection_array_tasks_get_distinct_stable_seeds():
    from rl755.slurm.launcher import expand_instances

    seeds = []
    for base in (0, 1):
        collect = pipeline.build_stages(pipeline.PRESETS["world_models"], "/tmp/x", seed=base)[0]
        tasks = expand_instances(collect.flags, collect.array)
        seeds += [int(t[0]["seed"]) for t in tasks]
        assert sum(int(t[0]["num_rollouts"]) for t in tasks) == 10000
    assert len(set(seeds)) == len(seeds) == 20


def test_find_world_model_takes_the_registry_then_the_run_then_the_shipped_models(
    tmp_path, monkeypatch
):
    """What the world-model tour opens: the user's registry, else the demo run, else the
    models shipped in the repository (so it runs on a fresh clone); the shipped ones load."""
    monkeypatch.delenv("RL755_SHIPPED_DIR", raising=False)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    run_dir = tmp_path / "run"

    def fake_trained(models_dir, *names):
        for name in names:
            folder = models_dir / "car_racing" / name
            folder.mkdir(parents=True)
            (folder / "model-001.weights.h5").write_bytes(b"")

    world = pipeline.find_world_model(run_dir=str(run_dir), load=False)
    from rl755.zoo import shipped

    assert world.source == f"the models shipped in the repository ({shipped.root()})"
    assert world.models_dir == str(shipped.root())
    assert (world.encoder_name, world.sequential_name, world.controller_name) == (
        "raw_rollout_vae_32ld_demo",
        "mdn_rnn_vae_32ld_demo",
        "real_controller",
    )
    assert "mdn_rnn_vae_32ld_demo" in str(world)

    # Folders without weights yet (a training that has not saved) are not trained models.
    for name in ("raw_rollout_vae_32ld", "mdn_rnn_vae_32ld"):
        (run_dir / "models" / "car_racing" / name / "runs").mkdir(parents=True)
        (run_dir / "models" / "car_racing" / name / "model-001.json").write_text("{}")
    world = pipeline.find_world_model(run_dir=str(run_dir), load=False)
    assert world.source.startswith("the models shipped in the repository"), world.source
    for name in ("raw_rollout_vae_32ld", "mdn_rnn_vae_32ld"):
        (run_dir / "models" / "car_racing" / name / "model-001.weights.h5").write_bytes(b"")
    world = pipeline.find_world_model(run_dir=str(run_dir), load=False)
    assert world.source == f"the demo run {run_dir}"
    assert (world.encoder_name, world.controller_name) == ("raw_rollout_vae_32ld", None)
    assert str(world).endswith("controller none trained"), str(world)
    assert os.environ["RL755_MODELS_DIR"] == str(run_dir / "models")  # names resolve there
    # A controller counts once its training wrote controller.json, not before.
    controller = run_dir / "models" / "car_racing" / pipeline.get_preset("demo").controller_name
    controller.mkdir(parents=True)
    assert pipeline.find_world_model(run_dir=str(run_dir), load=False).controller_name is None
    (controller / "controller.json").write_text("{}")
    world = pipeline.find_world_model(run_dir=str(run_dir), load=False)
    assert world.controller_name == controller.name and str(world).endswith(controller.name)

    registry = tmp_path / "registry"
    monkeypatch.setenv("RL755_MODELS_DIR", str(registry))
    fake_trained(registry, "raw_rollout_vae_32ld", "mdn_rnn_vae_32ld")
    world = pipeline.find_world_model(run_dir=str(run_dir), load=False)
    assert world.source.startswith("the registry") and world.models_dir == str(registry)

    # With none trained and none shipped: an error that says how to make them.
    monkeypatch.setenv("RL755_MODELS_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("RL755_SHIPPED_DIR", str(tmp_path / "no_shipped"))
    with pytest.raises(FileNotFoundError, match="make demo"):
        pipeline.find_world_model(run_dir=str(tmp_path / "no_run"), load=False)


def test_find_world_model_loads_the_shipped_models(tmp_path, monkeypatch):
    monkeypatch.delenv("RL755_SHIPPED_DIR", raising=False)
    world = pipeline.find_world_model(run_dir=str(tmp_path / "no_run"))
    assert world.encoder.zoo_source == world.sequential_model.zoo_source == "shipped"
    assert world.encoder.representation_size == 32


def test_a_run_of_another_seed_in_out_dir_is_refused_before_anything_runs(tmp_path):
    """Resuming into an --out_dir that holds a run of another --seed would mix the two runs'
    rollouts and checkpoints: refused, naming the seed to resume with; the same seed passes
    the check (and then stops at the unknown stage here, before running anything)."""
    from rl755.pipeline import runners

    out = tmp_path / "run"
    out.mkdir()
    (out / runners.SUMMARY).write_text(json.dumps({"seed": 3}))
    with pytest.raises(ValueError, match=r"--seed=3 .*resume it, or pass another --out_dir"):
        runners.run_local(pipeline.PRESETS["tiny"], str(out), seed=4)
    assert sorted(os.listdir(out)) == [runners.SUMMARY]
    with pytest.raises(ValueError, match="Unknown stages"):
        runners.run_local(pipeline.PRESETS["tiny"], str(out), seed=3, stages=["no_such_stage"])


def test_the_summary_reports_the_controllers_and_the_random_policys_scores(tmp_path):
    """pipeline_summary.json's scores come from evaluation.json: the controller's mean and std,
    the random policy's beside them, and how many episodes; the run's seed is kept."""
    import time

    from rl755.environments import Environments
    from rl755.pipeline import report

    preset = pipeline.PRESETS["tiny"]
    paths = pipeline.Paths(str(tmp_path), Environments.from_name(preset.environment))
    os.makedirs(paths.evaluation_dir)
    evaluation = {
        "mean": 5.0,
        "std": 1.0,
        "returns": [4.0, 6.0],
        "random_policy": {"mean": -1.0, "std": 0.5, "returns": [-1.5, -0.5]},
    }
    with open(os.path.join(paths.evaluation_dir, "evaluation.json"), "w") as f:
        json.dump(evaluation, f)
    summary = report.make_summary(preset, str(tmp_path), [], time.time(), {"seed": 3})
    assert summary["scores"] == {
        "controller": {"mean": 5.0, "std": 1.0},
        "random_policy": {"mean": -1.0, "std": 0.5},
        "episodes": 2,
    }
    assert summary["seed"] == 3
