"""What rl755.slurm does with SLURM's commands, without a cluster: fake `sbatch`, `scancel`,
`scontrol` and `sacct` on PATH (tests/fake_slurm.py) log how they were called and answer as
a cluster does, refusals and odd output included. The same paths against a real SLURM are
in the test files marked `slurm`; a single-node cluster cannot refuse most of what a shared
one refuses. The state of a chain: tests/test_slurm_chain_status.py."""

import json
import os
import re
import subprocess
import sys

import pytest
from fake_slurm import FakeSlurm

from rl755.slurm import chain, cluster, job_state, launcher, pending, sbatch
from rl755.slurm.job_state import SlurmJob
from rl755.slurm.sbatch import Resources

TOY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toy_stage.py")
SMALL = Resources(partition="cpu", cpus=2, mem="300M", time="10")


@pytest.fixture
def slurm(tmp_path, monkeypatch):
    return FakeSlurm(tmp_path / "bin", monkeypatch)


def test_slurm_is_there_when_sbatch_is_on_path(slurm, tmp_path, monkeypatch):
    assert sbatch.have_slurm()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert not sbatch.have_slurm()
    with pytest.raises(sbatch.SlurmError, match="sbatch not found: submit from a SLURM login"):
        sbatch.submit(str(tmp_path / "x.sbatch"))


def test_submit_returns_the_job_id_and_says_what_sbatch_said_when_it_refuses(slurm, tmp_path):
    path, ok = str(tmp_path / "job.sbatch"), str(tmp_path / "ok.sbatch")
    slurm.answer("sbatch", stdout="4242;cluster\n", match=ok)
    slurm.answer("sbatch", stderr="sbatch: error: invalid partition\n", returncode=1, match=path)
    slurm.answer("sbatch", stdout="Submitted batch job 7\n")
    assert sbatch.submit(ok) == "4242"
    assert slurm.calls("sbatch") == [["sbatch", "--parsable", ok]]
    with pytest.raises(sbatch.SlurmError, match=rf"sbatch {path} failed: sbatch: error: invalid"):
        sbatch.submit(path)
    with pytest.raises(sbatch.SlurmError, match="Unexpected sbatch output: 'Submitted batch"):
        sbatch.submit(str(tmp_path / "other.sbatch"))


def test_cancel_says_nothing_when_done_and_scancels_complaint_otherwise(slurm):
    assert sbatch.cancel([]) is None and slurm.calls() == []
    assert sbatch.cancel(["12", 13]) is None
    assert slurm.calls("scancel") == [["scancel", "12", "13"]]
    slurm.answer("scancel", stderr="scancel: error: Invalid job id 99\n", returncode=1)
    assert sbatch.cancel(["99"]) == "scancel: error: Invalid job id 99"


def test_every_slurm_command_is_run_with_its_documented_time_limit(slurm, tmp_path, monkeypatch):
    """A hung controller must not hang a submission or a status table: each call of a SLURM
    command gives up after the time docs/guides/slurm.md gives (and its output is text)."""
    real = subprocess.run
    seen = []

    def run(argv, **kwargs):
        seen.append((argv[0], kwargs.get("timeout"), kwargs.get("text")))
        return real(argv, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    slurm.answer("sbatch", stdout="5\n", match="--parsable")
    sbatch.submit(str(tmp_path / "a.sbatch"))
    sbatch.cancel(["5"])
    cluster.sbatch_test_only(SMALL)
    job_state.query_slurm(["5"])
    launcher.check_stage(TOY, {"out_dir": str(tmp_path / "o"), "n": 1})
    assert seen == [
        ("sbatch", 120, True),
        ("scancel", 60, True),
        ("sbatch", 60, True),
        ("scontrol", 60, True),
        ("sacct", 60, True),
        (sys.executable, 300, True),
    ]


def test_sbatch_test_only_asks_for_exactly_the_job_and_returns_the_refusal(slurm):
    assert cluster.sbatch_test_only(SMALL, "encode", num_tasks=3) is None
    assert slurm.calls("sbatch") == [
        ["sbatch", "--test-only", "--job-name=encode", *SMALL.sbatch_options(), "--array=0-2"]
        + ["--output=/dev/null", "--wrap=true"]
    ]
    cluster.sbatch_test_only(SMALL, "one")
    assert not any(a.startswith("--array") for a in slurm.calls("sbatch")[1])
    slurm.answer(
        "sbatch",
        stderr="sbatch: error: Batch job submission failed: Invalid account or account/partition"
        " combination specified\n",
        returncode=1,
    )
    assert cluster.sbatch_test_only(SMALL) == (
        "Batch job submission failed: Invalid account or account/partition combination specified"
    )


def test_query_slurm_reads_scontrol_then_sacct_past_lines_it_cannot_read(slurm):
    slurm.answer(
        "scontrol",
        stdout="JobId=10 JobName=collect JobState=RUNNING Reason=None ExitCode=0:0\n",
    )
    slurm.answer(
        "sacct",
        stdout="garbage line\n11|11|train|COMPLETED|0:0\n12|12|eval|CANCELLED by 0|0:15\n",
    )
    jobs = job_state.query_slurm(["10", "11", "12", "13"])
    assert sorted(jobs) == ["10", "11", "12"]
    assert (jobs["10"].state, jobs["10"].source) == ("RUNNING", "scontrol")
    assert (jobs["11"].name, jobs["11"].state, jobs["11"].source) == ("train", "COMPLETED", "sacct")
    assert (jobs["12"].state, jobs["12"].exit_code) == ("CANCELLED", "0:15")
    assert slurm.calls("sacct")[0][-1] == "11,12,13"


def test_a_sbatch_scripts_header_says_when_in_utc_and_a_plain_jobs_echo_names_no_task(tmp_path):
    text = sbatch.render_sbatch_script(
        [[["true"]]], job_name="j", resources=Resources(), log_dir=str(tmp_path), how="a test"
    )
    assert re.match(
        r"# Generated by a test on \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 by ", text.splitlines()[1]
    )
    echo = next(line for line in text.splitlines() if line.startswith("echo"))
    assert echo == (
        'echo "== job ${SLURM_JOB_ID:-?} on $(hostname) restart ${SLURM_RESTART_COUNT:-0} at '
        '$(date -u +%FT%TZ)"'
    )
    array = sbatch.render_sbatch_script(
        [[["true"]], [["true"]]], job_name="j", resources=Resources(), log_dir=str(tmp_path)
    )
    assert 'echo "== job ${SLURM_JOB_ID:-?} task ${SLURM_ARRAY_TASK_ID:-?} on' in array
    with pytest.raises(ValueError, match="^Every task needs at least one command.$"):
        sbatch.render_sbatch_script([[]], job_name="j", resources=Resources(), log_dir="x")


@pytest.mark.parametrize("arg", ["X\nY", "a'X\\b\tc\x01", "XX\\'XX\x7f"])
def test_a_quoted_argument_with_control_characters_reads_back_the_same_in_bash(arg):
    quoted = sbatch.quote_arg(arg)
    assert "\n" not in quoted and quoted.startswith("$'")
    out = subprocess.run(
        ["bash", "-c", f"printf %s {quoted}"], capture_output=True, check=True
    ).stdout
    assert out.decode() == arg


def test_a_chains_jobs_get_the_stages_log_dir_interpreter_and_description(slurm, tmp_path):
    slurm.answer("sbatch", stdout="300\n", match="--parsable")
    python = str(tmp_path / "other-python")
    stage = chain.Stage(
        "s0", TOY, {"out_dir": str(tmp_path / "o0"), "n": 1}, SMALL, log_dir=str(tmp_path / "logs")
    )
    [result] = chain.submit_chain([stage], check=False, python=python)
    assert result.job_id == "300"
    assert os.path.dirname(result.sbatch_script) == str(tmp_path / "logs")
    text = open(result.sbatch_script).read()
    command = next(line for line in text.splitlines() if TOY in line and not line.startswith("#"))
    assert command.startswith(python + " ")
    assert f"# Stage: {TOY}" in text
    assert f"# Outputs: {tmp_path / 'o0'}" in text
    assert "# Launched with: " in text
    submission = json.loads(open(os.path.join(tmp_path, "logs", "job-300.json")).read())
    assert {k: submission[k] for k in ("job_id", "name", "num_tasks", "out_dir", "log_dir")} == {
        "job_id": "300",
        "name": "s0",
        "num_tasks": 1,
        "out_dir": str(tmp_path / "o0"),
        "log_dir": str(tmp_path / "logs"),
    }
    assert submission["sbatch_script"] == result.sbatch_script
    no_out = launcher.launch(TOY, {"n": 1}, dry_run=True, check=False, log_dir=str(tmp_path))
    assert "# Outputs: (none given)" in open(no_out.sbatch_script).read()


def _logging_python(tmp_path):
    """An interpreter that logs its arguments, then runs this one."""
    log = tmp_path / "used"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return str(python), log


def test_launch_checks_the_flags_with_the_interpreter_it_was_given(tmp_path):
    python, log = _logging_python(tmp_path)
    launcher.launch(
        TOY, {"out_dir": str(tmp_path / "o"), "n": 1}, local=True, dry_run=True, python=python
    )
    assert log.read_text().split() == [
        TOY,
        f"--out_dir={tmp_path / 'o'}",
        "--n=1",
        "--only_check_args",
    ]


def test_a_local_chain_checks_each_stages_first_process_with_the_interpreter_given(tmp_path):
    python, log = _logging_python(tmp_path)
    stages = [
        chain.Stage("a", TOY, {"out_dir": str(tmp_path / "a"), "n": 1}, SMALL),
        chain.Stage(
            "b",
            TOY,
            {"out_dir": str(tmp_path / "b"), "n": "{task_index}"},
            SMALL,
            array=launcher.ArraySpec(num_tasks=2),
            after=("a",),
        ),
    ]
    chain.submit_chain(stages, local=True, dry_run=True, python=python)
    checks = sorted(line.split() for line in log.read_text().splitlines())
    assert checks == [
        [TOY, f"--out_dir={tmp_path / 'a'}", "--n=1", "--only_check_args"],
        [TOY, f"--out_dir={tmp_path / 'b'}", "--n=0", "--only_check_args"],
    ]


def test_parsed_cluster_keeps_each_partitions_and_nodes_state():
    found = cluster.parse_cluster(
        "PartitionName=cpu Default=YES State=UP\nPartitionName=old State=DOWN\n"
        "PartitionName=new\n",
        "NodeName=c1 CPUTot=4 RealMemory=8000 State=IDLE+DRAIN Partitions=cpu,old,new\n"
        "NodeName=c2 CPUTot=4 RealMemory=8000 Partitions=cpu\n",
    )
    assert [p.state for p in found.partitions] == ["UP", "DOWN", "UP"]
    assert [n.state for n in found.get("cpu").nodes] == ["IDLE+DRAIN", ""]
    assert found.get("old").describe().startswith("old (down): 1 node;")


def test_a_pending_job_whose_memory_scontrol_did_not_say_asks_for_nothing_known():
    job = SlurmJob("5", "j", "PENDING", "Resources", "", num_cpus=2, min_memory="N/A")
    assert pending.requested(job) is None
    assert pending.never_starts(job, cluster.parse_cluster("PartitionName=cpu\n", "")) is None
    assert pending.requested(SlurmJob("5", "j", "PENDING", "", "", num_cpus=2, min_memory="32GB"))


def test_a_job_that_can_never_start_is_refused_before_submitting_with_what_to_do(slurm):
    from rl755.common.errors import BadInput

    slurm.answer(
        "scontrol", stdout="PartitionName=cpu Default=YES MaxTime=1:00:00\n", match="partition"
    )
    slurm.answer(
        "scontrol", stdout="NodeName=c1 CPUTot=4 RealMemory=8000 Partitions=cpu\n", match="node"
    )
    cluster._read_cluster_cached.cache_clear()
    try:
        with pytest.raises(BadInput) as info:
            launcher.check_can_start([("big", Resources(cpus=16, time="10"), 1)])
    finally:
        cluster._read_cluster_cached.cache_clear()
    text = str(info.value)
    assert "big" in text and "16 CPUs" in text
    assert "Ask for less (--cpus, --mem, --gpus, --time) or another --partition." in text
    assert slurm.calls("sbatch") == []  # the limits refused it; no --test-only needed
    assert cluster.sbatch_test_only(SMALL) is None
    assert slurm.calls("sbatch")[-1][2] == "--job-name=check"


def test_flags_a_stage_rejects_are_quoted_from_its_error_output(tmp_path):
    with pytest.raises(ValueError) as info:
        launcher.check_stage(TOY, {"out_dir": str(tmp_path), "no_such_flag": 1})
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"{TOY} rejects its flags (")
    assert any("no_such_flag" in line for line in lines[1:])
    assert len(lines) <= 16
