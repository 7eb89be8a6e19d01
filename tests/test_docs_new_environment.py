"""docs/guides/new-environment.md stays true: its entry is the table's, its commands run and
print what the page shows. (Its tiny pipeline command runs, twice, in
tests/test_pipeline_environment.py.)"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from pipeline_helpers import REPO

from rl755.environments import Environments, EnvironmentSpec, ModelPresets
from rl755.environments.wrappers import make_from_constructor

GUIDE = os.path.join(REPO, "docs", "guides", "new-environment.md")
BASH = shutil.which("bash")


def _blocks(kind: str) -> list[str]:
    text = open(GUIDE).read()
    return re.findall(rf"```{kind}\n(.*?)```", text, re.S)


def _commands(block: str) -> list[str]:
    """The shell commands of a bash block (continuation lines joined)."""
    return [c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip()]


def _run(command: str, tmp_path, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=REPO,
        RL755_DATA_DIR=str(tmp_path / "data"),
        RL755_MODELS_DIR=str(tmp_path / "models"),
        RL755_CONFIG=str(tmp_path / "no_config.json"),
        **(env_extra or {}),
    )
    # `python` is this interpreter; $VARIABLES and quotes as a shell reads them.
    argv = [BASH, "-c", re.sub(r"^python ", f"{sys.executable} ", command)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=900)


def _output_after(command_block: str) -> str:
    """The ```text block that follows `command_block` on the page."""
    text = open(GUIDE).read()
    rest = text[text.index(command_block) + len(command_block) :]
    return re.search(r"```text\n(.*?)```", rest, re.S).group(1).strip()


def test_the_guides_entry_is_the_tables_and_fits_in_20_lines():
    (entry,) = [b for b in _blocks("python") if b.startswith("EnvironmentSpec(")]
    assert len(entry.strip().splitlines()) <= 20
    spec = eval(entry, {"EnvironmentSpec": EnvironmentSpec, "ModelPresets": ModelPresets})
    table = Environments.CATCH.spec
    assert spec == dataclasses.replace(table, description=""), (spec, table)


def test_the_headless_checks_print_what_the_guide_shows(tmp_path):
    checks = [b for b in _blocks("bash") if "python -c" in b]
    assert len(checks) == 2  # a constructor string, a gymnasium id
    for block in checks:
        (command,) = _commands(block)
        proc = _run(command, tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.strip().splitlines()[-1] == _output_after(block), proc.stdout


def test_the_seed_message_is_what_make_says():
    (shown,) = [b for b in _blocks("text") if "has no seed() method" in b]
    with pytest.raises(ValueError) as e:
        make_from_constructor("rl755.testing.old_gym_catch:Catch", {}, name="CATCH")
    assert str(e.value) == " ".join(shown.split())


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_guides_test_and_stage_commands_run(tmp_path):
    """The test command, then the stages one by one, exactly as written."""
    (test_block,) = [b for b in _blocks("bash") if "pytest" in b]
    (command,) = _commands(test_block)
    proc = _run(command, tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(r"\d+ passed", proc.stdout) and "failed" not in proc.stdout, proc.stdout

    (stages_block,) = [b for b in _blocks("bash") if "collect_rollouts.py" in b]
    commands = _commands(stages_block)
    assert len(commands) == 7
    for command in commands:
        proc = _run(command, tmp_path)
        assert proc.returncode == 0, command + "\n" + proc.stderr[-3000:]
    controller = tmp_path / "models" / "catch" / "controller"
    meta = json.loads((controller / "controller.json").read_text())
    assert meta["environment"] == "CATCH" and meta["encoder"].startswith("dir:vae.Vae:4:")
    evaluations = [
        os.path.join(d, f)
        for d, _, files in os.walk(tmp_path)
        for f in files
        if f == "evaluation.json"
    ]
    assert len(evaluations) == 1
    result = json.loads(open(evaluations[0]).read())
    assert len(result["returns"]) == 2 and "random_policy" in result


def test_the_guides_larger_pipeline_commands_are_valid(tmp_path):
    """The demo and world_models commands, checked by a SLURM dry run (sbatch scripts written,
    nothing submitted; the cluster's own limits are left out: no SLURM on PATH)."""
    commands = [
        c for b in _blocks("bash") for c in _commands(b) if c.startswith("python scripts/pipeline")
    ]
    assert [re.search(r"--preset=(\w+)", c).group(1) for c in commands] == [
        "tiny",
        "demo",
        "world_models",
    ]
    no_slurm = os.path.dirname(sys.executable)  # the interpreter's bin, without sbatch
    assert shutil.which("sbatch", path=no_slurm) is None
    for command in commands[1:]:
        out = tmp_path / command.split("--out_dir=")[1].split()[0]
        command = re.sub(r"--out_dir=\S+", f"--out_dir={out}", command)
        if "--launcher=slurm" not in command:
            command += " --launcher=slurm"
        proc = _run(command + " --dry_run", tmp_path, {"PATH": no_slurm})
        assert proc.returncode == 0, command + "\n" + proc.stderr[-3000:]
        scripts = [
            os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f.endswith(".sbatch")
        ]
        assert len(scripts) == 8, scripts
        collect = open([s for s in scripts if "/collect-" in s][0]).read()
        assert "--environment=CATCH" in collect and "--policy=RandomPolicy" in collect
