"""Carrying a run to another machine: scripts/pack_run.py leaves the raw rollouts out and
keeps everything else; scripts/unpack_run.py unpacks elsewhere, points the records at the new
directory and resumes; an interrupted tiny recipe, packed and resumed elsewhere, ends equal to
the uninterrupted run."""

import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.pipeline import pack, recipe_runner
from rl755.pipeline.recipe_book import get_recipe
from rl755.pipeline.recipes import build_recipe_stages
from rl755.slurm import launcher, resume

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = "tiny_car_racing_real"


def _write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def _fake_run(out):
    """A run directory as a recipe leaves it, without training anything."""
    out = str(out)
    _write(os.path.join(out, "recipe.json"), json.dumps({"recipe": RECIPE, "seed": 0}))
    raw = os.path.join(out, "data", "fake", "raw_rollouts")
    _write(os.path.join(raw, "rollouts-train-abc.tfrecord-00000-of-00001"), "frames")
    _write(os.path.join(raw, "dataset_info.json"), "{}")
    _write(os.path.join(raw, "runs", "r.json"), json.dumps({"flags": {"out_dir": raw}}))
    model = os.path.join(out, "models", "fake", "real_controller_p4")
    _write(os.path.join(model, "model-002.json"), "{}")
    _write(os.path.join(model, "model-002.cma.pkl"), "state")
    _write(
        os.path.join(model, "runs", "r.json"),
        json.dumps({"argv": [f"--model_dir={model}"], "flags": {"model_dir": model}}),
    )
    _write(os.path.join(model, ".model-003.json.tmp-host-1-ab"), "half")
    _write(os.path.join(out, "data", "fake", "encoded_rollouts", "v", "encoded-train-o0"), "z")
    _write(os.path.join(out, "slurm", "chain-1.json"), "{}")
    _write(os.path.join(out, "slurm", "logs-7.out"), "log")
    return out


def test_pack_leaves_out_raw_rollouts_tmp_files_and_chain_records(tmp_path):
    out = _fake_run(tmp_path / "run")
    manifest = pack.pack_run(out, str(tmp_path / "run.tar.gz"))
    with tarfile.open(tmp_path / "run.tar.gz") as tar:
        names = sorted(tar.getnames())
    assert names == sorted(
        [
            "pack.json",
            "recipe.json",
            "data/fake/encoded_rollouts/v/encoded-train-o0",
            "models/fake/real_controller_p4/model-002.json",
            "models/fake/real_controller_p4/model-002.cma.pkl",
            "models/fake/real_controller_p4/runs/r.json",
            "slurm/logs-7.out",
        ]
    )
    assert manifest["left_out"] == ["data/fake/raw_rollouts"]
    assert manifest["out_dir"] == out and manifest["kind"] == "recipe"


def test_unpack_points_the_records_at_the_new_directory(tmp_path, monkeypatch):
    out = _fake_run(tmp_path / "run")
    pack.pack_run(out, str(tmp_path / "run.tar.gz"))
    new = str(tmp_path / "elsewhere" / "run2")
    renames, replace = [], os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (renames.append((a, b)), replace(a, b)))
    pack.unpack_run(str(tmp_path / "run.tar.gz"), new)
    # The run appears at once: unpacked beside it (the same file system), then renamed.
    ((tmp, dst),) = [(a, b) for a, b in renames if b == new]
    assert os.path.dirname(tmp) == os.path.dirname(new) and not os.path.exists(tmp)
    assert os.listdir(os.path.dirname(new)) == ["run2"]
    record = json.load(open(os.path.join(new, "models/fake/real_controller_p4/runs/r.json")))
    model = os.path.join(new, "models", "fake", "real_controller_p4")
    assert record == {"argv": [f"--model_dir={model}"], "flags": {"model_dir": model}}
    assert open(os.path.join(model, "model-002.cma.pkl")).read() == "state"
    assert not os.path.exists(os.path.join(new, "data", "fake", "raw_rollouts"))
    # A sibling whose name starts with the old one's is left alone.
    assert pack.relocate(new, out + "x", "/nowhere") == 0


def test_bad_archives_and_directories_fail_once_and_leave_nothing(tmp_path):
    out = _fake_run(tmp_path / "run")
    with pytest.raises(BadInput, match="inside the run's directory"):
        pack.pack_run(out, os.path.join(out, "x.tar.gz"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="no run of scripts/pipeline.py"):
        pack.pack_run(str(tmp_path / "empty"), str(tmp_path / "x.tar.gz"))
    pack.pack_run(out, str(tmp_path / "run.tar.gz"))
    with pytest.raises(BadInput, match="is not empty"):
        pack.unpack_run(str(tmp_path / "run.tar.gz"), out)
    _write(str(tmp_path / "junk.tar.gz"), "not an archive")
    target = tmp_path / "new"
    proc = subprocess.run(
        [sys.executable, "scripts/unpack_run.py", f"--archive={tmp_path / 'junk.tar.gz'}"]
        + [f"--out_dir={target}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert proc.returncode == 2 and proc.stderr.count("cannot be read as a .tar.gz") == 1
    assert "Traceback" not in proc.stderr
    assert not target.exists() and not [p for p in os.listdir(tmp_path) if ".unpack-" in p]


# ---- an interrupted run, packed, resumed elsewhere, equals the uninterrupted one --------------
def _arrays(path):
    import h5py

    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda k, v: out.__setitem__(k, v[()]) if hasattr(v, "shape") else None)
    return out


def _records(path):
    """The rollouts of a shard, as protos (their bytes order map entries per process)."""
    import tensorflow as tf

    return [
        tf.train.SequenceExample.FromString(r.numpy())
        for r in tf.data.TFRecordDataset(path, compression_type=sharded_io.detect_compression(path))
    ]


def _user_view(out):
    """What a user reads of a finished run: weights, controllers, scores, records."""
    view = {}
    for root, _, names in os.walk(out):
        for name in sorted(names):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, out)
            if name.endswith(".weights.h5"):
                view[rel] = _arrays(path)
            elif name == "controller_params.npy":
                view[rel] = np.load(path)
            elif name in ("controller.json", "evaluation.json"):
                view[rel] = json.loads(open(path).read().replace(out, "<out>"))
            elif ".tfrecord-" in name:
                view[rel] = _records(path)
    summary = json.loads(
        open(os.path.join(out, "recipe_summary.json")).read().replace(out, "<out>")
    )
    view["summary"] = {k: summary[k] for k in ("recipe", "seed", "scores")}
    view["steps"] = [(r["step"], r["status"], r["outputs"], r["code"]) for r in summary["steps"]]
    recipe = get_recipe(RECIPE)
    for step, stage in zip(recipe.steps, build_recipe_stages(recipe, out)):
        record = resume.completed_record(launcher.default_out_dir(stage.flags), stage.flags)
        view[f"record {step.name}"] = json.loads(json.dumps(record["flags"]).replace(out, "<out>"))
    return view


def _assert_equal(a, b):
    assert sorted(a) == sorted(b)
    for key in a:
        if (
            isinstance(a[key], dict)
            and a[key]
            and isinstance(next(iter(a[key].values())), np.ndarray)
        ):
            assert a[key].keys() == b[key].keys(), key
            for k in a[key]:
                np.testing.assert_array_equal(a[key][k], b[key][k], err_msg=f"{key} {k}")
        elif isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


@pytest.mark.slow
@pytest.mark.timeout(1800)  # (a loaded machine)
def test_an_interrupted_run_packed_and_resumed_elsewhere_equals_the_uninterrupted_one(tmp_path):
    whole, cut = str(tmp_path / "whole"), str(tmp_path / "cut")
    recipe_runner.run_recipe(RECIPE, whole, until="train_controller_demo")
    # The interrupted run: the same first steps (a copy, pointed at its own directory), then
    # CMA-ES at population 4 x 4 stopped after 2 of its 3 generations (its checkpoint kept).
    shutil.copytree(whole, cut)
    pack.relocate(cut, whole, cut)
    recipe_runner.run_recipe(RECIPE, whole)  # the uninterrupted run goes on to the end
    p4 = next(s for s in build_recipe_stages(get_recipe(RECIPE), cut) if s.name.endswith("p4"))
    cut_short = launcher.launch(p4.script, {**p4.flags, "cma_generations": 2}, local=True)
    assert cut_short.returncode == 0
    archive = str(tmp_path / "moved" / "cut.tar.gz")
    manifest = pack.pack_run(cut, archive)
    assert "models/fake/real_controller_p4/model-002.cma.pkl" in manifest["files"]
    assert not [f for f in manifest["files"] if f.startswith("data/fake/raw_rollouts/")]
    shutil.rmtree(cut)  # the first machine is gone
    elsewhere = str(tmp_path / "elsewhere" / "run")
    proc = subprocess.run(
        [sys.executable, "scripts/unpack_run.py", f"--archive={archive}", f"--out_dir={elsewhere}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Collected again, the first steps skipped, CMA-ES resumed at generation 3.
    assert proc.stdout.count("done already") == 5, proc.stdout
    _assert_equal(_user_view(whole), _user_view(elsewhere))
