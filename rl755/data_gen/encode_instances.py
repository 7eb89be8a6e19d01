"""Stage 3, all instances at once: one encode_raw_rollouts.py process per GPU of this job,
the jobs of a SLURM array covering every outer shard (scripts/data_gen/encode_raw_rollouts_multi.py).

    run_instances({"environment": "CAR_RACING", "model": "raw_rollout_vae_32ld",
                   "split": "train", "num_sub_shards": 4}, out_dir)

Instance k of job j encodes outer shard j * K + k of `num_jobs * K`, on GPU k.
"""

from __future__ import annotations

import os
import subprocess
import sys

from absl import logging

from rl755.common.devices import visible_gpu_count


def slurm_array_position(environ: dict | None = None) -> tuple[int, int]:
    """(job_index, num_jobs) of this SLURM array task; (0, 1) outside an array."""
    environ = os.environ if environ is None else environ
    if "SLURM_ARRAY_TASK_ID" not in environ:
        return 0, 1
    task = int(environ["SLURM_ARRAY_TASK_ID"])
    low = int(environ.get("SLURM_ARRAY_TASK_MIN", 0))
    count = int(environ.get("SLURM_ARRAY_TASK_COUNT", 1))
    high = int(environ.get("SLURM_ARRAY_TASK_MAX", low + count - 1))
    if high - low + 1 != count:
        raise ValueError(
            f"SLURM array {low}-{high} has {count} tasks: use a contiguous array without a step "
            "(e.g. --array=0-2) or pass --job_index and --num_jobs."
        )
    return task - low, count


def instance_script() -> str:
    import rl755

    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(rl755.__file__))),
        "scripts",
        "data_gen",
        "encode_raw_rollouts.py",
    )
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: run from an rl755 checkout (pip install -e).")
    return path


def run_instances(
    instance_flags: dict,
    out_dir: str,
    instances_per_job: int | None = None,
    job_index: int | None = None,
    num_jobs: int | None = None,
    python: str = sys.executable,
    environ: dict | None = None,
) -> list[int]:
    """Runs this job's K instances of encode_raw_rollouts.py at once and waits for all.

    Instance k of job j encodes outer shard j * K + k of `num_jobs * K`, on GPU k (or on the
    CPU with cores / K threads when no GPU is visible). Defaults: K = the visible GPUs (1 if
    none), (job_index, num_jobs) from the SLURM array variables ((0, 1) outside an array).
    `instance_flags` are the other encode_raw_rollouts.py flags ({name: value}; None values
    are dropped). Each instance logs to <out_dir>/logs/. Raises RuntimeError naming the
    failed instances and their logs; returns the outer shard indexes it ran.
    """
    environ = dict(os.environ if environ is None else environ)
    gpus = visible_gpu_count(environ)
    k_count = int(instances_per_job or max(gpus, 1))
    if k_count <= 0:
        raise ValueError(f"--instances_per_job must be positive, got {instances_per_job}.")
    if gpus and k_count > gpus:
        raise ValueError(f"--instances_per_job={k_count} but only {gpus} GPU(s) are visible.")
    if job_index is None or num_jobs is None:
        j, n = slurm_array_position(environ)
        job_index = j if job_index is None else job_index
        num_jobs = n if num_jobs is None else num_jobs
    if not 0 <= job_index < num_jobs:
        raise ValueError(f"--job_index={job_index} is outside [0, --num_jobs={num_jobs}).")
    num_outer = num_jobs * k_count
    log_dir = os.path.join(out_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    threads = None
    if not gpus and instance_flags.get("num_threads") is None:
        threads = max(1, (os.cpu_count() or 1) // k_count)
    script = instance_script()
    procs = []
    try:
        for k in range(k_count):
            outer = job_index * k_count + k
            flags = dict(instance_flags)
            flags.update(
                out_dir=out_dir,
                num_outer_shards=num_outer,
                outer_shard_index=outer,
                gpu_index=k if gpus else None,
            )
            if threads is not None:
                flags["num_threads"] = threads
            cmd = [python, script] + [f"--{n}={v}" for n, v in flags.items() if v is not None]
            log_path = os.path.join(
                log_dir,
                f"encode-{flags.get('split', 'train')}-o{outer:05d}of{num_outer:05d}.log",
            )
            log = open(log_path, "ab")
            logging.info(
                "instance %d/%d (outer shard %d/%d): %s",
                k + 1,
                k_count,
                outer,
                num_outer,
                " ".join(cmd),
            )
            procs.append(
                (
                    outer,
                    log_path,
                    log,
                    subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=environ),
                )
            )
        failed = []
        for outer, log_path, log, proc in procs:
            code = proc.wait()
            log.close()
            if code != 0:
                failed.append((outer, code, log_path))
    except BaseException:
        for _, _, log, proc in procs:
            if proc.poll() is None:
                proc.terminate()
            log.close()
        raise
    if failed:
        details = []
        for outer, code, log_path in failed:
            with open(log_path, errors="replace") as f:
                tail = "".join(f.readlines()[-15:])
            details.append(f"outer shard {outer} exited {code}; log {log_path}:\n{tail}")
        raise RuntimeError(
            f"{len(failed)} of {k_count} encoding instances failed (rerun the same command to "
            "finish; finished sub shards are kept):\n" + "\n".join(details)
        )
    return [outer for outer, _, _, _ in procs]
