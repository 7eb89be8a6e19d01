"""What a run's own files say and where its steps read: recipe.json and pipeline.json, an
unpacked run's resume, a SLURM submission's record, encode steps' patterns, GPU groups."""

import fnmatch
import json
import os
import sys

import pytest

from rl755 import pipeline
from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.pipeline import pack, presets, recipe_runner
from rl755.pipeline.recipe_book import RECIPES, get_recipe
from rl755.pipeline.recipes import RECIPE_FILE
from rl755.pipeline.stages import RUN_FILE


def test_a_run_is_a_recipe_run_or_a_preset_run_by_the_file_it_holds(tmp_path):
    recipe_run, preset_run = tmp_path / "r", tmp_path / "p"
    recipe_run.mkdir()
    preset_run.mkdir()
    (recipe_run / RECIPE_FILE).write_text(json.dumps({"recipe": "tiny_doom_dream", "seed": 1}))
    (preset_run / RUN_FILE).write_text(json.dumps({"preset": "tiny", "seed": 2}))
    assert pack.run_kind(str(recipe_run)) == ("recipe", {"recipe": "tiny_doom_dream", "seed": 1})
    assert pack.run_kind(str(preset_run)) == ("preset", {"preset": "tiny", "seed": 2})


def test_an_unpacked_recipe_run_resumes_with_its_seed_and_determinism(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(recipe_runner, "run_recipe", lambda *a: calls.append(a) or {"ok": 1})
    run = {"recipe": "tiny_doom_dream", "seed": 7, "deterministic": True}
    assert pack.resume_unpacked({"kind": "recipe", "run": run}, str(tmp_path)) == {"ok": 1}
    assert calls == [("tiny_doom_dream", str(tmp_path), 7, True)]


def test_an_unreadable_recipe_file_is_named_with_why(tmp_path):
    (tmp_path / RECIPE_FILE).write_text("{not json")
    with pytest.raises(BadInput) as e:
        recipe_runner.read_recipe_file(str(tmp_path))
    assert str(e.value).startswith(f"{tmp_path / RECIPE_FILE} is unreadable: Expecting ")
    assert recipe_runner.read_recipe_file(str(tmp_path / "none")) is None


def test_a_submitted_recipe_records_its_name_and_seed_before_its_jobs(
    tmp_path, monkeypatch, environ
):
    from rl755.slurm import chain

    asked = {}

    def submit_chain(stages, before_submitting, **kwargs):
        asked.update(kwargs, stages=stages)
        before_submitting()
        return []

    monkeypatch.setattr(chain, "submit_chain", submit_chain)
    out = str(tmp_path / "run")
    assert recipe_runner.submit_recipe("tiny_doom_dream", out, seed=3, deterministic=True) == []
    # scripts/status.py names the chain by its label; its record goes beside the run's files.
    assert asked["label"] == "recipe tiny_doom_dream" and asked["skip_done"] is True
    assert asked["record_dir"] == os.path.join(os.path.abspath(out), "slurm")
    report = asked["stages"][-1]
    assert report.name == "report" and report.flags == {
        "out_dir": os.path.abspath(out),
        "report": True,
    }
    assert report.after == tuple(st.name for st in asked["stages"][:-1])
    recorded = recipe_runner.read_recipe_file(out)
    assert (recorded["recipe"], recorded["seed"], recorded["deterministic"]) == (
        "tiny_doom_dream",
        3,
        True,
    )


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_encode_step_reads_the_shards_its_collection_writes(name):
    steps = get_recipe(name).steps
    collected = {s.flags["out_dir"] for s in steps if s.stage == "collect"}
    encodes = [s for s in steps if s.stage == "encode"]
    assert encodes and collected
    for step in encodes:
        pattern = step.flags["rollouts_pattern"].format(split=step.flags["split"])
        [raw_dir] = [d for d in collected if pattern.startswith(d + "/")]
        shard = os.path.join(
            raw_dir, sharded_io.shard_name(f"rollouts-{step.flags['split']}", 1, 4)
        )
        assert fnmatch.fnmatch(shard, pattern), (step.name, pattern)


def test_the_gpu_groups_get_the_gpu_resources_and_the_others_the_cpu_ones():
    cpu, gpu = {"cpus": 2}, {"gpus": 1}
    groups = presets._resources(cpu, gpu, encode={"time": "1:00:00"})
    for group in ("train_encoder", "train_sequential"):
        assert groups[group] == gpu, group
    assert groups["encode"] == {"gpus": 1, "time": "1:00:00"}
    others = set(groups) - {"train_encoder", "encode", "train_sequential"}
    assert others and all(groups[g] == cpu for g in others)


def test_a_runs_evaluation_plays_seeds_10000_past_the_run_seed():
    """Evaluation episodes start at 10,000 + --seed: never the seeds collection drew from."""
    for seed in (0, 5):
        stages = pipeline.build_stages(pipeline.PRESETS["tiny"], "/tmp/unused", seed=seed)
        [evaluate] = [s for s in stages if s.name == "evaluate"]
        assert evaluate.flags["seed"] == 10_000 + seed


def test_car_racing_sequential_training_waits_for_both_encoded_splits(tmp_path, monkeypatch):
    from rl755.pipeline.recipes import build_recipe_stages

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # no sbatch: no cluster asked
    stages = build_recipe_stages(get_recipe("car_racing_real"), str(tmp_path))
    after = {s.name: s.after for s in stages}
    assert after["train_sequential"] == ("encode_train", "encode_validation")


def test_a_run_without_its_pipeline_file_is_refused_with_what_to_do(tmp_path):
    from rl755.pipeline.runners import read_run_file

    with pytest.raises(BadInput) as e:
        read_run_file(str(tmp_path))
    assert str(e.value).endswith(
        "it is written by scripts/pipeline.py when a run starts. Run the pipeline on this "
        "--out_dir first."
    )
    assert str(e.value).startswith(f"{tmp_path / RUN_FILE} is missing or unreadable (")


def test_the_slurm_report_prints_the_summary_it_writes(tmp_path, capsys):
    out = str(tmp_path / "run")
    os.makedirs(out)
    with open(os.path.join(out, RECIPE_FILE), "w") as f:
        json.dump({"recipe": "tiny_car_racing_real", "seed": 0, "deterministic": None}, f)
    summary = recipe_runner.report(out)
    assert recipe_runner.format_summary(summary) in capsys.readouterr().out


@pytest.mark.parametrize("name", ["doom_dream", "tiny_doom_dream"])
def test_the_doom_recipes_controllers_read_the_vae_at_its_own_z(name):
    """Every step that loads the recipe's VAE from its directory is told the VAE's Z: the
    zoo row raw_rollout_vae_64ld's 64."""
    from rl755 import zoo

    z = zoo.get("DOOM_TAKE_COVER", "raw_rollout_vae_64ld").representation_size
    readers = [s for s in get_recipe(name).steps if "encoder_dir" in s.flags]
    assert readers and all(s.flags["representation_size"] == z == 64 for s in readers)


def test_a_derived_preset_changes_only_the_resource_fields_it_names():
    import dataclasses

    base = dataclasses.asdict(pipeline.PRESETS["demo"])
    changes = {g: ({"time": "9:00:00"} if g == "encode" else {}) for g in base["resources"]}
    derived = presets._preset(base, resources=changes)
    assert derived.resources == {
        **base["resources"],
        "encode": {**base["resources"]["encode"], "time": "9:00:00"},
    }
    assert len(derived.resources["encode"]) > 1 and base["resources"]["encode"]["time"] != "9:00:00"


@pytest.mark.parametrize("name", ["../escape.txt", "/abs.txt", "a/../../b.txt"])
def test_an_archive_member_outside_the_run_is_refused_and_nothing_is_left(tmp_path, name):
    import io
    import tarfile

    archive = str(tmp_path / "run.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for member, data in ((pack.MANIFEST, b'{"files": [], "out_dir": "/x"}'), (name, b"x")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(BadInput) as e:
        pack.unpack_run(archive, str(tmp_path / "out" / "run"))
    assert str(e.value) == f"{archive} holds {name!r}, not a file of a packed run."
    assert os.listdir(tmp_path / "out") == [] and not (tmp_path / "escape.txt").exists()
