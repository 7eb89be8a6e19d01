"""The pipeline on a real SLURM (CI: .ci/start_slurm.sh's single node, partitions general
and volta-gpu, 2 fake GPUs): every stage as a job, checked before anything is submitted,
all or nothing, and jobs that can never start called out by scripts/status.py."""

import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest
from pipeline_helpers import REPO, TINY_RUN_FLAGS, output_files, run_pipeline
from slurm_helpers import cancel, job_states, needs_slurm, wait_job

from rl755.pipeline.resources import CHAIN_STAGES
from rl755.slurm import chain, launcher, sbatch, status
from rl755.slurm.sbatch import Resources

pytestmark = needs_slurm

TOY = os.path.join(REPO, "tests", "toy_stage.py")
SMALL = Resources(cpus=1, mem="300M", time="10")
GPU_STAGES = ("train_encoder", "encode_train", "encode_validation", "train_sequential")


def _queued_under(path) -> list[str]:
    """Pending or running jobs whose logs or working files lie under `path`."""
    text = subprocess.run(
        ["scontrol", "show", "job", "-o"], capture_output=True, text=True, timeout=30
    ).stdout
    return [
        line.split()[0]
        for line in text.splitlines()
        if str(path) in line and re.search(r"JobState=(PENDING|RUNNING|CONFIGURING)", line)
    ]


def _logs(out):
    tails = []
    for path in sorted(glob.glob(str(out / "**" / "slurm" / "logs-*.err"), recursive=True)):
        tails.append(f"--- {path}\n" + open(path).read()[-1500:])
    return "\n".join(tails)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tiny_pipeline_on_slurm_matches_a_local_run_and_reruns_nothing(tmp_path, tiny_local_run):
    # the cluster, described once in the config file (RL755_CONFIG points here, conftest)
    (tmp_path / "rl755_config.json").write_text(
        json.dumps({"slurm": {"gpu_partition": "volta-gpu"}})
    )
    out = tmp_path / "slurm_tiny"
    # the local run's seed and determinism (its shard names carry the seed)
    same = [f for f in TINY_RUN_FLAGS if not f.startswith("--num_threads")]
    proc = run_pipeline("tiny", out, "--launcher=slurm", *same, timeout=600)
    jobs = dict(re.findall(r"Submitted (\w+): job (\d+)", proc.stdout))
    assert list(jobs) == list(CHAIN_STAGES), proc.stdout
    try:
        final = {name: wait_job(job, timeout=1500) for name, job in jobs.items()}
    finally:
        sbatch.cancel(list(jobs.values()))
    assert set(final.values()) == {"COMPLETED"}, (final, _logs(out))

    # each stage ran in its partition, the GPU stages with a (fake) GPU
    for name in jobs:
        script = glob.glob(str(out / "**" / "slurm" / f"{name}-*.sbatch"), recursive=True)
        text = open(script[0]).read()
        if name in GPU_STAGES:
            assert "#SBATCH --partition=volta-gpu" in text and "--gres=gpu:1" in text
        else:
            assert "--partition" not in text and "--gres" not in text
        cpus = 2 if name == "collect" else 1  # tiny: collect --parallelism=2, CMA-ES in-process
        assert f"#SBATCH --cpus-per-task={cpus}\n" in text and "#SBATCH --mem=2G\n" in text
    records = {}
    for path in glob.glob(str(out / "**" / "runs" / "*.json"), recursive=True):
        record = json.load(open(path))
        records[record["slurm"]["job_id"]] = record
    assert {records[jobs[n]]["slurm"]["partition"] for n in GPU_STAGES} == {"volta-gpu"}
    assert records[jobs["train_controller"]]["slurm"]["partition"] == "general"

    # the outputs are the files a local run makes
    local_out, _ = tiny_local_run
    assert output_files(out) == output_files(local_out)
    summary = json.loads((out / "pipeline_summary.json").read_text())
    assert [r["stage"] for r in summary["stages"]] == list(CHAIN_STAGES[:-1]) + ["pictures"]
    assert all(r["status"] == "ok" for r in summary["stages"]), summary["stages"]
    assert summary["scores"]["controller"]["mean"] is not None

    # scripts/status.py: every stage COMPLETED, and the chain in one line
    text = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "status.py"), str(out)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert text.rstrip().splitlines()[-1] == "pipeline: all 8 stages done, 0 failed", text
    rows = {r.job: r for r in status.collect_status(str(out), with_metrics=False)}
    assert {rows[j].state.upper() for j in jobs.values()} == {"COMPLETED"}, text

    # a rerun submits nothing for the completed stages
    logs_before = sorted(glob.glob(str(out / "**" / "slurm" / "job-*.json"), recursive=True))
    again = run_pipeline("tiny", out, "--launcher=slurm", *same, timeout=600).stdout
    assert "Submitted" not in again
    assert again.count("completed already") == len(CHAIN_STAGES)
    assert "0 of 8 stages submitted. Nothing to do" in again
    assert sorted(glob.glob(str(out / "**" / "slurm" / "job-*.json"), recursive=True)) == (
        logs_before
    )
    assert _queued_under(out) == []


@pytest.mark.timeout(300)
def test_impossible_request_is_refused_with_nothing_queued(tmp_path):
    out = tmp_path / "runs" / "run"
    proc = run_pipeline(
        "tiny",
        out,
        "--launcher=slurm",
        "--mem=train_controller=1T",
        "--cpus=encode=64",
        check=False,
        timeout=240,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr
    assert "Traceback" not in err
    assert "Nothing was submitted: 3 jobs can never start on this cluster" in err
    assert re.search(
        r"train_controller \(--cpus-per-task=1 --mem=1T --time=0:30:00\) asks for 1T memory "
        r"\(largest node: [\d.]+G\) per node in partition general",
        err,
    ), err
    assert "encode_train (--cpus-per-task=64 " in err and "encode_validation (" in err
    assert "64 CPUs (largest node: " in err
    assert "general (default, up): 1 node; per node up to" in err and "volta-gpu (up)" in err
    assert "--mem=STAGE=4G" in err  # what to change
    assert _queued_under(out) == [] and not out.parent.exists()  # nothing made, nothing queued


def _node_memory() -> tuple[int, int]:
    """(RealMemory, MemSpecLimit) in MB of the cluster's first node, as scontrol prints them."""
    line = subprocess.run(
        ["scontrol", "show", "node", "-o"], capture_output=True, text=True, timeout=30
    ).stdout.splitlines()[0]
    real = int(re.search(r"RealMemory=(\d+)", line).group(1))
    spec = re.search(r"MemSpecLimit=(\d+)", line)
    return real, int(spec.group(1)) if spec else 0


@pytest.mark.timeout(240)
def test_memory_the_node_keeps_for_the_system_is_refused_before_submitting(tmp_path):
    """The CI node keeps MemSpecLimit MB for the system (.ci/start_slurm.sh, as real clusters
    do): a job asking for more than RealMemory less that, though less than RealMemory, can
    never start, and the launcher says so from the limits it read, before sbatch sees it."""
    real, spec = _node_memory()
    if not spec:
        assert os.environ.get("CI", "").lower() != "true", "CI's node must set MemSpecLimit"
        pytest.skip("this cluster's node sets no MemSpecLimit (.ci/start_slurm.sh sets one)")
    ask = real - spec // 2  # between what jobs may use and the node's RealMemory
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "launch.py"), "--cpus=1", f"--mem={ask}M"]
        + ["--time=10", "--", TOY, f"--out_dir={out}"],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    usable = f"{(real - spec) / 1024:.1f}G"
    assert f"asks for {ask}M memory (largest node: {usable}) per node" in proc.stderr, proc.stderr
    assert "Nothing was submitted" in proc.stderr and "Traceback" not in proc.stderr
    assert _queued_under(out) == []


@pytest.mark.timeout(240)
def test_launcher_refuses_what_sbatch_test_only_refuses(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "launch.py"), "--cpus=1", "--mem=300M"]
        + ["--time=10", "--sbatch_arg=--constraint=nosuchfeature", "--", TOY, f"--out_dir={out}"],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refused by sbatch --test-only" in proc.stderr and "Invalid feature" in proc.stderr
    assert "Nothing was submitted" in proc.stderr and "Traceback" not in proc.stderr
    assert _queued_under(out) == []


@pytest.mark.timeout(240)
def test_chain_failing_midway_cancels_what_it_submitted(tmp_path, monkeypatch):
    real_submit, submitted = sbatch.submit, []

    def flaky(path):
        if len(submitted) == 2:
            raise sbatch.SlurmError("sbatch: error: Batch job submission failed (injected)")
        submitted.append(real_submit(path))
        return submitted[-1]

    monkeypatch.setattr(sbatch, "submit", flaky)
    stages = [
        chain.Stage(f"s{i}", TOY, {"out_dir": str(tmp_path / f"o{i}"), "sleep": 30.0}, SMALL)
        for i in range(4)
    ]
    with pytest.raises(sbatch.SlurmError) as info:
        chain.submit_chain(stages, record_dir=str(tmp_path / "chain"))
    assert len(submitted) == 2
    assert f"Cancelled the 2 jobs already submitted for this chain (s0 ({submitted[0]})" in str(
        info.value
    )
    for job in submitted:
        assert wait_job(job, timeout=60) == "CANCELLED"
    assert not any(s in ("PENDING", "RUNNING") for j in submitted for s in job_states(j))


@pytest.mark.timeout(240)
def test_status_says_when_a_pending_job_will_never_start(tmp_path):
    out = str(tmp_path / "out")
    held = Resources(cpus=1, mem="300M", time="10", extra=("--hold",))
    result = launcher.launch(TOY, {"out_dir": out, "record": False}, resources=held, check=False)
    try:
        # beyond every node (as a request the cluster's limits let through, then changed)
        subprocess.run(
            ["scontrol", "update", f"jobid={result.job_id}", "NumCPUs=64"],
            capture_output=True,
            timeout=30,
        )
        subprocess.run(["scontrol", "release", result.job_id], capture_output=True, timeout=30)
        end = time.time() + 60
        while True:
            (row,) = status.collect_status(out, with_metrics=False)
            if "PartitionConfig" in row.state or time.time() > end:
                break
            time.sleep(0.5)
        assert row.state == "PENDING (PartitionConfig) NEVER STARTS", row
        assert "64 CPUs (largest node: " in row.never_starts
        text = subprocess.run(
            [sys.executable, os.path.join(REPO, "scripts", "status.py"), out],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert (
            f"! toy_stage {result.job_id}: pending (PartitionConfig) and will never start" in text
        )
        assert (
            f"Change: cancel it (scancel {result.job_id}) and submit again asking for less" in text
        )
    finally:
        cancel(result.job_id)
