"""The pipeline's and the recipes' runners, with a fake launcher in place of the stage scripts.

The fake writes what a finished stage writes that the runners read (its run record, an
evaluation's evaluation.json), so what the runners decide is checked in well under a second:
the order of the stages, which are skipped or cut, what a failure leaves, and every value of
the summary a user reads (status, wall time, outputs, scores, seed, code version). The whole
runs in tests/test_pipeline.py and tests/test_recipes.py run the real scripts.
"""

import dataclasses
import json
import os
import types

import pytest

from rl755 import pipeline
from rl755.common import run_record
from rl755.common.errors import BadInput
from rl755.pipeline import recipe_runner, report, runners
from rl755.pipeline.recipe_book import get_recipe
from rl755.pipeline.recipes import build_recipe_stages, output_dir
from rl755.pipeline.stages import RUN_FILE
from rl755.slurm import launcher
from rl755.slurm.instances import ArraySpec, expand_instances

TINY = pipeline.PRESETS["tiny"]


class Clock:
    """A stand-in for time.time: each launched stage takes a known number of seconds."""

    def __init__(self):
        self.now = 1_000_000.0

    def time(self):
        return self.now


def write_record(directory, flags, stage, seconds=90.5, commit="c0ffee", status="completed"):
    """A run record as a stage writes it, `seconds` long, made with `commit`."""
    record = run_record.RunRecord(directory, flags, stage)
    record.data.update(
        status=status,
        start_time="2026-01-01T00:00:00.000+00:00",
        end_time=f"2026-01-01T00:{int(seconds) // 60:02d}:{seconds % 60:06.3f}+00:00",
        git={"commit": commit, "dirty": False},
    )
    record.write()


class FakeLauncher:
    """launcher.launch and launcher.check_stage: records what was asked, in order."""

    def __init__(self, monkeypatch, clock=None, fail=None, bad_flags=None, records=False):
        self.events, self.clock, self.fail, self.bad_flags = [], clock, fail, bad_flags
        self.records = records
        monkeypatch.setattr(launcher, "launch", self.launch)
        monkeypatch.setattr(launcher, "check_stage", self.check_stage)

    def check_stage(self, script, flags, python=None):
        self.events.append(("check", os.path.basename(script), dict(flags)))
        if self.bad_flags and self.bad_flags in flags:
            raise ValueError(f"{script} rejects its flags")

    def launch(self, script, flags, local, job_name, python, check):
        assert local is True and check is False
        self.events.append(("launch", job_name))
        launched = sum(e[0] == "launch" for e in self.events)
        if self.clock:
            self.clock.now += 10.0 * launched
        if job_name == self.fail:
            return types.SimpleNamespace(returncode=3)
        if self.records:
            write_record(launcher.default_out_dir(flags), flags, job_name, seconds=10 * launched)
            if job_name.startswith("evaluate"):
                with open(os.path.join(flags["out_dir"], "evaluation.json"), "w") as f:
                    json.dump(
                        {
                            "returns": [1.0, 2.0, 6.0],
                            "seeds": [1000, 1001, 1002],
                            "random_policy": {"returns": [0.0, 1.0]},
                        },
                        f,
                    )
        return types.SimpleNamespace(returncode=0)

    def launched(self):
        return [e[1] for e in self.events if e[0] == "launch"]


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(runners, "time", clock)
    monkeypatch.setattr(report, "time", clock)
    return clock


# ---- run_local -------------------------------------------------------------------------------
def test_run_local_checks_every_stage_then_runs_them_in_order_and_sums_them_up(
    tmp_path, monkeypatch, clock, environ, capsys
):
    out = str(tmp_path / "run")
    stages = pipeline.build_stages(TINY, out, seed=2, deterministic=True)
    names = [s.name for s in stages]
    fake = FakeLauncher(monkeypatch, clock)
    summary = runners.run_local(TINY, out, seed=2, pictures=False, deterministic=True)

    # Every stage's flags are checked before the first stage starts, then each runs once.
    kinds = [e[0] for e in fake.events]
    assert kinds == ["check"] * len(stages) + ["launch"] * len(stages)
    assert [e[2] for e in fake.events[: len(stages)]] == [s.flags for s in stages]
    assert fake.launched() == names
    # The summary a user reads: a row per stage with its wall time, status and output dir.
    assert summary["stages"] == [
        {
            "stage": s.name,
            "seconds": 10.0 * (i + 1),
            "status": "ok",
            "outputs": s.flags.get("out_dir") or s.flags.get("model_dir") or "",
        }
        for i, s in enumerate(stages)
    ]
    assert all(row["outputs"] for row in summary["stages"])
    assert summary["total_seconds"] == 10.0 * sum(range(1, len(stages) + 1))
    assert (summary["seed"], summary["deterministic"], summary["out_dir"]) == (2, True, out)
    with open(os.path.join(out, runners.SUMMARY)) as f:
        assert json.load(f) == json.loads(json.dumps(summary))
    preset, seed = runners.read_run_file(out)
    assert seed == 2
    assert dataclasses.asdict(preset) == json.loads(json.dumps(dataclasses.asdict(TINY)))
    for key, value in pipeline.stage_environ(out).items():
        assert os.environ[key] == value
    printed = capsys.readouterr().out
    for i, name in enumerate(names):
        assert f"=== [{i + 1}/{len(names)}] {name} ===" in printed
    assert f"summary: {os.path.join(out, runners.SUMMARY)}" in printed


def test_run_local_runs_only_the_stages_asked_for(tmp_path, monkeypatch, clock, environ):
    out = str(tmp_path / "run")
    fake = FakeLauncher(monkeypatch, clock)
    summary = runners.run_local(TINY, out, stages=["train_encoder", "evaluate"], pictures=False)
    assert fake.launched() == ["train_encoder", "evaluate"]
    assert [r["stage"] for r in summary["stages"]] == ["train_encoder", "evaluate"]
    assert [r["seconds"] for r in summary["stages"]] == [10.0, 20.0]


def test_run_local_ends_with_the_pictures_row_unless_told_not_to(
    tmp_path, monkeypatch, clock, environ
):
    out = str(tmp_path / "run")

    def pictures(preset, out_dir):  # takes 2.5 s
        clock.now += 2.5
        return ["a.png"]

    monkeypatch.setattr(runners, "collect_pictures", pictures)
    FakeLauncher(monkeypatch, clock)
    rows = runners.run_local(TINY, out, stages=["train_encoder"])["stages"]  # pictures: default
    assert [r["stage"] for r in rows] == ["train_encoder", "pictures"]
    pictures_dir = os.path.join(out, "pictures")
    assert rows[1] == {
        "stage": "pictures", "seconds": 2.5, "status": "ok", "outputs": pictures_dir,
        "files": ["a.png"],
    }  # fmt: skip
    reports = run_record.read_records(os.path.join(out, "runs"))
    assert [(r["stage"], r["status"]) for r in reports] == [("pipeline_report", "completed")]


def test_a_failed_stage_stops_the_run_and_its_summary_says_which(
    tmp_path, monkeypatch, clock, environ, capsys
):
    out = str(tmp_path / "run")
    names = [s.name for s in pipeline.build_stages(TINY, out)]
    failing = names[2]
    fake = FakeLauncher(monkeypatch, clock, fail=failing)
    with pytest.raises(RuntimeError, match=rf"Stage {failing} failed \(exit 3\).*rerun the same"):
        runners.run_local(TINY, out, pictures=False)
    assert fake.launched() == names[:3]
    with open(os.path.join(out, runners.SUMMARY)) as f:
        rows = json.load(f)["stages"]
    assert [(r["stage"], r["status"]) for r in rows] == [
        (names[0], "ok"),
        (names[1], "ok"),
        (failing, "exit 3"),
    ]
    assert f"{failing}" in capsys.readouterr().out


def test_flags_a_stage_rejects_stop_the_run_before_any_stage_starts(
    tmp_path, monkeypatch, clock, environ
):
    out = str(tmp_path / "run")
    fake = FakeLauncher(monkeypatch, clock, bad_flags="cma_generations")
    with pytest.raises(ValueError, match="rejects its flags"):
        runners.run_local(TINY, out, pictures=False)
    assert fake.launched() == []
    assert not os.path.exists(os.path.join(out, RUN_FILE))
    assert not os.path.exists(os.path.join(out, runners.SUMMARY))


# ---- report_from_records (the SLURM chain's last job) ---------------------------------------
def test_the_slurm_report_sums_up_the_stages_from_their_run_records(
    tmp_path, monkeypatch, clock, environ
):
    out = str(tmp_path / "run")
    runners.write_run_file(TINY, out, seed=1)
    stages = pipeline.build_stages(TINY, out, seed=1)
    monkeypatch.setattr(runners, "collect_pictures", lambda preset, out_dir: ["a.png"])
    clock.now = 1767225600.0 + 1000  # 2026-01-01T00:00:00 UTC + 1000 s
    expected = []
    for i, stage in enumerate(stages):
        processes = [
            f for task in expand_instances(stage.flags, stage.array or ArraySpec()) for f in task
        ]
        done = processes if i != 1 else processes[:-1]  # one process of stage 1 is missing
        if i == 1 and len(processes) == 1:
            done = []
        for flags in done:
            write_record(runners.stage_output(stage), flags, stage.name, seconds=20.34)
        status = "ok" if len(done) == len(processes) else f"{len(done)}/{len(processes)} done"
        seconds = round(20.34 * len(done), 1)  # kept to a tenth of a second
        expected.append((stage.name, seconds, status, runners.stage_output(stage)))
    # A record of other flags (another seed) does not count.
    write_record(runners.stage_output(stages[0]), {**stages[0].flags, "seed": 999}, "x", 500)

    summary = runners.report_from_records(out)

    rows = summary["stages"]
    assert [(r["stage"], r["seconds"], r["status"], r["outputs"]) for r in rows[:-1]] == expected
    assert rows[-1]["stage"] == "pictures" and rows[-1]["files"] == ["a.png"]
    assert rows[-1]["status"] == "ok"
    # The run's wall time counts from its first stage's start.
    assert summary["total_seconds"] == 1000.0
    with open(os.path.join(out, runners.SUMMARY)) as f:
        assert json.load(f) == json.loads(json.dumps(summary))
    reports = [
        r
        for r in run_record.read_records(os.path.join(out, "runs"))
        if r["stage"] == "pipeline_report"
    ]
    assert len(reports) == 1 and reports[0]["status"] == "completed"
    assert reports[0]["flags"] == runners.report_flags(out)


# ---- run_recipe ------------------------------------------------------------------------------
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


def test_each_stages_header_is_out_before_the_stage_runs(tmp_path, monkeypatch, environ):
    """run_local's stage headers are flushed before the stage starts (a pipe or a SLURM log
    shows which stage the output below belongs to)."""
    import io
    import sys

    class Stdout(io.StringIO):
        seen = ""

        def flush(self):
            self.seen = self.getvalue()

    stdout, seen_at_launch = Stdout(), []
    fake = FakeLauncher(monkeypatch)
    launch = fake.launch
    monkeypatch.setattr(launcher, "launch", lambda *a, **k: seen_at_launch.append(stdout.seen)
                        or launch(*a, **k))  # fmt: skip
    monkeypatch.setattr(sys, "stdout", stdout)
    out = str(tmp_path / "run")
    names = [s.name for s in pipeline.build_stages(TINY, out, seed=2)]
    runners.run_local(TINY, out, seed=2, pictures=False, stages=names[:2])
    n = len(names)
    assert seen_at_launch == [
        f"\n=== [1/{n}] {names[0]} ===\n",
        f"\n=== [1/{n}] {names[0]} ===\n\n=== [2/{n}] {names[1]} ===\n",
    ]
