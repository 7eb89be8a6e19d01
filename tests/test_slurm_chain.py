"""submit_chain without a cluster (sbatch replaced): all or nothing, and what a rerun skips."""

import glob
import json
import os

import pytest

from rl755.common import run_record
from rl755.slurm import chain, job_state, launcher, resume, sbatch
from rl755.slurm.sbatch import Resources

TOY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toy_stage.py")
SMALL = Resources(cpus=1, mem="300M", time="10")


@pytest.fixture
def fake_sbatch(monkeypatch):
    """sbatch that accepts `ok` submissions then fails; scancel recorded; no cluster checks."""
    calls = {"submitted": [], "cancelled": [], "ok": 99}

    def submit(path):
        if len(calls["submitted"]) >= calls["ok"]:
            raise sbatch.SlurmError(f"sbatch {path} failed: Batch job submission failed")
        job = str(100 + len(calls["submitted"]))
        calls["submitted"].append(job)
        return job

    def cancel(ids):
        calls["cancelled"] += list(ids)

    monkeypatch.setattr(sbatch, "submit", submit)
    monkeypatch.setattr(sbatch, "cancel", cancel)
    monkeypatch.setattr(sbatch, "have_slurm", lambda: False)
    monkeypatch.setattr(job_state, "query_slurm", lambda ids: {})
    return calls


def _stages(tmp_path, n=4):
    return [
        chain.Stage(f"s{i}", TOY, {"out_dir": str(tmp_path / f"o{i}"), "n": i + 1}, SMALL)
        for i in range(n)
    ]


def test_failed_submission_midway_cancels_the_chain(tmp_path, fake_sbatch):
    fake_sbatch["ok"] = 2
    with pytest.raises(sbatch.SlurmError) as info:
        chain.submit_chain(_stages(tmp_path), check=False, record_dir=str(tmp_path / "rec"))
    text = str(info.value)
    assert text.startswith("Submitting stage s2 failed: sbatch")
    assert "Cancelled the 2 jobs already submitted for this chain (s0 (100), s1 (101))" in text
    assert "nothing of it is left in the queue" in text
    assert fake_sbatch["cancelled"] == ["100", "101"]
    # status will not list the cancelled submissions, and no chain record claims them
    assert not glob.glob(str(tmp_path / "o*" / "slurm" / "job-*.json"))
    assert not os.path.exists(tmp_path / "rec")


def test_interrupted_submission_cancels_the_chain_too(tmp_path, fake_sbatch, monkeypatch, capsys):
    real = sbatch.submit

    def interrupted(path):
        if len(fake_sbatch["submitted"]) == 1:
            raise KeyboardInterrupt
        return real(path)

    monkeypatch.setattr(sbatch, "submit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        chain.submit_chain(_stages(tmp_path), check=False)
    assert fake_sbatch["cancelled"] == ["100"]
    assert "Cancelled the 1 job already submitted" in capsys.readouterr().err


def test_first_submission_failing_cancels_nothing(tmp_path, fake_sbatch):
    fake_sbatch["ok"] = 0
    with pytest.raises(sbatch.SlurmError, match="Nothing of this chain was submitted"):
        chain.submit_chain(_stages(tmp_path), check=False)
    assert fake_sbatch["cancelled"] == []


def _complete(stage, **changes):
    """A completed run record of `stage`, as its script would write it."""
    out_dir = launcher.default_out_dir(stage.flags)
    flags = {**stage.flags, "sleep": 0.0, "fail": False, **changes}
    with run_record.record_run(out_dir, flags, stage="toy"):
        pass


def test_rerun_submits_only_what_is_not_done(tmp_path, fake_sbatch):
    stages = _stages(tmp_path)
    rec = str(tmp_path / "rec")
    first = chain.submit_chain(stages, check=False, skip_done=True, record_dir=rec)
    assert [r.job_id for r in first] == ["100", "101", "102", "103"]
    (path,) = resume.chain_records(rec)
    record = json.load(open(path))
    assert [(e["name"], e["job_id"], e["after"]) for e in record["stages"]] == [
        ("s0", "100", []),
        ("s1", "101", ["s0"]),
        ("s2", "102", ["s1"]),
        ("s3", "103", ["s2"]),
    ]
    # s0 and s1 completed (their records match the flags); s2 completed with another --n
    _complete(stages[0])
    _complete(stages[1], n=2.0)  # the record holds the parsed value: 2.0 == 2
    _complete(stages[2], n=99)
    plans = chain.plan_chain(stages, record_dir=rec)
    assert [p.action for p in plans] == ["done", "done", "submit", "submit"]
    second = chain.submit_chain(stages, check=False, skip_done=True, record_dir=rec)
    assert [r.job_id for r in second] == [None, None, "104", "105"]
    assert "completed already" in second[0].summary()
    assert "afterok" not in open(second[2].sbatch_script).read()  # s1 is done: no dependency
    assert "--dependency=afterok:104" in open(second[3].sbatch_script).read()
    # a stage after one that must run again runs again, even if its own records say done
    _complete(stages[3])
    assert [p.action for p in chain.plan_chain(stages, record_dir=rec)][2:] == ["submit"] * 2
    # a failed record is not done
    with pytest.raises(RuntimeError):
        with run_record.record_run(str(tmp_path / "o2"), {**stages[2].flags}, stage="toy"):
            raise RuntimeError("boom")
    assert chain.plan_chain(stages, record_dir=rec)[2].action == "submit"


def test_rerun_reuses_queued_jobs_and_refuses_to_duplicate_changed_ones(
    tmp_path, fake_sbatch, monkeypatch
):
    stages = _stages(tmp_path, n=2)
    rec = str(tmp_path / "rec")
    chain.submit_chain(stages, check=False, skip_done=True, record_dir=rec)
    queued = {
        "100": job_state.SlurmJob("100", "s0", "RUNNING", "None", "0:0"),
        "101": job_state.SlurmJob("101", "s1", "PENDING", "Dependency", "0:0"),
    }
    monkeypatch.setattr(job_state, "query_slurm", lambda ids: queued)
    again = chain.submit_chain(stages, check=False, skip_done=True, record_dir=rec)
    assert [(r.job_id, r.note) for r in again] == [
        ("100", "still queued from the last submission")
    ] + [("101", "still queued from the last submission")]
    assert fake_sbatch["submitted"] == ["100", "101"]
    # the same stage with other resources while its old job is still queued: say so
    changed = [stages[0], chain.Stage("s1", TOY, stages[1].flags, Resources(cpus=2, mem="1G"))]
    with pytest.raises(ValueError, match=r"s1's job 101 .* is still PENDING.*scancel 101"):
        chain.submit_chain(changed, check=False, skip_done=True, record_dir=rec)


def test_same_value_spelling():
    assert resume.same_value(3, "3") and resume.same_value(1e-3, 0.001)
    assert resume.same_value(True, True) and resume.same_value("true", True)
    assert resume.same_value([1, 2], [1, 2]) and not resume.same_value(False, True)
    assert not resume.same_value("a", "b") and not resume.same_value(3, "3.5")


def test_rerun_after_a_still_queued_stage_waits_for_its_job(tmp_path, fake_sbatch, monkeypatch):
    """s0's job is still pending from the last submission and s1 changed (another --n): the
    rerun keeps s0's job and submits s1 after it, else s1 starts before its input exists."""
    stages = _stages(tmp_path, n=2)
    rec = str(tmp_path / "rec")
    chain.submit_chain(stages, check=False, skip_done=True, record_dir=rec)
    pending = {"100": job_state.SlurmJob("100", "s0", "PENDING", "Priority", "0:0")}
    monkeypatch.setattr(job_state, "query_slurm", lambda ids: pending)  # s1's job is gone
    changed = [stages[0], chain.Stage("s1", TOY, {**stages[1].flags, "n": 7}, SMALL)]
    again = chain.submit_chain(changed, check=False, skip_done=True, record_dir=rec)
    assert [(r.job_id, r.note) for r in again] == [
        ("100", "still queued from the last submission"),
        ("102", None),
    ]
    assert "--dependency=afterok:100" in open(again[1].sbatch_script).read()
    record = json.load(open(resume.chain_records(rec)[-1]))
    assert [(e["name"], e["job_id"], e["action"]) for e in record["stages"]] == [
        ("s0", "100", "queued"),
        ("s1", "102", "submit"),
    ]
