"""scripts/pipeline.py with a recipe: its names are presets, a bad run directory or step is
refused once, and --until stops the recipe after a step (here and on SLURM)."""

import glob
import json
import os
import subprocess
import sys

from rl755.pipeline.recipe_book import RECIPES, get_recipe

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pipeline(*args, env=None):
    return subprocess.run(
        [sys.executable, "scripts/pipeline.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO, **(env or {})},
    )


def test_until_stops_a_recipe_after_that_step_here_and_on_slurm(tmp_path):
    """--until=STEP runs (or submits) the steps up to STEP; rerunning without it goes on."""
    out = tmp_path / "run"
    proc = _pipeline("--preset=tiny_doom_dream", f"--out_dir={out}", "--until=collect_random")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "recipe_summary.json").read_text())
    names = [s.name for s in get_recipe("tiny_doom_dream").steps]
    assert [r["step"] for r in summary["steps"]] == names
    assert [r["status"] for r in summary["steps"]] == ["ok"] + ["not done"] * (len(names) - 1)
    assert not (out / "models").exists()

    bad = _pipeline("--preset=tiny_doom_dream", f"--out_dir={tmp_path / 'b'}", "--until=nope")
    assert bad.returncode == 2
    assert bad.stderr.count("--until: No step 'nope'; valid: collect_random, ") == 1, bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "b").exists()
    preset = _pipeline("--preset=demo", f"--out_dir={tmp_path / 'c'}", "--until=collect")
    assert preset.returncode == 2 and "--until applies to recipes" in preset.stderr
    assert not (tmp_path / "c").exists()

    # On SLURM (a dry run: no sbatch on PATH): the chain stops there, and the report follows.
    slurm = _pipeline(
        "--preset=tiny_doom_dream",
        f"--out_dir={tmp_path / 's'}",
        "--launcher=slurm",
        "--dry_run",
        "--until=train_encoder",
        env={"PATH": os.path.dirname(sys.executable)},
    )
    assert slurm.returncode == 0, slurm.stderr
    written = sorted(
        os.path.basename(f).split("-")[0]
        for f in glob.glob(str(tmp_path / "s" / "**" / "*.sbatch"), recursive=True)
    )
    assert written == ["collect_random", "report", "train_encoder"]


def test_recipe_names_are_presets_of_the_pipeline_script_and_bad_ones_fail_once(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "recipe.json").write_text(json.dumps({"recipe": "tiny_doom_dream", "seed": 0}))
    proc = _pipeline("--preset=tiny_car_racing_real", f"--out_dir={out}")
    assert proc.returncode == 2
    assert proc.stderr.count("--preset=tiny_doom_dream --seed=0") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "USAGE" not in proc.stderr
    assert sorted(os.listdir(out)) == ["recipe.json"]
    assert "expected wall time, 2 cores" in proc.stdout
    assert set(RECIPES) == {
        "doom_dream",
        "car_racing_real",
        "tiny_doom_dream",
        "tiny_car_racing_real",
    }
