"""The pipeline's runner, with a fake launcher in place of the stage scripts (the recipes'
runner: tests/test_recipe_runner.py).

The fake writes what a finished stage writes that the runners read (its run record, an
evaluation's evaluation.json), so what the runners decide is checked in well under a second:
the order of the stages, which are skipped or cut, what a failure leaves, and every value of
the summary a user reads (status, wall time, outputs, scores, seed, code version). The whole
runs in tests/test_pipeline.py and tests/test_recipes.py run the real scripts.
"""

import dataclasses
import json
import os

import pytest
from pipeline_fakes import Clock, FakeLauncher, write_record

from rl755 import pipeline
from rl755.common import run_record
from rl755.pipeline import report, runners
from rl755.pipeline.stages import RUN_FILE
from rl755.slurm import launcher
from rl755.slurm.instances import ArraySpec, expand_instances

TINY = pipeline.PRESETS["tiny"]


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


# ---- output ---------------------------------------------------------------------------------
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
