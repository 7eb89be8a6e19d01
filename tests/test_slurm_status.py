"""rl755.slurm.status (and job_state) without SLURM: records, submissions, TensorBoard
scalars (rl755.common.tensorboard), table."""

import json
import os
import socket

import tensorflow as tf

from rl755.common import run_record, tensorboard
from rl755.slurm import job_state, status


def _write_scalars(logdir, values, v1=False):
    if v1:  # TF1-style simple_value summaries
        with tf.compat.v1.Graph().as_default():
            writer = tf.compat.v1.summary.FileWriter(logdir)
            for step, v in enumerate(values):
                summ = tf.compat.v1.Summary(
                    value=[tf.compat.v1.Summary.Value(tag="reward", simple_value=v)]
                )
                writer.add_summary(summ, step)
            writer.close()
        return
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        for step, v in enumerate(values):
            tf.summary.scalar("loss", v, step=step)
            tf.summary.text("note", "not a scalar", step=step)
    writer.close()


def test_rows_from_records_with_latest_metrics_and_tensorboard_dirs(tmp_path):
    model_dir = tmp_path / "exp" / "vae"
    with run_record.record_run(str(model_dir), {"lr": 1e-3}, "train_vae"):
        _write_scalars(str(model_dir / "train"), [3.0, 2.0, 0.5])
        _write_scalars(str(model_dir / "eval"), [9.0, 1.5], v1=True)
    with_failure = tmp_path / "exp" / "ctrl"
    try:
        with run_record.record_run(str(with_failure), {}, "controller"):
            raise RuntimeError("diverged")
    except RuntimeError:
        pass
    rows = status.collect_status(str(tmp_path))
    assert [r.stage for r in rows] == ["train_vae", "controller"]
    vae, ctrl = rows
    assert (vae.state, vae.state_source, vae.job) == ("completed", "record", "")
    assert vae.metrics == {"train/loss": (2, 0.5), "eval/reward": (1, 1.5)}
    assert vae.tensorboard_dirs == [str(model_dir / "eval"), str(model_dir / "train")]
    assert ctrl.state == "failed" and ctrl.error == "RuntimeError: diverged"
    table = status.format_table(rows, str(tmp_path))
    header, first, second = table.splitlines()[:3]
    assert header.split() == [
        "STAGE", "STATE", "JOB", "HOST", "STARTED", "ELAPSED", "OUT_DIR", "METRICS", "TB",
    ]  # fmt: skip
    assert "train/loss=0.5@2" in first and "exp/vae/eval,exp/vae/train" in first
    assert "! controller" in table and "diverged" in table
    assert "tensorboard --logdir " + str(model_dir) in table
    assert "train/loss" not in status.format_table(rows, str(tmp_path), metrics="reward")
    assert json.loads(status.to_json(rows))[0]["metrics"]["train/loss"] == [2, 0.5]


def test_running_record_of_dead_local_process_is_lost(tmp_path):
    rec = run_record.RunRecord(str(tmp_path), {}, "collect")
    rec.data.update(pid=2**22 + 12345, host=socket.gethostname())  # no such process
    rec.write()
    alive = run_record.RunRecord(str(tmp_path / "b"), {}, "collect")
    alive.write()  # this process: still running
    states = sorted(r.state for r in status.collect_status(str(tmp_path)))
    assert states == [status.LOST, "running"]


def test_submission_without_record_and_unknown_job(tmp_path):
    slurm_dir = tmp_path / "out" / "slurm"
    os.makedirs(slurm_dir)
    (slurm_dir / "job-999999.json").write_text(
        json.dumps({"job_id": "999999", "name": "encode", "num_tasks": 1, "out_dir": None})
    )
    (row,) = status.collect_status(str(tmp_path))
    assert row.stage == "encode" and row.job == "999999"
    assert row.state.startswith("unknown") and row.state_source == "submission"


def test_submissions_superseded_by_a_rerun_are_not_listed(tmp_path):
    slurm_dir = tmp_path / "out" / "slurm"
    os.makedirs(slurm_dir)
    for job, when in (("999997", "2026-01-01T00:00:00"), ("999998", "2026-01-01T01:00:00")):
        (slurm_dir / f"job-{job}.json").write_text(
            json.dumps({"job_id": job, "name": "encode", "submit_time": when, "out_dir": "/o"})
        )
    (row,) = status.collect_status(str(tmp_path))  # the rerun's; the first one was cancelled
    assert row.job == "999998" and row.state.startswith("unknown")


def test_parse_scontrol_array_tasks():
    text = (
        "JobId=12 ArrayJobId=10 ArrayTaskId=2 JobName=collect JobState=RUNNING Reason=None "
        "ExitCode=0:0 Command=/x y\n"
        "JobId=13 JobName=train JobState=PENDING Reason=Dependency ExitCode=0:0\n"
    )
    a, b = job_state.parse_scontrol(text)
    assert (a.job_id, a.array_job_id, a.array_task_id, a.state) == ("12", "10", "2", "RUNNING")
    assert (b.job_id, b.array_job_id, b.state, b.reason) == ("13", None, "PENDING", "Dependency")


def test_truncated_event_file_is_read_up_to_the_tail(tmp_path):
    _write_scalars(str(tmp_path), [1.0, 2.0], v1=True)  # the last record: step 1's scalar
    (path,) = [os.path.join(tmp_path, f) for f in os.listdir(tmp_path)]
    data = open(path, "rb").read()
    assert tensorboard.last_scalars(path) == {"reward": (1, 2.0)}
    with open(path, "wb") as f:
        f.write(data[:-7])  # a writer still busy with its last record
    assert tensorboard.last_scalars(path) == {"reward": (0, 1.0)}


def test_requeued_job_slurm_state_applies_to_its_latest_run_only(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    first = run_record.RunRecord(str(tmp_path), {}, "collect")
    first.data.update(status="interrupted", start_time="2026-01-01T00:00:00+00:00")
    first.write()
    second = run_record.RunRecord(str(tmp_path), {}, "collect")
    second.data.update(status="completed", start_time="2026-01-01T00:05:00+00:00")
    second.path = second.path.replace(".json", "-b.json")
    second.write()
    job = job_state.SlurmJob("77", "collect", "COMPLETED", "None", "0:0")
    monkeypatch.setattr(status, "query_slurm", lambda ids: {"77": job})
    rows = status.collect_status(str(tmp_path), with_metrics=False)
    assert [(r.state, r.state_source) for r in rows] == [
        ("interrupted", "record"),
        ("COMPLETED", "slurm"),
    ]


def test_query_slurm_falls_back_to_sacct_for_forgotten_jobs(monkeypatch):
    calls = []

    def fake_run(argv):
        calls.append(argv[0])
        if argv[0] == "scontrol":
            return "JobId=5 JobName=a JobState=RUNNING Reason=None ExitCode=0:0\n"
        return "7|7|train|CANCELLED by 0|0:15\n8|3_1|collect|COMPLETED|0:0\n"

    monkeypatch.setattr(job_state, "command_output", fake_run)
    jobs = job_state.query_slurm(["5", "7", "8"])
    assert calls == ["scontrol", "sacct"]
    assert jobs["5"].state == "RUNNING" and jobs["5"].source == "scontrol"
    assert (jobs["7"].state, jobs["7"].source) == ("CANCELLED", "sacct")
    assert jobs["8"].state == jobs["3_1"].state == "COMPLETED"
    # without accounting sacct prints nothing: the ids stay unknown
    monkeypatch.setattr(
        job_state, "command_output", lambda argv: "" if argv[0] == "scontrol" else None
    )
    assert job_state.query_slurm(["9"]) == {}
