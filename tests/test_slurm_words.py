"""What the SLURM layer says back: a job's parsed name, a launch's summary, the partition a
never-starting job is measured against, and list flags compared with a run's record."""

from test_slurm_cluster import NODES, PARTITIONS

from rl755.slurm import chain_status, cluster, job_state, launcher, pending, resume, sbatch


def test_a_jobs_name_is_its_jobname_field():
    (job,) = job_state.parse_scontrol("JobId=3 JobName=train_vae JobState=RUNNING ExitCode=0:0\n")
    assert job.name == "train_vae"
    (job,) = job_state.parse_scontrol("JobId=4 JobState=RUNNING ExitCode=0:0\n")
    assert job.name == ""


def _launched(tasks):
    commands = [[["python", "x.py", f"--task={i}"]] for i in range(tasks)]
    return launcher.LaunchResult("collect", commands, "/o", "/logs", job_id="42",
                                 sbatch_script="/logs/collect.sbatch")  # fmt: skip


def test_a_launch_summary_says_job_or_array_of_its_tasks():
    assert _launched(1).summary().splitlines()[0] == "Submitted collect: job 42"
    assert _launched(2).summary().splitlines()[0] == "Submitted collect: array of 2 tasks 42"
    assert "logs-42_%a.out" in _launched(2).summary()
    assert "logs-42.out" in _launched(1).summary()


def test_a_job_too_big_for_its_own_partition_is_told_what_that_partition_offers():
    fake = cluster.parse_cluster(PARTITIONS, NODES)
    job = job_state.SlurmJob(job_id="9", name="t", state="PENDING", reason="Resources",
                             exit_code="0:0", partition="gpu", num_cpus=4, min_memory="900G",
                             gpus=1, num_nodes=1)  # fmt: skip
    text = pending.never_starts(job, fake)
    offers = text.split("the partition offers: ")[1]
    assert offers.startswith("gpu") and not offers.startswith("cpu"), text


def test_list_flags_compare_with_their_recorded_spelling():
    assert resume.same_value([1, 2], "1,2") and resume.same_value(("a", True), "a,true")
    assert not resume.same_value([1, 2], "1,3")
    assert not resume.same_value([1, 2], "None,None")


def test_a_too_big_request_is_said_as_what_it_asks_for():
    fake = cluster.parse_cluster(PARTITIONS, NODES)
    text = fake.problem(cluster.Resources(partition="cpu", cpus=4, mem="900G"))
    assert text.startswith("asks for 900G memory"), text
    # beyond the partition's per-node limits (gpu: 16 CPUs, 64G per node)
    text = fake.problem(cluster.Resources(partition="gpu", cpus=20, mem="80G", gpus=1))
    assert text.startswith("asks for 20 CPUs per node; ") and " and 80G memory per node" in text


def test_a_launch_not_submitted_says_why_and_its_outputs_only_when_it_has_them():
    kept = launcher.LaunchResult("train", [[["x"]]], None, "/logs", job_id="5", note="still queued")
    assert kept.summary() == "Not submitted train (job 5): still queued"
    done = launcher.LaunchResult("train", [[["x"]]], "/o", "/logs", note="done already")
    assert done.summary() == "Not submitted train: done already\n  outputs:       /o"


def test_concurrent_instances_in_one_task_are_stopped_together():
    """Several commands of one task run in the background; a TERM or INT to the task's shell
    (scancel, a preemption) is passed on to every one of them."""
    text = sbatch.render_sbatch_script(
        [[["python", "a.py"], ["python", "b.py"]]],
        job_name="encode",
        resources=cluster.Resources(cpus=2),
        log_dir="/logs",
    )
    assert "trap 'kill -TERM \"${pids[@]}\" 2>/dev/null' TERM INT" in text


def test_a_stage_done_before_the_submission_says_so():
    record = {"stages": [{"name": "collect", "action": "done"}]}
    (state,) = chain_status.stage_states(record, slurm={})
    assert state == chain_status.StageState("collect", None, "done", "done before this submission")


def test_a_local_launch_summary_gives_the_exit_code():
    result = launcher.LaunchResult("collect", [[["true"]]], None, "/logs", returncode=3)
    assert result.summary() == "Ran collect locally: exit code 3"


def test_a_never_starting_job_is_told_as_one_sentence():
    job = job_state.SlurmJob("5", "j", "PENDING", "InvalidAccount", "")
    assert pending.never_starts(job, cluster.parse_cluster("", "")) == (
        "pending (InvalidAccount) and will never start: its account is not valid here. "
        "Change: cancel it (scancel 5) and submit again with another --account."
    )


def test_booleans_compare_with_their_recorded_spelling():
    for asked, recorded in ((False, "false"), (False, "False"), (True, "true"), (False, False)):
        assert resume.same_value(asked, recorded), (asked, recorded)
    assert not resume.same_value(False, "true") and not resume.same_value(True, False)


def test_flag_names_and_values_as_written():
    from rl755.slurm import instances

    assert instances.flags_to_argv({"Num_Rollouts": 3, "x.y-z": 1}) == [
        "--Num_Rollouts=3",
        "--x.y-z=1",
    ]
    assert instances.parse_flag_args(["--policy_kwargs=a=1,b=2"]) == {"policy_kwargs": "a=1,b=2"}
    try:
        instances.expand_instances({"n": "many"}, instances.ArraySpec(num_tasks=2, split=("n",)))
    except ValueError as e:
        assert str(e) == "Cannot split --n='many': not an integer."
    else:
        raise AssertionError("no error")


def test_a_job_asks_for_at_least_one_cpu_and_one_node():
    import pytest

    for bad in (sbatch.Resources(cpus=0), sbatch.Resources(nodes=0), sbatch.Resources(gpus=-1)):
        with pytest.raises(ValueError, match="Need gpus >= 0, cpus >= 1, nodes >= 1"):
            bad.validate()


def test_elapsed_time_reads_hours_minutes_seconds():
    from rl755.slurm import status

    row = status.RunStatus("s", "completed", "record", "", "", "2026-01-01T00:00:00+00:00",
                           "2026-01-01T01:01:01+00:00", "", {}, [])  # fmt: skip
    assert row.elapsed() == "1:01:01"
    row.end_time = "2026-01-01T00:30:00+00:00"
    assert row.elapsed() == "0:30:00"


def test_a_jobs_nodes_and_cpus_per_node_are_read():
    (job,) = job_state.parse_scontrol("JobId=3 JobState=PENDING NumNodes=2 NumCPUs=8 CPUs/Task=4\n")
    assert (job.num_nodes, job.num_cpus) == (2, 4)


def test_metrics_beyond_the_limit_are_counted_not_shown():
    from rl755.slurm import status

    metrics = {"a": (1, 0.5), "b": (2, 1.25), "c": (3, 2.0)}
    assert status._short_metrics(metrics, None, 4) == "a=0.5@1 b=1.25@2 c=2@3"
    assert status._short_metrics(metrics, None, 2) == "a=0.5@1 b=1.25@2 (+1)"
    assert status._short_metrics(metrics, "b|c", 4) == "b=1.25@2 c=2@3"


def test_a_pending_job_with_no_reason_too_big_for_its_partition_says_both():
    fake = cluster.parse_cluster(PARTITIONS, NODES)
    job = job_state.SlurmJob("9", "j", "PENDING", "", "", partition="cpu", num_cpus=64,
                             min_memory="1G", num_nodes=1)  # fmt: skip
    why = pending.never_starts(job, fake)
    assert why.startswith(
        "pending (no reason) and will never start: its request is larger than any node: asks "
    )


def test_a_request_for_several_partitions_says_why_each_refuses():
    fake = cluster.parse_cluster(PARTITIONS, NODES)
    ask = sbatch.Resources(partition="gpu,empty", cpus=64, time="10")
    each = [
        fake.problem(sbatch.Resources(partition=p, cpus=64, time="10")) for p in ("gpu", "empty")
    ]
    assert fake.problem(ask) == f"{each[0]}; {each[1]}"
    assert "partition gpu" in each[0] and "partition empty" in each[1]
    assert fake.problem(sbatch.Resources(partition="gpu,cpu", cpus=40, time="10")) is None


def test_commands_and_options_are_quoted_for_the_shell():
    assert launcher.quote(["python", 3, "a b"]) == "python 3 'a b'"
    assert sbatch.quote_option("--partition=a b") == "--partition='a b'"
    assert sbatch.quote_option("--requeue") == "--requeue"


def test_list_flags_get_each_instances_placeholders():
    from rl755.slurm import instances

    tasks = instances.expand_instances(
        {"xs": ["{task_index}", 1]}, instances.ArraySpec(num_tasks=2)
    )
    assert [t[0]["xs"] for t in tasks] == [["0", 1], ["1", 1]]


def test_a_record_without_a_status_or_with_a_forgotten_job_says_so(tmp_path, monkeypatch):
    import json

    from rl755.slurm import status

    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.json").write_text(json.dumps({"stage": "a", "start_time": "2026-01-01T00:00:00"}))
    running = {"stage": "b", "status": "running", "slurm": {"job_id": "80"},
               "start_time": "2026-01-01T00:00:01", "host": "elsewhere"}  # fmt: skip
    (runs / "b.json").write_text(json.dumps(running))
    monkeypatch.setattr(status, "query_slurm", lambda ids: {})
    rows = status.collect_status(str(tmp_path))
    assert [(r.stage, r.state, r.state_source) for r in rows] == [
        ("a", "unknown", "record"),
        ("b", status.LOST, "record"),
    ]
