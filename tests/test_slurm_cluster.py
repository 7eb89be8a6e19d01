"""What the cluster offers, requests that can never start, the cluster config file, and the
one-line chain summary (no SLURM needed: scontrol's output is given as text)."""

import json

import pytest

from rl755.common import config
from rl755.common.errors import BadInput
from rl755.slurm import chain_status, cluster, job_state, pending, site
from rl755.slurm.sbatch import Resources

# As real clusters print them: partitions restricted to accounts (AllowAccounts), nodes that
# keep memory for the system (MemSpecLimit, subtracted from RealMemory) and typed GRES GPUs.
PARTITIONS = (
    "PartitionName=cpu AllowGroups=ALL AllowAccounts=lab,other AllowQos=ALL Default=YES "
    "MaxNodes=UNLIMITED MaxTime=1-00:00:00 MaxCPUsPerNode=UNLIMITED MaxMemPerNode=UNLIMITED "
    "State=UP TotalCPUs=96\n"
    "PartitionName=gpu AllowAccounts=lab Default=NO MaxNodes=2 MaxTime=2-00:00:00 "
    "MaxCPUsPerNode=16 MaxMemPerNode=65536 State=UP\n"
    "PartitionName=empty Default=NO MaxTime=UNLIMITED State=DOWN\n"
)
NODES = (
    "NodeName=c01 Arch=x86_64 CPUTot=48 CPUEfctv=48 RealMemory=195000 MemSpecLimit=4000 "
    "Gres=(null) State=IDLE Partitions=cpu\n"
    "NodeName=c02 CPUTot=48 RealMemory=95000 Gres=(null) State=MIXED Partitions=cpu\n"
    "NodeName=g01 CPUTot=32 RealMemory=258192 MemSpecLimit=8192 Gres=gpu:v100:4(S:0-1) "
    "State=IDLE Partitions=gpu\n"
    "NodeName=g02 CPUTot=32 RealMemory=258192 MemSpecLimit=8192 Gres=gpu:a100:2,gpu:v100:1 "
    "State=IDLE Partitions=gpu,cpu\n"
)


@pytest.fixture
def fake_cluster():
    return cluster.parse_cluster(PARTITIONS, NODES)


def test_units():
    assert [cluster.mem_to_mb(m) for m in ("16G", "500M", "1T", "1024", "2048K")] == [
        16384,
        500,
        1048576,
        1024,
        2,
    ]
    assert [
        cluster.time_to_minutes(t)
        for t in ("30", "1:00:00", "2-00:00:00", "1-12", "05:30", "UNLIMITED", "0:00:01")
    ] == [30, 60, 2880, 2160, 6, None, 1]
    assert cluster.format_minutes(2880) == "2-00:00:00" and cluster.format_minutes(90) == "1:30:00"
    assert [cluster.gpus_in_gres(g) for g in ("gpu:2", "gpu:v100:4(S:0-1)", "(null)", "")] == [
        2,
        4,
        0,
        0,
    ]
    assert cluster.gpus_in_gres("gpu:a100:2,gpu:v100:1,mps:100") == 3


def test_units_at_their_edges():
    """Spellings scontrol and users write, and the boundaries of each format."""
    for text in ("INFINITE", "infinite", "NONE", "N/A", "n/a", "", "UNLIMITED"):
        assert cluster.time_to_minutes(text) is None, text
    assert cluster.time_to_minutes("2-01:30:00") == 2 * 1440 + 90
    assert cluster.time_to_minutes("1-2") == 1440 + 120
    assert [cluster.mem_to_mb(m) for m in ("16g", "3k", "2048K", "1t")] == [16384, 0, 2, 1048576]
    assert isinstance(cluster.mem_to_mb("3000K"), int)
    with pytest.raises(ValueError, match="'lots' is not SLURM memory syntax"):
        cluster.mem_to_mb("lots")
    assert [cluster.format_mb(m) for m in (500, 1023, 1024, 1536)] == [
        "500M",
        "1023M",
        "1.0G",
        "1.5G",
    ]
    assert cluster.format_minutes(2 * 1440 + 3 * 60 + 7) == "2-03:07:00"
    assert (
        cluster.format_minutes(1440 + 60) == "1-01:00:00"
        and cluster.format_minutes(60) == "1:00:00"
    )
    assert cluster.format_minutes(61) == "1:01:00" and cluster.format_minutes(59) == "0:59:00"


def test_requests_at_the_edge_of_a_partition_fit(fake_cluster):
    """Exactly a node's usable memory, exactly MaxNodes, MaxTime, MaxCPUsPerNode: they fit."""
    assert fake_cluster.problem(Resources(mem="191000M", cpus=48)) is None  # c01, to the MB
    assert "191001M memory" not in (fake_cluster.problem(Resources(mem="191001M")) or "")
    gpu = dict(partition="gpu", cpus=16, mem="64G", gpus=3, time="2-00:00:00")
    assert fake_cluster.problem(Resources(nodes=2, **gpu)) is None
    assert "3 nodes" in fake_cluster.problem(Resources(nodes=3, **gpu))
    assert fake_cluster.problem(Resources(mem="1M", cpus=48)) is None
    # a list of partitions: each is checked as named, not as the default one
    assert "partition gpu" in fake_cluster.problem(Resources(partition="gpu,empty", cpus=17))
    assert fake_cluster.problem(Resources(partition="empty,gpu", cpus=16)) is None
    one = cluster.parse_cluster(
        "PartitionName=solo Default=YES MaxTime=UNLIMITED State=UP\n",
        "NodeName=n1 CPUTot=4 RealMemory=8000 Partitions=solo\n",
    )
    (solo,) = one.partitions
    assert solo.describe() == (
        "solo (default, up): 1 node; per node up to 4 CPUs, 7.8G memory, 0 GPUs; "
        "time limit unlimited"
    )
    assert solo.nodes[0].mem_mb == 8000  # no MemSpecLimit: all of RealMemory
    assert "asks for 2 nodes with 1 CPUs" in one.problem(Resources(nodes=2))
    assert "asks for 8001M memory (largest node: 7.8G) per node in partition solo" == (
        one.problem(Resources(mem="8001M"))
    )
    both = one.problem(Resources(mem="9G", cpus=5))
    assert (
        both
        == "asks for 5 CPUs (largest node: 4) and 9G memory (largest node: 7.8G) per node in partition solo"
    )


def test_partitions_and_nodes_are_read(fake_cluster):
    cpu, gpu, empty = fake_cluster.partitions
    assert (cpu.name, cpu.default, cpu.max_time_min) == ("cpu", True, 1440)
    assert [n.name for n in cpu.nodes] == ["c01", "c02", "g02"]
    assert [n.gpus for n in gpu.nodes] == [4, 3]
    # what jobs may use: RealMemory less MemSpecLimit
    assert [n.mem_mb for n in cpu.nodes] == [191000, 95000, 250000]
    assert (gpu.max_nodes, gpu.max_cpus_per_node, gpu.max_mem_per_node_mb) == (2, 16, 65536)
    assert fake_cluster.get(None) is cpu and fake_cluster.get("nope") is None
    assert "cpu (default, up): 3 nodes; per node up to 48 CPUs, 244.1G memory, 3 GPUs" in (
        cpu.describe()
    )
    assert "time limit 1-00:00:00" in cpu.describe()
    assert "up to 16 CPUs, 64.0G memory, 4 GPUs" in gpu.describe()  # partition caps
    assert empty.describe() == "empty (down): no nodes"


@pytest.mark.parametrize(
    "request_, expected",
    [
        (Resources(cpus=48, mem="180G"), None),
        (Resources(cpus=49), "asks for 49 CPUs (largest node: 48) per node in partition cpu"),
        (Resources(mem="300G"), "asks for 300G memory (largest node: 244.1G)"),
        (Resources(gpus=4), "asks for 4 GPUs (largest node: 3) per node in partition cpu"),
        (Resources(partition="gpu", gpus=4, cpus=16, mem="64G", time="2-00:00:00"), None),
        (Resources(partition="gpu", cpus=17), "17 CPUs per node; partition gpu allows at most 16"),
        (Resources(partition="gpu", mem="65G"), "65G memory per node; partition gpu allows"),
        (Resources(partition="gpu", time="3-00:00:00"), "allows at most 2-00:00:00"),
        (Resources(time="1-00:00:01"), "asks for time 1-00:00:01; partition cpu allows"),
        (Resources(partition="gpu", nodes=3), "asks for 3 nodes; partition gpu allows at most 2"),
        (Resources(nodes=3, cpus=48, mem="90G"), "partition cpu has 2 such nodes"),
        (Resources(partition="volta"), "'volta', which does not exist (partitions: cpu, gpu"),
        (Resources(partition="empty"), "partition empty, which has no nodes"),
        (Resources(mem="0"), None),  # --mem=0: all of a node's memory
        (Resources(partition="gpu,cpu", cpus=40), None),  # one of the list fits
        (Resources(partition="gpu,cpu", cpus=64), "(largest node: 48) per node in partition cpu"),
        # below g02's RealMemory, above what its MemSpecLimit leaves to jobs
        (Resources(mem="252000M"), "asks for 252000M memory (largest node: 244.1G) per node"),
    ],
)
def test_requests_beyond_the_cluster_are_named(fake_cluster, request_, expected):
    problem = fake_cluster.problem(request_)
    if expected is None:
        assert problem is None
    else:
        assert expected in problem


def test_refusal_names_job_request_and_offer(fake_cluster, monkeypatch):
    monkeypatch.setattr(cluster, "sbatch_test_only", lambda *a: None)
    problems = cluster.check_requests(
        [("train", Resources(partition="gpu", gpus=1, mem="128G"), 1), ("ok", Resources(), 1)],
        fake_cluster,
    )
    (line,) = problems
    assert line.startswith("train (--partition=gpu --cpus-per-task=1 --mem=128G --gres=gpu:1")
    text = cluster.refusal_message(problems, fake_cluster, "Use less.")
    assert text.startswith("Nothing was submitted: 1 job can never start")
    assert "gpu (up): 2 nodes; per node up to 16 CPUs" in text and text.endswith("Use less.")
    # what the limits let through, sbatch --test-only still checks
    monkeypatch.setattr(cluster, "sbatch_test_only", lambda res, *a: "Invalid feature")
    (line,) = cluster.check_requests(
        [("x", Resources(extra=("--constraint=v9",)), 1)], fake_cluster
    )
    assert "refused by sbatch --test-only: Invalid feature" in line


def _job(**kw):
    fields = dict(job_id="7", name="train", state="PENDING", reason="Priority", exit_code="0:0")
    fields.update(kw)
    return job_state.SlurmJob(**fields)


def test_pending_jobs_that_never_start_are_told_apart(fake_cluster):
    big = dict(partition="cpu", num_cpus=4, min_memory="300G", gpus=0, num_nodes=1)
    fits = dict(partition="cpu", num_cpus=4, min_memory="8G", gpus=0, num_nodes=1)
    # waiting its turn: nothing to say
    assert pending.never_starts(_job(reason="Priority", **fits), fake_cluster) is None
    assert pending.never_starts(_job(reason="Resources", **fits), fake_cluster) is None
    assert pending.never_starts(_job(state="RUNNING", reason="None", **big), fake_cluster) is None
    # a reason that never clears
    text = pending.never_starts(_job(reason="PartitionConfig", **fits), fake_cluster)
    assert text.startswith("pending (PartitionConfig) and will never start:")
    assert "Change: cancel it (scancel 7)" in text and "--mem" in text
    text = pending.never_starts(_job(reason="DependencyNeverSatisfied"), fake_cluster)
    assert "a job it waits for (afterok) failed or was cancelled" in text
    assert "QOSMaxWallDurationPerJobLimit" in pending.never_starts(
        _job(reason="QOSMaxWallDurationPerJobLimit"), fake_cluster
    )
    # "Resources", but beyond every node of the partition
    text = pending.never_starts(_job(reason="Resources", **big), fake_cluster)
    assert "300G memory (largest node: 244.1G)" in text and "the partition offers: cpu" in text


def test_scontrol_job_request_fields():
    (job,) = job_state.parse_scontrol(
        "JobId=7 JobName=w JobState=PENDING Reason=PartitionConfig Partition=volta-gpu "
        "NumNodes=1 NumCPUs=4 CPUs/Task=4 MinMemoryNode=50000M TresPerNode=gres:gpu:1 "
        "TimeLimit=00:30:00 ExitCode=0:0\n"
    )
    assert (job.partition, job.num_cpus, job.min_memory, job.gpus) == ("volta-gpu", 4, "50000M", 1)
    res = pending.requested(job)
    assert (res.cpus, res.mem, res.gpus, res.time) == (4, "50000M", 1, "00:30:00")


def test_chain_summary_line():
    S = chain_status.StageState
    assert chain_status.bucket(["COMPLETED", "RUNNING"]) == "running"
    assert chain_status.bucket(["COMPLETED", "PENDING"]) == "running"  # an array under way
    assert chain_status.bucket(["COMPLETED", "FAILED"]) == "failed"
    assert chain_status.bucket(["completed"]) == "done"
    assert chain_status.bucket(["PENDING"]) == "pending" and chain_status.bucket([]) == "unknown"
    states = [S("collect", "1", "done"), S("train", "2", "done"), S("encode", "3", "running")]
    states += [S(n, str(i), "pending", "Dependency") for i, n in enumerate("defg")]
    assert chain_status.summary_line(states) == "stage 3 of 7 running (encode), 2 done, 0 failed"
    states[2] = S("encode", "3", "failed")
    states[3:] = [S(n, "x", "cancelled") for n in "defg"]
    assert chain_status.summary_line(states) == (
        "stage 3 of 7 failed (encode), 2 done, 1 failed, 4 cancelled"
    )
    stuck = [S("a", "1", "done"), S("b", "2", "pending", "PartitionConfig, will never start")]
    assert chain_status.summary_line(stuck) == (
        "stage 2 of 2 pending (b: PartitionConfig, will never start), 1 done, 0 failed"
    )
    assert chain_status.summary_line([S("a", "1", "done")] * 3) == "all 3 stages done, 0 failed"


def test_cluster_config_file(tmp_path, monkeypatch):
    path = tmp_path / "rl755_config.json"
    monkeypatch.setenv("RL755_CONFIG", str(path))
    monkeypatch.delenv("RL755_DATA_DIR")
    assert site.settings() == {"stages": {}}
    path.write_text(
        json.dumps(
            {
                "data_dir": str(tmp_path),
                "slurm": {
                    "partition": "general",
                    "gpu_partition": "volta-gpu",
                    "gpu_qos": "gpu_access",
                    "account": "lab",
                    "stages": {"train_controller": {"mem": "64G", "cpus": "32"}},
                },
            }
        )
    )
    settings = site.settings()
    assert settings["stages"] == {"train_controller": {"mem": "64G", "cpus": 32}}
    assert config.data_dir() == tmp_path  # the other settings still work
    gpu = site.place(Resources(gpus=1))
    assert (gpu.partition, gpu.qos) == ("volta-gpu", "gpu_access")
    cpu = site.place(Resources())
    assert (cpu.partition, cpu.qos) == ("general", None)
    # the file's account charges every job, CPU or GPU, unless a flag or the request names one
    assert (gpu.account, cpu.account) == ("lab", "lab")
    assert "--account=lab" in cpu.sbatch_options()
    assert site.place(Resources(), account="mine").account == "mine"
    assert site.place(Resources(account="own"), account="mine").account == "own"
    # flags beat the file; an explicit partition beats both
    assert site.place(Resources(gpus=1), gpu_partition="a100").partition == "a100"
    assert site.place(Resources(), partition="short").partition == "short"
    assert site.place(Resources(gpus=1, partition="mine")).partition == "mine"
    # without a GPU partition, GPU jobs go where the CPU ones go
    assert site.place(Resources(gpus=1), site={"partition": "all"}).partition == "all"
    assert site.place(Resources(gpus=1), site={}).partition is None  # the cluster's default
    for bad, match in [
        ({"slurm": {"partitions": "x"}}, "unknown keys \\['partitions'\\]"),
        ({"slurm": {"stages": {"collect": {"mem": "lots"}}}}, "stages.collect: mem='lots'"),
        ({"slurm": {"stages": {"collect": {"cpu": 2}}}}, "unknown keys \\['cpu'\\]"),
        ({"slurm": {"partition": 3}}, "partition must be a string"),
        ({"slurm": []}, '"slurm" must be a JSON object'),
    ]:
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=match) as info:
            site.settings()
        assert str(path) in str(info.value)
    assert issubclass(BadInput, ValueError)
