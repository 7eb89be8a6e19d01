"""The state of a SLURM chain without a cluster (fake SLURM commands, tests/fake_slurm.py): each
stage's one-word state, the status rows of submissions and run records, one line per chain."""

import json

import pytest
from fake_slurm import FakeSlurm

from rl755.slurm import chain_status, cluster, pending, status
from rl755.slurm.job_state import SlurmJob


@pytest.fixture
def slurm(tmp_path, monkeypatch):
    return FakeSlurm(tmp_path / "bin", monkeypatch)


def test_a_stage_is_cancelled_when_any_of_its_jobs_is():
    assert chain_status.bucket(["CANCELLED"]) == "cancelled"
    assert chain_status.bucket(["COMPLETED", "CANCELLED by 0"]) == "cancelled"
    assert chain_status.bucket(["CANCELLED", "FAILED"]) == "failed"


def test_a_requeued_or_suspended_job_is_pending_with_its_reason():
    jobs = {"7": SlurmJob("7", "s", "REQUEUED", "BeginTime", "")}
    record = {"stages": [{"name": "s", "job_id": "7"}]}
    [state] = chain_status.stage_states(record, jobs)
    assert (state.state, state.detail) == ("pending", "BeginTime")


def test_the_latest_chain_record_of_each_directory_is_read(tmp_path):
    from rl755.slurm import resume

    for d, n in (("a", 1), ("b", 3)):
        for i in range(n):
            path = tmp_path / d / f"{resume.CHAIN_PREFIX}2026010{i}.json"
            path.parent.mkdir(exist_ok=True)
            path.write_text("{}")
    assert chain_status.find_chain_records(str(tmp_path)) == [
        str(tmp_path / "a" / f"{resume.CHAIN_PREFIX}20260100.json"),
        str(tmp_path / "b" / f"{resume.CHAIN_PREFIX}20260102.json"),
    ]


def test_without_slurm_a_stage_is_as_its_processes_latest_records_say(tmp_path):
    """A job SLURM has forgotten: each array task's latest record counts (a requeued task's
    earlier failure does not)."""
    runs = tmp_path / "out" / "runs"
    runs.mkdir(parents=True)

    def record(name, job_id, task, state, start):
        slurm_ids = {"job_id": job_id, "array_job_id": "40", "array_task_id": task}
        data = {"stage": "s", "status": state, "slurm": slurm_ids, "start_time": start}
        (runs / f"{name}.json").write_text(json.dumps(data))

    record("a", "41", "0", "interrupted", "2026-01-01T00:00:00+00:00")
    record("b", "42", "1", "failed", "2026-01-01T00:00:01+00:00")
    record("c", "41", "0", "completed", "2026-01-01T00:00:02")
    entry = {"name": "s", "job_id": "40", "out_dir": str(tmp_path / "out")}
    [state] = chain_status.stage_states({"stages": [entry]}, {})
    assert state.state == "failed"
    record("d", "42", "1", "completed", "2026-01-01T00:00:03")
    [state] = chain_status.stage_states({"stages": [entry]}, {})
    assert state.state == "done"


def test_every_stage_of_a_chain_gets_a_state_after_one_done_before_it():
    jobs = {"8": SlurmJob("8", "t", "RUNNING", "None", "")}
    record = {"stages": [{"name": "s", "action": "done"}, {"name": "t", "job_id": "8"}]}
    states = chain_status.stage_states(record, jobs)
    assert [(s.name, s.state, s.detail) for s in states] == [
        ("s", "done", "done before this submission"),
        ("t", "running", ""),
    ]


def _submission(tmp_path, job_id, folder, submit_time, **extra):
    """`<folder>/slurm/job-<id>.json`, as the launcher writes it; name: the folder's."""
    d = tmp_path / folder / "slurm"
    d.mkdir(parents=True, exist_ok=True)
    data = {"job_id": job_id, "name": folder, "out_dir": str(tmp_path / folder)}
    data.update(submit_time=submit_time, **extra)
    (d / f"job-{job_id}.json").write_text(json.dumps(data))


def test_a_submission_with_its_one_record_is_listed_once(tmp_path, monkeypatch):
    """A submission file without num_tasks is one job; its run record is its row."""
    from rl755.common import run_record

    monkeypatch.setenv("SLURM_JOB_ID", "50")
    with run_record.record_run(str(tmp_path / "a"), {}, "a"):
        pass
    _submission(tmp_path, "50", "a", "2026-01-01T00:00:00+00:00")
    _submission(tmp_path, "51", "b", "2026-01-01T00:00:01+00:00")
    monkeypatch.setattr(status, "query_slurm", lambda ids: {})
    rows = status.collect_status(str(tmp_path))
    assert sorted((r.stage, r.job, r.state_source) for r in rows) == [
        ("a", "50", "record"),
        ("b", "51", "submission"),
    ]


def test_a_job_pending_again_after_its_run_shows_both(tmp_path, monkeypatch):
    from rl755.common import run_record

    monkeypatch.setenv("SLURM_JOB_ID", "60")
    with run_record.record_run(str(tmp_path / "a"), {}, "a"):
        pass
    job = SlurmJob("60", "a", "PENDING", "BeginTime", "")
    monkeypatch.setattr(status, "query_slurm", lambda ids: {"60": job})
    [row] = status.collect_status(str(tmp_path))
    assert (row.state, row.state_source) == ("PENDING (record: completed)", "slurm")


def test_submissions_after_those_passed_over_are_listed_and_a_stuck_one_says_so(
    tmp_path, monkeypatch
):
    """Passed over: a submission with its record, a finished array with a record, one
    submitted again since; the submissions after them are listed, and a pending job that
    never starts says so in its row and under the table."""
    from rl755.common import run_record

    for job in ("70", "71"):
        monkeypatch.setenv("SLURM_JOB_ID", job)
        with run_record.record_run(str(tmp_path / "x"), {}, f"s{job}"):
            pass
    _submission(tmp_path, "70", "x", "2026-01-01T00:00:00+00:00", name="a")
    _submission(tmp_path, "71", "x", "2026-01-01T00:00:01+00:00", name="b", num_tasks=2)
    _submission(tmp_path, "72", "x", "2026-01-01T00:00:02+00:00", name="c")
    _submission(tmp_path, "73", "x", "2026-01-01T00:00:03+00:00", name="c")
    stuck = SlurmJob("73", "c", "PENDING", "PartitionTimeLimit", "")
    done = SlurmJob("71", "b", "COMPLETED", "None", "0:0")
    monkeypatch.setattr(status, "query_slurm", lambda ids: {"71": done, "73": stuck})
    monkeypatch.setattr(cluster, "read_cluster", lambda fresh=False: None)
    rows = status.collect_status(str(tmp_path))
    assert sorted((r.stage, r.job, r.state) for r in rows) == [
        ("c", "73", "PENDING (PartitionTimeLimit) NEVER STARTS"),
        ("s70", "70", "completed"),
        ("s71", "71", "COMPLETED"),
    ]
    c = next(r for r in rows if r.stage == "c")
    assert c.out_dir == str(tmp_path / "x")
    table = status.format_table(rows, str(tmp_path)).splitlines()
    assert table[1].split()[:3] == ["c", "PENDING", "(PartitionTimeLimit)"]
    assert table[1].split()[5:7] == ["73", "-"]  # job, no host yet
    assert c.never_starts == pending.never_starts(stuck)
    assert c.never_starts.startswith("pending (PartitionTimeLimit) and will never start")
    assert f"! c 73: {c.never_starts}" in status.format_table(rows)


def test_each_chain_is_one_line_named_by_its_label_and_where_it_lies(tmp_path):
    from rl755.slurm import resume

    done = {"name": "s", "action": "done"}
    resume.write_chain_record(str(tmp_path / "slurm"), [done], label="pipeline")
    resume.write_chain_record(
        str(tmp_path / "runs" / "b" / "slurm"), [done, done], label="recipe x"
    )
    assert sorted(chain_status.chain_lines(str(tmp_path))) == [
        "pipeline: all 1 stages done, 0 failed",
        "recipe x runs/b: all 2 stages done, 0 failed",
    ]


def test_the_cluster_is_read_once_unless_asked_afresh(slurm, monkeypatch):
    cluster.read_cluster(fresh=True)
    cluster.read_cluster()
    assert len(slurm.calls("scontrol")) == 2  # partitions and nodes, once
    cluster.read_cluster(fresh=True)
    assert len(slurm.calls("scontrol")) == 4
    cluster.read_cluster(fresh=True)  # (a later test gets no stale cluster)
    cluster._read_cluster_cached.cache_clear()
