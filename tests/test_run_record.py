"""rl755.common.run_record: records written at start and end, statuses, flags, SLURM ids."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rl755.common import run_record


def _only_record(out_dir):
    records = run_record.read_records(str(out_dir))
    assert len(records) == 1, records
    return records[0]


def test_completed_run_writes_flags_git_host_and_times(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[1-2]")
    with run_record.record_run(tmp_path / "out", {"num_rollouts": 8, "x": (1, 2)}, "collect") as r:
        running = json.load(open(r.path))
        assert running["status"] == "running" and running["end_time"] is None
    rec = _only_record(tmp_path)
    assert rec["status"] == "completed" and rec["error"] is None
    assert rec["stage"] == "collect"
    assert rec["flags"] == {"num_rollouts": 8, "x": [1, 2]}
    assert rec["slurm"] == {"job_id": "42", "array_task_id": "3", "node_list": "node[1-2]"}
    assert rec["start_time"] <= rec["end_time"]
    assert rec["host"] and rec["pid"] == os.getpid()
    # The checkout's commit; None outside a git checkout (scripts/dev/mutate.py's copies).
    assert rec["git"] == run_record.git_info()
    assert rec["git"] is None or len(rec["git"]["commit"]) == 40
    assert rec["cpu"] == run_record.cpu_info() and rec["cpu"]["cores"] == os.cpu_count()
    assert os.path.dirname(rec["record_path"]) == str(tmp_path / "out" / "runs")
    # nothing but the record: no temp files left behind
    assert os.listdir(tmp_path / "out" / "runs") == [os.path.basename(rec["record_path"])]


def test_failed_run_records_exception_and_reraises(tmp_path):
    with pytest.raises(ValueError, match="bad shard"):
        with run_record.record_run(tmp_path, {}, "encode"):
            raise ValueError("bad shard")
    rec = _only_record(tmp_path)
    assert rec["status"] == "failed" and rec["error"] == "ValueError: bad shard"
    assert rec["end_time"] is not None


def test_interrupt_and_system_exit(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with run_record.record_run(tmp_path / "a", {}, "s"):
            raise KeyboardInterrupt()
    assert _only_record(tmp_path / "a")["status"] == "interrupted"
    with pytest.raises(SystemExit):
        with run_record.record_run(tmp_path / "b", {}, "s"):
            sys.exit(0)
    assert _only_record(tmp_path / "b")["status"] == "completed"
    with pytest.raises(SystemExit):
        with run_record.record_run(tmp_path / "c", {}, "s"):
            sys.exit(2)
    assert _only_record(tmp_path / "c")["status"] == "failed"


def test_several_runs_share_one_out_dir(tmp_path):
    for _ in range(3):
        with run_record.record_run(tmp_path, {}, "s"):
            pass
    assert len(run_record.read_records(str(tmp_path))) == 3


def test_read_records_skips_hidden_other_and_broken_files(tmp_path):
    with run_record.record_run(tmp_path / "out", {}, "collect"):
        pass
    runs = tmp_path / "out" / run_record.RUNS_SUBDIR
    (real,) = runs.iterdir()
    record = json.loads(real.read_text())
    (runs / ".half-written.json").write_text(json.dumps(record))  # a hidden file
    (runs / "other.txt").write_text(json.dumps(record))
    (runs / "broken.json").write_text("{")
    (runs / "list.json").write_text("[1]")
    (runs / "no_stage.json").write_text("{}")
    hidden = tmp_path / ".cache" / run_record.RUNS_SUBDIR
    hidden.mkdir(parents=True)
    (hidden / "r.json").write_text(json.dumps(record))
    paths = [r["record_path"] for r in run_record.read_records(str(tmp_path))]
    assert paths == [str(real)]


def test_sigterm_marks_run_interrupted_and_restores_handler(tmp_path):
    # A stage script starts with the default SIGTERM action; earlier tests in this process
    # (Ray's driver, for one) may have installed their own handler, so start from the default.
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(KeyboardInterrupt):
            with run_record.record_run(tmp_path, {}, "s"):
                os.kill(os.getpid(), signal.SIGTERM)  # what scancel / preemption sends
                time.sleep(5)
        assert _only_record(tmp_path)["status"] == "interrupted"
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_flags_dict_with_explicit_flag_values():
    from absl import flags

    fv = flags.FlagValues()
    flags.DEFINE_integer("num_rollouts", 3, "n", flag_values=fv, module_name="stage")
    flags.DEFINE_string("other", "x", "not the stage's", flag_values=fv, module_name="lib")
    fv(["stage", "--num_rollouts=5"])
    assert run_record.flags_dict("stage", fv) == {"num_rollouts": 5}


def test_flags_dict_returns_main_module_flags(tmp_path):
    script = tmp_path / "stage.py"
    script.write_text(textwrap.dedent("""
            import json, sys
            from absl import app, flags
            from rl755.common.run_record import flags_dict
            flags.DEFINE_integer("num_rollouts", 3, "n")
            flags.DEFINE_string("out_dir", None, "d")
            def main(argv):
                print(json.dumps(flags_dict()))
            app.run(main)
            """))
    out = subprocess.run(
        [sys.executable, str(script), "--out_dir=/x", "--num_rollouts=5"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"num_rollouts": 5, "out_dir": "/x"}


def test_sigterm_turned_into_exit_15_by_ray_counts_as_interrupted(tmp_path):
    with pytest.raises(SystemExit):
        with run_record.record_run(tmp_path, {}, "s"):
            sys.exit(signal.SIGTERM)  # what Ray's driver SIGTERM handler does
    assert _only_record(tmp_path)["status"] == "interrupted"


def test_cpu_info_names_the_model_and_the_vector_instruction_sets():
    """Bit-exact repeats hold on one kind of CPU: the record says which (AVX2 vs AVX-512)."""
    x86 = (
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6338\n"
        "flags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512_vnni\n\n"
        "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6338\nflags\t\t: fpu sse4_2\n"
    )
    info = run_record.cpu_info(x86)
    assert info["model"] == "Intel(R) Xeon(R) Gold 6338"
    assert info["vector_isa"] == ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni"]
    amd_avx2 = "model name : AMD EPYC 7302\nflags : sse4_2 avx avx2 fma\n"
    assert run_record.cpu_info(amd_avx2)["vector_isa"] == ["sse4_2", "avx", "avx2", "fma"]
    arm = "processor : 0\nFeatures : fp asimd evtstrm\n"
    assert run_record.cpu_info(arm)["vector_isa"] == ["asimd"]
    unknown = run_record.cpu_info("")
    assert unknown["vector_isa"] is None and unknown["cores"] == os.cpu_count()


def test_git_info_says_whether_tracked_files_changed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    git("init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "a")
    info = run_record.git_info(str(repo))
    assert info == {"commit": git("rev-parse", "HEAD"), "dirty": False, "root": str(repo)}
    (repo / "untracked.txt").write_text("not code\n")
    assert run_record.git_info(str(repo))["dirty"] is False  # untracked files do not count
    (repo / "a.py").write_text("x = 2\n")
    assert run_record.git_info(str(repo))["dirty"] is True
    assert run_record.git_info(str(tmp_path / "not_a_repo_xyz")) is None


def test_git_info_gives_up_on_a_git_call_after_20_seconds(monkeypatch):
    """A hung file system must not hang the stage: each git call has a 20 s limit, and one
    that runs out leaves the record without a code version (None), as outside a checkout."""
    limits = []

    def fake_run(cmd, **kwargs):
        limits.append(kwargs.get("timeout"))
        return subprocess.CompletedProcess(cmd, 0, stdout="abc\n", stderr="")

    monkeypatch.setattr(run_record.subprocess, "run", fake_run)
    assert run_record.git_info("/anywhere") == {"commit": "abc", "dirty": True, "root": "abc"}
    assert limits == [20, 20, 20]

    def hung(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    monkeypatch.setattr(run_record.subprocess, "run", hung)
    assert run_record.git_info("/anywhere") is None
