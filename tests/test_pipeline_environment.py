"""`scripts/pipeline.py --environment=NAME`: any environment of the table through the five
stages with any preset, the models sized by its entry, the stages connected by the run's own
directories. End to end on CATCH (an old gym-API class with a constructor seed, which has
nothing but its entry), with the command of docs/guides/new-environment.md, twice."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest
from pipeline_helpers import REPO, output_files

from rl755 import pipeline
from rl755.environments import Environments
from rl755.pipeline import compare, resources
from rl755.policies import exploration_policy

GUIDE = os.path.join(REPO, "docs", "guides", "new-environment.md")


def guide_pipeline_command(preset: str = "tiny") -> list[str]:
    """The guide's `scripts/pipeline.py --preset=<preset>` command, as arguments."""
    text = open(GUIDE).read().replace("\\\n", " ")
    (line,) = [
        ln.strip()
        for ln in text.splitlines()
        if ln.strip().startswith("python scripts/pipeline.py") and f"--preset={preset} " in ln
    ]
    return line.split()[1:]


def _with_out_dir(args: list[str], out_dir) -> list[str]:
    return [f"--out_dir={out_dir}" if a.startswith("--out_dir=") else a for a in args]


def _run_guide_command(out_dir, *extra, timeout=1500, env=None):
    args = _with_out_dir(guide_pipeline_command(), out_dir)
    env = dict(os.environ, RL755_CONFIG=str(out_dir) + ".no_config.json", **(env or {}))
    proc = subprocess.run(
        [sys.executable, *args, *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


# ---- the preset of an environment ---------------------------------------------------------------
def test_a_presets_own_environment_keeps_the_preset_exactly():
    """The shipped environments' presets, and so their demo numbers, are untouched."""
    for name, preset in pipeline.PRESETS.items():
        assert pipeline.get_preset(name) is preset
        assert pipeline.get_preset(name, preset.environment.lower()) is preset
        assert preset.connect == "zoo"


@pytest.mark.parametrize("preset_name", ["tiny", "demo", "world_models"])
def test_any_environment_with_any_preset_is_sized_by_its_entry(preset_name):
    base = pipeline.PRESETS[preset_name]
    for env in Environments:
        if env.name == base.environment:
            continue
        p = pipeline.get_preset(preset_name, env.name)
        z = env.presets.representation_size
        assert (p.environment, p.connect, p.shipped) == (env.name, "directories", ())
        assert p.train_encoder == {**base.train_encoder, "representation_size": z}
        assert p.collect == {**base.collect, "policy": exploration_policy(env)}
        for stage in ("train_sequential", "train_controller", "evaluate", "encode"):
            assert getattr(p, stage) == getattr(base, stage), stage  # the preset's sizes
        assert p.resources == base.resources
        assert p.encoder_name == f"raw_rollout_vae_{z}ld"
        pipeline.check_preset(p)  # every name resolves, without zoo rows


def test_the_stages_read_the_run_s_own_directories():
    p = pipeline.get_preset("tiny", "CATCH")
    assert p.collect["policy"] == "RandomPolicy" and p.train_encoder["representation_size"] == 4
    out = "/runs/catch"
    stages = {s.name: s.flags for s in pipeline.build_stages(p, out)}
    encoder_dir = stages["train_encoder"]["model_dir"]
    assert encoder_dir == "/runs/catch/models/catch/raw_rollout_vae_4ld"
    assert stages["collect"]["out_dir"] == "/runs/catch/data/catch/raw_rollouts"
    for split in ("train", "validation"):
        encode = stages[f"encode_{split}"]
        assert (encode["model"], encode["model_dir"]) == ("vae.Vae", encoder_dir)
        assert encode["out_dir"] == "/runs/catch/data/catch/encoded_rollouts/raw_rollout_vae_4ld"
    seq = stages["train_sequential"]
    assert seq["rollouts_dataset"] == "VaeEncodedRollouts"
    assert seq["rollouts_pattern"] == os.path.join(
        stages["encode_train"]["out_dir"], "encoded-{split}*.tfrecord-*"
    )
    ctrl = stages["train_controller"]
    assert "encoder" not in ctrl and "sequential_model" not in ctrl
    assert ctrl["encoder_dir"] == encoder_dir and ctrl["encoder_model"] == "vae.Vae"
    assert ctrl["representation_size"] == 4
    assert ctrl["sequential_model_dir"] == seq["model_dir"]
    assert stages["evaluate"]["model_dir"] == ctrl["model_dir"]
    # The scripts take these flags (absl parses them; nothing runs).
    from rl755.slurm.launcher import check_stage

    for stage in pipeline.build_stages(p, "/tmp/unused", threads=1):
        check_stage(stage.script, stage.flags)


def test_an_unknown_environment_is_one_line_and_leaves_nothing(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "scripts/pipeline.py"),
            "--preset=tiny",
            "--environment=NOPE",
            f"--out_dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "scripts/pipeline.py: --environment: Unknown environment 'NOPE'. Valid --environment "
        f"values: {', '.join(Environments.names())}. To add one, see "
        "docs/guides/new-environment.md."
    ]
    assert not os.path.exists(tmp_path / "run")


# ---- end to end on CATCH -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def catch_run(tmp_path_factory):
    """The guide's tiny CATCH command, run once for this module: (out_dir, stdout)."""
    out = tmp_path_factory.mktemp("catch") / "a"
    return out, _run_guide_command(out).stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_catch_runs_through_the_pipeline_and_again_identically(catch_run, tmp_path):
    a, stdout = catch_run
    assert "Preset tiny: CATCH at this preset's sizes" in stdout
    assert re.search(r"controller -?\d+\.\d ± \d+\.\d  vs  random policy", stdout), stdout
    summary = json.loads((a / "pipeline_summary.json").read_text())
    assert [r["stage"] for r in summary["stages"]] == [
        "collect",
        "train_encoder",
        "encode_train",
        "encode_validation",
        "train_sequential",
        "train_controller",
        "evaluate",
        "pictures",
    ]
    assert all(r["status"] == "ok" for r in summary["stages"]), summary["stages"]
    assert sorted(os.listdir(a / "pictures")) == [
        "controller_learning_curve.png",
        "episode.gif",
        "predicted_frames.png",
        "vae_reconstructions.png",
    ]
    # Each stage read the previous one's directory: the trained models load from there.
    from rl755.controller.resolve import EncoderFromDir, SequentialModelFromDir
    from rl755.data.registry import encoded_rollouts_class

    models = a / "models" / "catch"
    encoder = EncoderFromDir("CATCH", "vae.Vae", str(models / "raw_rollout_vae_4ld"), 4)()
    frames = np.stack([Environments.CATCH.make().reset(seed=s)[0] for s in range(2)])
    assert encoder.compute_full_representation(frames)[0].shape == (2, 4)
    encoded_dir = a / "data" / "catch" / "encoded_rollouts" / "raw_rollout_vae_4ld"
    dataset = encoded_rollouts_class("CATCH", "VaeEncodedRollouts")(
        str(encoded_dir / "encoded-{split}*.tfrecord-*")
    )
    assert dataset.representation_size() == 4
    rollout = next(dataset.rollouts_ds(shuffle_files=False).as_numpy_iterator())
    assert rollout["observations"].shape[1:] == (4,) and rollout["actions"].shape[1:] == (3,)
    seq = SequentialModelFromDir(str(models / "mdn_rnn_vae_4ld"))()
    assert (seq.representation_size, seq.action_size) == (4, 3)
    meta = json.loads((models / "linear_controller_vae_mdn_rnn" / "controller.json").read_text())
    assert meta["encoder"] == f"dir:vae.Vae:4:{models / 'raw_rollout_vae_4ld'}"
    assert meta["sequential_model"] == f"dir:{models / 'mdn_rnn_vae_4ld'}"
    evaluation = json.loads((a / "evaluation" / "evaluation.json").read_text())
    assert evaluation["environment"] == "CATCH" and len(evaluation["returns"]) == 2

    # The same command in another directory: identical results, stage by stage.
    b = tmp_path / "b"
    _run_guide_command(b)
    preset = pipeline.get_preset("tiny", "CATCH")
    diffs = compare.compare_runs(str(a), str(b), preset)
    assert all(d.identical for d in diffs), compare.format_diffs(diffs)
    ctrl = "models/catch/linear_controller_vae_mdn_rnn/controller_params.npy"
    assert (a / ctrl).read_bytes() == (b / ctrl).read_bytes()
    evals = [json.loads((d / "evaluation/evaluation.json").read_text()) for d in (a, b)]
    for key in ("returns", "steps"):
        assert evals[0][key] == evals[1][key]
        assert evals[0]["random_policy"][key] == evals[1]["random_policy"][key]
    assert output_files(a) == output_files(b)


def _stage_flags(out_dir, commands) -> set:
    """{flags}: each of `commands` ([script, *flags]) without its script (collection's job
    runs it by its original path, which records the script it forwards to), with `out_dir`
    written as OUT."""
    return {tuple(a.replace(str(out_dir), "OUT") for a in c[1:]) for c in commands}


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_catch_on_slurm_submits_the_commands_the_local_run_ran(catch_run, tmp_path):
    """The local run's stage commands, as each stage recorded them, are the ones the SLURM
    chain's jobs run (a dry run: scripts written, nothing submitted). A real SLURM chain of
    the tiny preset is run and compared with a local one in tests/test_slurm_pipeline.py."""
    local, _ = catch_run
    records = [
        json.load(open(os.path.join(d, f)))
        for d, _, files in os.walk(local)
        if os.path.basename(d) == "runs"
        for f in files
        if f.endswith(".json")
    ]
    ran = [r["argv"] for r in records if r.get("stage") != "pipeline_report"]
    assert len(ran) == 7, [r["argv"][0] for r in records]  # the encodes: one record each
    out = tmp_path / "slurm_catch"
    no_slurm = {"PATH": os.path.dirname(sys.executable)}  # (sbatch is not on it)
    proc = _run_guide_command(out, "--launcher=slurm", "--dry_run", env=no_slurm)
    assert "not submitted" in proc.stdout, proc.stdout
    jobs = {}  # (each stage's job script is in its output directory's slurm/)
    for d, _, names in os.walk(out):
        for name in names:
            if name.endswith(".sbatch"):
                last = shlex.split(open(os.path.join(d, name)).read().strip().splitlines()[-1])
                jobs[name.split("-")[0]] = last
    assert sorted(jobs) == sorted(resources.CHAIN_STAGES), sorted(jobs)
    submitted = [c[1:] for name, c in jobs.items() if name != "report"]  # (the interpreter)
    assert all(os.path.isfile(c[0]) for c in submitted), submitted
    assert _stage_flags(out, submitted) == _stage_flags(local, ran)
    assert all("--environment=CATCH" in c for c in submitted)
