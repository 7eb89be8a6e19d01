"""What the SLURM layer says back: a job's parsed name, a launch's summary, the partition a
never-starting job is measured against, and list flags compared with a run's record."""

from test_slurm_cluster import NODES, PARTITIONS

from rl755.slurm import cluster, job_state, launcher, pending, resume


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
