"""The recipe runner with a fake launcher (tests/pipeline_fakes.py): each step once, reruns
skip finished steps, --until, failures, the summary's values and code version, and headers
printed before each step (the real scripts: tests/test_recipes.py, tests/test_recipe_script.py)."""

import json
import os

import pytest
from pipeline_fakes import FakeLauncher

from rl755.common import run_record
from rl755.common.errors import BadInput
from rl755.pipeline import recipe_runner
from rl755.pipeline.recipe_book import get_recipe
from rl755.pipeline.recipes import build_recipe_stages, output_dir
from rl755.slurm import launcher

RECIPE = "tiny_doom_dream"


def _recipe_stages(out, seed=0):
    recipe = get_recipe(RECIPE)
    return recipe, build_recipe_stages(recipe, out, seed=seed)


def test_a_recipe_runs_each_step_once_and_a_rerun_skips_every_finished_step(
    tmp_path, monkeypatch, environ, capsys
):
    out = str(tmp_path / "run")
    recipe, stages = _recipe_stages(out, seed=5)
    names = [s.name for s in stages]
    fake = FakeLauncher(monkeypatch, records=True)
    summary = recipe_runner.run_recipe(RECIPE, out, seed=5)

    assert [e[1] for e in fake.events if e[0] == "check"] == [
        os.path.basename(s.script) for s in stages
    ]
    assert fake.launched() == names
    recorded = recipe_runner.read_recipe_file(out)
    assert (recorded["recipe"], recorded["seed"], recorded["deterministic"]) == (RECIPE, 5, None)
    assert recorded["code"] == run_record.git_info() == summary["code"]
    assert (summary["recipe"], summary["seed"], summary["out_dir"]) == (RECIPE, 5, out)
    assert [(r["step"], r["status"], r["seconds"], r["code"]) for r in summary["steps"]] == [
        (name, "ok", 10.0 * (i + 1), "c0ffee") for i, name in enumerate(names)
    ]
    assert summary["total_seconds"] == 10.0 * sum(range(1, len(names) + 1))
    assert [r["outputs"] for r in summary["steps"]] == [
        output_dir(recipe, step, out) for step in recipe.steps
    ]
    evaluations = [s.name for s in recipe.steps if s.stage == "evaluate"]
    assert evaluations and sorted(summary["scores"]) == sorted(evaluations)
    for scores in summary["scores"].values():
        assert scores == {
            "episodes": 3,
            "seeds": [1000, 1001, 1002],
            "mean": 3.0,
            "std": pytest.approx(2.160246899),
            "median": 2.0,
            "random_policy": {"mean": 0.5, "std": 0.5, "median": 0.5},
        }
    with open(os.path.join(out, recipe_runner.SUMMARY)) as f:
        assert json.load(f) == summary
    printed = capsys.readouterr().out
    assert f"{evaluations[0]}: 3.0 ± 2.2 (median 2.0) over 3 episodes; random policy" in printed
    assert f"recipe {RECIPE} (--seed=5), code " in printed

    # Rerun: every step is done already; nothing is checked or started again.
    fake.events.clear()
    again = recipe_runner.run_recipe(RECIPE, out, seed=5)
    assert fake.events == []
    assert again == summary
    printed = capsys.readouterr().out
    assert printed.count("done already") == len(names)


def test_a_deterministic_recipes_summary_finds_its_steps(tmp_path, monkeypatch, environ):
    """The summary rebuilds the steps as the run ran them (--deterministic is in their flags)."""
    out = str(tmp_path / "run")
    _, stages = _recipe_stages(out)
    fake = FakeLauncher(monkeypatch, records=True)
    summary = recipe_runner.run_recipe(RECIPE, out, deterministic=True)
    checked = [e[2] for e in fake.events if e[0] == "check"]
    assert len(checked) == len(stages) and all(f["deterministic"] is True for f in checked)
    assert [r["status"] for r in summary["steps"]] == ["ok"] * len(stages)
    assert recipe_runner.write_summary(out)["steps"] == summary["steps"]


def test_until_stops_a_recipe_after_that_step(tmp_path, monkeypatch, environ):
    out = str(tmp_path / "run")
    recipe, stages = _recipe_stages(out)
    names = [s.name for s in stages]
    fake = FakeLauncher(monkeypatch, records=True)
    summary = recipe_runner.run_recipe(RECIPE, out, until=names[1])
    assert fake.launched() == names[:2]
    assert summary["seed"] == recipe_runner.read_recipe_file(out)["seed"] == 0  # the default
    assert [r["status"] for r in summary["steps"]] == ["ok", "ok"] + ["not done"] * (len(names) - 2)
    assert summary["scores"] == {}
    with pytest.raises(ValueError, match="No step 'nope'"):
        recipe_runner.run_recipe(RECIPE, out, until="nope")


def test_a_failed_step_stops_the_recipe_and_the_summary_keeps_what_was_done(
    tmp_path, monkeypatch, environ, capsys
):
    out = str(tmp_path / "run")
    _, stages = _recipe_stages(out)
    names = [s.name for s in stages]
    fake = FakeLauncher(monkeypatch, records=True, fail=names[2])
    with pytest.raises(RuntimeError, match=rf"Step {names[2]} failed \(exit 3\).*rerun the same"):
        recipe_runner.run_recipe(RECIPE, out)
    assert fake.launched() == names[:3]
    with open(os.path.join(out, recipe_runner.SUMMARY)) as f:
        steps = json.load(f)["steps"]
    assert [r["status"] for r in steps] == ["ok", "ok"] + ["not done"] * (len(names) - 2)
    assert [r["seconds"] for r in steps[2:]] == [0.0] * (len(names) - 2)
    with open(os.path.join(out, recipe_runner.SUMMARY)) as f:  # printed before the error
        assert recipe_runner.format_summary(json.load(f)) in capsys.readouterr().out
    # The rerun starts at the failed step; the finished ones are not started again.
    fake.fail, fake.events[:] = None, []
    recipe_runner.run_recipe(RECIPE, out)
    assert fake.launched() == names[2:]


def test_a_recipe_summary_needs_a_recipe_run_and_names_the_code_version():
    with pytest.raises(BadInput, match="holds no recipe run"):
        recipe_runner.write_summary("/nonexistent/dir")
    summary = {
        "recipe": "r",
        "seed": 1,
        "out_dir": "/x",
        "steps": [{"step": "collect", "seconds": 5.25, "status": "ok", "outputs": "/x/data"}],
        "total_seconds": 5.25,
        "scores": {"evaluate": None},
    }
    text = recipe_runner.format_summary({**summary, "code": {"commit": "0123456789abcdef"}})
    assert "collect       5.2 s  ok        data" in text
    assert "total         5.2 s" in text
    assert "recipe r (--seed=1), code 0123456789ab\n" in text
    text = recipe_runner.format_summary(
        {**summary, "code": {"commit": "0123456789abcdef", "dirty": True}}
    )
    assert "code 0123456789ab (uncommitted changes)" in text
    assert "code unknown" in recipe_runner.format_summary({**summary, "code": None})
    # The whole text as printed: a blank line before the table (it follows the last step's
    # output), the long step name sets the column, and each score line.
    scores = {"mean": 824.5, "std": 459.6, "median": 811.0, "episodes": 100}
    long = dict(summary["steps"][0], step="train_controller_long", outputs="/x/models/c")
    text = recipe_runner.format_summary(
        {
            **summary,
            "steps": [summary["steps"][0], long],
            "code": {"commit": "0123456789abcdef"},
            "scores": {
                "evaluate": {**scores, "random_policy": {"mean": 213.2, "std": 94.4}},
                "evaluate_fresh": scores,
                "skipped": None,
            },
        }
    )
    assert text == "\n".join(
        [
            "",
            "step                    wall time  status    outputs",
            "collect                     5.2 s  ok        data",
            "train_controller_long       5.2 s  ok        models/c",
            "total                       5.2 s",
            "evaluate: 824.5 ± 459.6 (median 811.0) over 100 episodes; random policy on the "
            "same seeds 213.2 ± 94.4",
            "evaluate_fresh: 824.5 ± 459.6 (median 811.0) over 100 episodes",
            "recipe r (--seed=1), code 0123456789ab",
            "summary: /x/recipe_summary.json",
        ]
    )


def test_a_recipe_is_not_started_where_another_run_lives(tmp_path, monkeypatch, environ):
    out = tmp_path / "run"
    out.mkdir()
    (out / "recipe.json").write_text(json.dumps({"recipe": "tiny_car_racing_real", "seed": 2}))
    fake = FakeLauncher(monkeypatch)
    with pytest.raises(BadInput) as info:
        recipe_runner.run_recipe(RECIPE, str(out))
    assert str(info.value) == (
        f"--out_dir {out} holds a run of --preset=tiny_car_racing_real --seed=2 (recipe.json); "
        "rerun that command to resume it, or pass another --out_dir."
    )
    (out / "recipe.json").unlink()
    (out / "pipeline.json").write_text("{}")
    with pytest.raises(BadInput, match="holds a run of a pipeline preset"):
        recipe_runner.run_recipe(RECIPE, str(out))
    assert fake.events == []


def test_each_steps_header_is_out_before_the_next_step_runs(tmp_path, monkeypatch, environ):
    """A SLURM log or a pipe shows which steps were skipped and which one runs before that
    step's own output (each header is flushed, not left in Python's buffer)."""
    import io
    import sys

    class Stdout(io.StringIO):  # what a reader of the pipe has seen: the flushed text
        seen = ""

        def flush(self):
            self.seen = self.getvalue()

    out = str(tmp_path / "run")
    _, stages = _recipe_stages(out)
    FakeLauncher(monkeypatch, records=True)
    recipe_runner.run_recipe(RECIPE, out, until=stages[0].name)
    stdout, seen_at_launch = Stdout(), []
    fake = FakeLauncher(monkeypatch, records=True)
    launch = fake.launch
    monkeypatch.setattr(launcher, "launch", lambda *a, **k: seen_at_launch.append(stdout.seen)
                        or launch(*a, **k))  # fmt: skip
    monkeypatch.setattr(sys, "stdout", stdout)
    recipe_runner.run_recipe(RECIPE, out, until=stages[1].name)
    n = len(get_recipe(RECIPE).steps)
    assert seen_at_launch == [
        f"\n=== [1/{n}] {stages[0].name} === done already (its run records match these flags)\n"
        f"\n=== [2/{n}] {stages[1].name} ===\n"
    ]
