"""What each pipeline stage asks SLURM for: preset, config file, flags (no SLURM needed)."""

import json
import os
import subprocess
import sys

import pytest

from rl755 import pipeline
from rl755.common.errors import BadInput
from rl755.pipeline import resources
from rl755.slurm.sbatch import Resources

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = pipeline.PRESETS["tiny"]


def _res(stage, flags=None, site=None, **placement):
    overrides = pipeline.parse_overrides(flags or {}, **placement)
    return pipeline.stage_resources(TINY, stage, overrides, site=site or {})


def test_tiny_presets_ask_for_tiny_resources_and_name_no_partition():
    for name in ("tiny", "tiny_car_racing"):
        stages = pipeline.build_stages(pipeline.PRESETS[name], "/tmp/x", report=True)
        assert [s.name for s in stages] == list(resources.CHAIN_STAGES)
        for s in stages:
            r = s.resources
            assert r.cpus <= 2 and r.mem == "2G" and r.partition is None, (s.name, r)
            assert r.gpus == (1 if s.name in ("train_encoder", "train_sequential") or
                              s.name.startswith("encode") else 0)  # fmt: skip
    for preset in pipeline.PRESETS.values():
        for s in pipeline.build_stages(preset, "/tmp/x", report=True):
            assert s.resources.partition is None and s.resources.qos is None


def test_layers_preset_then_file_then_flags():
    assert (_res("train_controller").cpus, _res("train_controller").mem) == (1, "2G")
    assert _res("collect").cpus == 2  # tiny: --parallelism=2
    site = {"stages": {"train_controller": {"mem": "8G"}, "encode": {"cpus": 2}}}
    assert _res("train_controller", site=site).mem == "8G"
    assert _res("encode_validation", site=site).cpus == 2  # the group covers both encodes
    # a flag for every stage beats the file; a flag for one stage beats both
    assert _res("train_controller", {"mem": ["4G"]}, site=site).mem == "4G"
    flags = {"mem": ["4G", "train_controller=3G"], "time": ["encode_train=45"]}
    assert _res("train_controller", flags, site=site).mem == "3G"
    assert _res("collect", flags).mem == "4G"
    assert (_res("encode_train", flags).time, _res("encode_validation", flags).time) == (
        "45",
        "0:30:00",
    )
    # a later value for the same stage replaces an earlier one
    assert _res("collect", {"cpus": ["collect=1", "collect=2"]}).cpus == 2


def test_partitions_follow_gpus():
    site = {"partition": "general", "gpu_partition": "volta-gpu", "gpu_qos": "gpu_access"}
    gpu, cpu = _res("train_encoder", site=site), _res("evaluate", site=site)
    assert (gpu.partition, gpu.qos, cpu.partition, cpu.qos) == (
        "volta-gpu",
        "gpu_access",
        "general",
        None,
    )
    # --gpus=0 runs the GPU stages on CPUs, in the CPU partition
    no_gpu = _res("train_encoder", {"gpus": ["0"]}, site=site)
    assert (no_gpu.gpus, no_gpu.partition, no_gpu.qos) == (0, "general", None)
    # flags beat the file; --partition alone places the GPU stages too when no GPU one is known
    assert _res("train_encoder", {"partition": ["short"]}, site=site).partition == "volta-gpu"
    assert _res("train_encoder", {"partition": ["short"]}).partition == "short"
    assert _res("train_encoder", gpu_partition="a100", site=site).partition == "a100"
    # --gpu_qos beats the file's on the GPU stages and leaves the CPU stages without one
    assert _res("train_encoder", gpu_qos="gpu_long", site=site).qos == "gpu_long"
    assert _res("evaluate", gpu_qos="gpu_long", site=site).qos is None
    assert _res("evaluate", {"partition": ["evaluate=big"]}, site=site).partition == "big"
    assert _res("report", account="lab").account == "lab"
    # the account of the config file charges every stage; --account beats it
    on_file = {**site, "account": "lab"}
    assert {_res(s, site=on_file).account for s in ("train_encoder", "evaluate")} == {"lab"}
    assert _res("evaluate", site=on_file, account="mine").account == "mine"
    assert _res("evaluate").partition is None  # the cluster's default partition


@pytest.mark.parametrize(
    "flags, match",
    [
        ({"mem": ["train_control=4G"]}, "--mem=train_control=4G: unknown stage 'train_control'"),
        ({"mem": ["lots"]}, "--mem=lots: mem='lots' is not SLURM memory syntax"),
        ({"cpus": ["collect=two"]}, "--cpus=collect=two: cpus='two' is not an integer"),
        ({"time": ["forever"]}, "--time=forever: time='forever' is not SLURM time syntax"),
        ({"gpus": ["-1"]}, "--gpus=-1: Need gpus >= 0"),
    ],
)
def test_bad_resource_flags_are_named(flags, match):
    with pytest.raises(BadInput, match=match):
        pipeline.parse_overrides(flags)


def test_unknown_stage_in_config_file_is_named():
    with pytest.raises(BadInput, match=r"unknown stages \['controller'\]"):
        _res("collect", site={"stages": {"controller": {"mem": "1G"}}})


def test_world_models_keeps_the_original_sizes_without_its_partitions():
    stages = {
        s.name: s.resources for s in pipeline.build_stages(pipeline.PRESETS["world_models"], "/x")
    }
    assert stages["train_encoder"] == Resources(gpus=1, cpus=4, mem="32G", time="2-00:00:00")
    assert (stages["train_controller"].cpus, stages["train_controller"].mem) == (32, "32G")
    assert stages["collect"].cpus == 32


def test_pipeline_script_refuses_resource_flags_without_slurm(tmp_path):
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts/pipeline.py"), "--preset=tiny"]
        + [f"--out_dir={tmp_path / 'x'}", "--mem=4G"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "--mem only apply with --launcher=slurm" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x").exists()


def test_dry_run_writes_scripts_with_the_requested_resources(tmp_path, monkeypatch):
    """--dry_run: the sbatch scripts carry the resolved requests; nothing is submitted."""
    from rl755.slurm import sbatch

    monkeypatch.setattr(sbatch, "have_slurm", lambda: False)
    cfg = tmp_path / "rl755_config.json"
    cfg.write_text(json.dumps({"slurm": {"gpu_partition": "volta-gpu"}}))
    overrides = pipeline.parse_overrides({"mem": ["train_controller=3G"], "time": ["90"]})
    results = pipeline.submit_slurm(TINY, str(tmp_path / "run"), dry_run=True, overrides=overrides)
    text = {r.name: open(r.sbatch_script).read() for r in results}
    assert "#SBATCH --mem=3G" in text["train_controller"]
    assert "#SBATCH --partition=volta-gpu" in text["train_encoder"]
    assert "#SBATCH --gres=gpu:1" in text["encode_train"]
    assert "--partition" not in text["collect"] and "#SBATCH --time=90" in text["evaluate"]
    assert "scripts/pipeline.py --out_dir=" in text["report"].replace("'", "")
    assert all(r.job_id is None for r in results)
