"""What the pipeline leaves besides the stages' own outputs: the stages' flags, the pictures it
collects, a SLURM chain's refusal, the recipe report's record and the archive of a packed
run; each checked without training anything."""

import json
import os
import tarfile
import tempfile

import numpy as np
import pytest
from fake_slurm import FakeSlurm

from rl755 import pipeline
from rl755.common import run_record
from rl755.common.errors import BadInput
from rl755.environments import Environments
from rl755.pipeline import pack, recipe_runner, report, runners
from rl755.slurm import cluster


@pytest.mark.parametrize("name", sorted(pipeline.PRESETS))
def test_every_stage_runs_on_the_presets_environment_with_seed_0_by_default(name):
    preset = pipeline.PRESETS[name]
    stages = pipeline.build_stages(preset, "/tmp/unused")
    assert {s.name: s.flags.get("environment") for s in stages} == {
        s.name: preset.environment for s in stages
    }
    with_seed_0 = pipeline.build_stages(preset, "/tmp/unused", seed=0)
    assert [s.flags for s in stages] == [s.flags for s in with_seed_0]


def _png(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"png of " + path.encode())


@pytest.mark.parametrize("connect", ["zoo", "directories"])
def test_the_pictures_are_the_newest_of_each_stage_and_frames_of_the_runs_models(
    tmp_path, monkeypatch, connect
):
    import dataclasses

    from rl755 import visualize
    from rl755.controller import resolve

    preset = dataclasses.replace(pipeline.PRESETS["tiny"], connect=connect)
    out = str(tmp_path)
    paths = pipeline.Paths(out, Environments.from_name(preset.environment))
    encoder_dir = paths.model_dir(preset.encoder_name)
    _png(os.path.join(encoder_dir, "old.png"))
    os.utime(os.path.join(encoder_dir, "old.png"), (1, 1))
    _png(os.path.join(encoder_dir, "new.png"))
    _png(os.path.join(paths.model_dir(preset.controller_name), "curve.png"))
    drawn = []

    def frames_of_models(env, encoder, seq, dst):
        drawn.append(("models", encoder, seq))
        _png(dst)

    def frames_for_registry(env, encoder_name, sequential_name, dst):
        drawn.append(("registry", encoder_name, sequential_name))
        _png(dst)

    monkeypatch.setattr(visualize, "predicted_frames_of_models", frames_of_models)
    monkeypatch.setattr(visualize, "predicted_frames_for_registry", frames_for_registry)
    monkeypatch.setattr(resolve, "EncoderFromDir", lambda *a: lambda: ("encoder", a))
    monkeypatch.setattr(resolve, "SequentialModelFromDir", lambda *a: lambda: ("seq", a))

    made = report.collect_pictures(preset, out)

    pictures = paths.pictures_dir
    assert made == [
        os.path.join(pictures, "vae_reconstructions.png"),
        os.path.join(pictures, "controller_learning_curve.png"),
        os.path.join(pictures, "predicted_frames.png"),
    ]
    with open(made[0], "rb") as f:
        assert f.read() == b"png of " + os.path.join(encoder_dir, "new.png").encode()
    if connect == "directories":
        z = int(preset.train_encoder["representation_size"])
        encoder_args = (preset.environment, preset.train_encoder["model"], encoder_dir, z)
        sequential_dir = paths.model_dir(preset.sequential_name)
        assert drawn == [("models", ("encoder", encoder_args), ("seq", (sequential_dir,)))]
    else:
        assert drawn == [("registry", preset.encoder_name, preset.sequential_name)]


def test_a_summarys_wall_time_is_kept_to_a_tenth_of_a_second(tmp_path, monkeypatch):
    class Clock:
        @staticmethod
        def time():
            return 1000.0

    monkeypatch.setattr(report, "time", Clock)
    summary = report.make_summary(pipeline.PRESETS["tiny"], str(tmp_path), [], 1000.0 - 12.34)
    assert summary["total_seconds"] == 12.3


def test_a_slurm_chain_that_can_never_start_is_refused_with_the_pipelines_flags(
    tmp_path, monkeypatch
):
    slurm = FakeSlurm(tmp_path / "bin", monkeypatch)
    slurm.answer("scontrol", stdout="PartitionName=p Default=YES MaxTime=5\n", match="partition")
    slurm.answer(
        "scontrol", stdout="NodeName=n CPUTot=1 RealMemory=100 Partitions=p\n", match="node"
    )
    cluster._read_cluster_cached.cache_clear()
    for key in pipeline.stage_environ("/x"):
        monkeypatch.delenv(key, raising=False)
    try:
        with pytest.raises(BadInput) as info:
            runners.submit_slurm(pipeline.PRESETS["tiny"], str(tmp_path / "run"))
    finally:
        cluster._read_cluster_cached.cache_clear()
    from rl755.pipeline.resources import flag_hint

    assert flag_hint() in str(info.value)
    assert slurm.calls("sbatch") == []  # nothing submitted
    assert not os.path.exists(tmp_path / "run" / pipeline.stages.RUN_FILE)


def test_the_recipe_report_is_recorded_with_its_flags(tmp_path, monkeypatch):
    out = str(tmp_path / "run")
    os.makedirs(out)
    with open(os.path.join(out, "recipe.json"), "w") as f:
        json.dump({"recipe": "tiny_car_racing_real", "seed": 0, "deterministic": None}, f)
    summary = recipe_runner.report(out)
    assert [r["status"] for r in summary["steps"]] == ["not done"] * len(summary["steps"])
    [record] = [r for r in run_record.read_records(out) if r["stage"] == "recipe_report"]
    assert record["flags"] == {"out_dir": out, "report": True}
    assert record["status"] == "completed"


def test_a_packed_run_holds_each_file_once_and_unpacks_beside_its_new_directory(
    tmp_path, monkeypatch
):
    from test_pack import _fake_run

    out = _fake_run(tmp_path / "run")
    archive = str(tmp_path / "run.tar.gz")
    manifest = pack.pack_run(out, archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert len(names) == len(set(names)) == len(manifest["files"]) + 1
    staged = []
    real = tempfile.mkdtemp

    def mkdtemp(**kwargs):
        staged.append(kwargs.get("dir"))
        return real(**kwargs)

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    target = tmp_path / "elsewhere" / "run"
    pack.unpack_run(archive, str(target))
    # Staged in the new directory's parent, so that the last rename stays on one file system.
    assert staged == [str(target.parent)]
    assert sorted(os.listdir(target.parent)) == ["run"]


def test_threads_reach_every_stage_that_takes_them():
    from rl755.pipeline.stages import WIRED_FLAGS

    for name, preset in pipeline.PRESETS.items():
        for stage in pipeline.build_stages(preset, "/tmp/unused", threads=3):
            kind = "encode" if stage.name.startswith("encode") else stage.name
            if "num_threads" in WIRED_FLAGS.get(kind, ()):
                assert stage.flags["num_threads"] == 3, (name, stage.name)


def test_a_shards_rollouts_are_compared_whatever_its_compression(tmp_path):
    from test_rollout_datasets import _raw_rollout, _write

    from rl755.pipeline import compare

    rng = np.random.default_rng(0)
    rollouts = [_raw_rollout(rng, 3), _raw_rollout(rng, 4)]
    _write(tmp_path, "gz", rollouts, "GZIP")
    _write(tmp_path, "plain", rollouts, "")
    [gz] = [str(p) for p in tmp_path.glob("gz*")]
    [plain] = [str(p) for p in tmp_path.glob("plain*")]
    arrays = compare._tfrecord_arrays(gz)
    assert int(arrays["num_records"]) == 2 and arrays["1/actions"].shape == (4, 3)
    assert compare.compare_files(gz, plain) is None  # the same rollouts: no difference


def test_a_slurm_chain_writes_the_runs_preset_and_seed_before_submitting(tmp_path, monkeypatch):
    from rl755.slurm import launcher

    slurm = FakeSlurm(tmp_path / "bin", monkeypatch)
    slurm.answer("sbatch", stdout="500\n", match="--parsable")
    slurm.answer("scontrol", stdout="PartitionName=p Default=YES\n", match="partition")
    node = "NodeName=n CPUTot=64 RealMemory=512000 Gres=gpu:8 Partitions=p\n"
    slurm.answer("scontrol", stdout=node, match="node")
    monkeypatch.setattr(launcher, "check_stage", lambda *a, **k: None)
    cluster._read_cluster_cached.cache_clear()
    for key in pipeline.stage_environ("/x"):
        monkeypatch.delenv(key, raising=False)
    out = str(tmp_path / "run")
    try:
        results = runners.submit_slurm(pipeline.PRESETS["tiny"], out, seed=3)
    finally:
        cluster._read_cluster_cached.cache_clear()
    assert [r.job_id for r in results] == ["500"] * len(results)
    preset, seed = runners.read_run_file(out)
    assert (preset.environment, seed) == ("FAKE_PIXELS", 3)


def test_stages_with_other_files_say_which_run_has_which(tmp_path):
    from rl755.pipeline import compare

    diff = compare.compare_stage("encode", "/a", "/b", ["x", "y"], ["y", "z1", "z2"])
    assert diff == compare.StageDiff(
        "encode", False, 2, "1 files only in run A (e.g. x); 2 files only in run B (e.g. z1)",
        float("inf"),
    )  # fmt: skip
    assert compare.compare_stage("s", "/a", "/b", [], []).identical is None


def test_a_shards_episode_ends_are_compared(tmp_path):
    from test_rollout_datasets import _raw_rollout, _write

    from rl755.pipeline import compare

    for name, done in (("a", True), ("b", False)):
        _write(tmp_path, name, [_raw_rollout(np.random.default_rng(0), 3, done=done)], "GZIP")
    [a], [b] = tmp_path.glob("a*"), tmp_path.glob("b*")
    assert compare._tfrecord_arrays(str(a))["0/done"] == np.asarray(True)
    assert compare.compare_files(str(a), str(b)) is not None  # only the end differs


def test_each_stage_is_compared_on_its_own_output_files_only(tmp_path):
    from rl755.pipeline import compare
    from rl755.pipeline.stages import Paths

    preset = pipeline.PRESETS["tiny"]
    paths = Paths(str(tmp_path), Environments.from_name(preset.environment))
    enc, seq = paths.model_dir(preset.encoder_name), paths.model_dir(preset.sequential_name)
    ctl = paths.model_dir(preset.controller_name)
    made = {
        "collect": [(paths.raw_dir, "rollouts-train.tfrecord-00000-of-00002")],
        "train_encoder": [(enc, "model-001.weights.h5"), (enc, "model-001.json")],
        "encode": [(paths.encoded_dir(preset.encoder_name), "encoded-train.tfrecord-00000")],
        "train_sequential": [
            (seq, "model-002.weights.h5"),
            (seq, "model-002.npz"),
            (seq, "model-002.json"),
        ],
        "train_controller": [(ctl, "controller_params.npy"), (ctl, "summary.json")],
        "evaluate": [(paths.evaluation_dir, "evaluation.json")],
    }
    others = [  # what no stage is compared on: logs, records, pictures, temporary files
        (paths.raw_dir, ".rollouts-train.tfrecord-00001-of-00002.tmp"),
        (enc, "events.out.tfevents.1"),
        (os.path.join(enc, "runs"), "run-1.json"),
        (paths.evaluation_dir, "episodes.png"),
    ]
    for directory, name in [f for files in made.values() for f in files] + others:
        os.makedirs(directory, exist_ok=True)
        open(os.path.join(directory, name), "w").close()
    expected = {
        stage: sorted(os.path.relpath(os.path.join(d, n), tmp_path) for d, n in files)
        for stage, files in made.items()
    }
    assert compare.stage_files(preset, str(tmp_path)) == expected


def test_cma_es_summaries_differ_by_any_fitness_and_not_by_their_timings(tmp_path):
    from rl755.pipeline import compare

    def summary(name, **change):
        generation = {"mean": 1.0, "best": 2.0, "worst": 0.5, "sigma": 0.125, "seconds": 3.0}
        data = {
            "history": [generation, {**generation, **change.get("history", {})}],
            "evals": [{"mean": 1.5, "seconds": 1.0, **change.get("evals", {})}],
            "best_fitness": change.get("best_fitness", 2.0),
        }
        os.makedirs(tmp_path / name, exist_ok=True)
        path = str(tmp_path / name / "summary.json")
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    base = summary("base")
    assert compare.compare_files(base, summary("timings", history={"seconds": 9.0})) is None
    assert compare.compare_files(base, summary("eval_timings", evals={"seconds": 9.0})) is None
    changes = {
        "history.*.mean": dict(history={"mean": 1.25}),
        "history.*.best": dict(history={"best": 2.25}),
        "history.*.worst": dict(history={"worst": 0.75}),
        "history.*.sigma": dict(history={"sigma": 0.375}),
        "evals.*.mean": dict(evals={"mean": 1.75}),
        "best_fitness": dict(best_fitness=2.25),
    }
    for key, change in changes.items():
        assert compare.compare_files(base, summary(key, **change)) == (key, 0.25), key
    # identical outputs of a stage say so
    diff = compare.compare_stage("train_controller", str(tmp_path / "base"),
                                 str(tmp_path / "timings"), ["summary.json"], ["summary.json"])  # fmt: skip
    assert diff == compare.StageDiff("train_controller", True, 1, "identical")
