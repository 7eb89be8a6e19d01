"""Which devices a stage computes on: TF distribution strategies and GPU selection.

    strategy = make_strategy()      # sequential training: every visible GPU, or srun tasks
    select_gpu(2)                   # stage 3: one encoding instance per GPU
    visible_gpu_count()             # GPUs this job may use, without starting TensorFlow

`make_strategy()` picks `MultiWorkerMirroredStrategy` (TF's SlurmClusterResolver) when the
process is one of several `srun` tasks (SLURM_STEP_NUM_TASKS > 1), otherwise a
`MirroredStrategy` over the visible GPUs (or over the logical CPUs when there is no GPU;
tests split the CPU in two with `tf_setup.split_cpu_into_logical_devices`).
"""

from __future__ import annotations

import os

from absl import logging


def make_strategy():
    """MultiWorkerMirroredStrategy under a multi-task `srun`, else MirroredStrategy.

    Call before any other TensorFlow op (multi-worker collectives are set up at creation)."""
    import tensorflow as tf

    if int(os.environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1:
        resolver = _slurm_resolver()
        cluster = resolver.cluster_spec().as_dict()  # also sets task_type and task_id
        logging.info(
            "Multi-worker training: task %s of %s (%s)",
            resolver.task_id,
            os.environ.get("SLURM_STEP_NUM_TASKS"),
            cluster,
        )
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return tf.distribute.MirroredStrategy([d.name for d in gpus])
    return cpu_strategy(len(tf.config.list_logical_devices("CPU")))


def cpu_strategy(num_devices: int):
    """MirroredStrategy over the first `num_devices` logical CPUs (tests without GPUs).

    Reduces through one device: CPU collective ops of several strategies in one process
    can collide on their instance keys."""
    import tensorflow as tf

    devices = [d.name for d in tf.config.list_logical_devices("CPU")[:num_devices]]
    return tf.distribute.MirroredStrategy(
        devices, cross_device_ops=tf.distribute.ReductionToOneDevice()
    )


def _slurm_resolver():
    """TF's SlurmClusterResolver, without initializing TensorFlow first.

    With GPUs (CUDA_VISIBLE_DEVICES or nvidia-smi) it splits each node's GPUs among the
    node's tasks. Without any, the default raises (gpus_per_node=0, or no nvidia-smi) and it
    checks tasks_per_node * gpus_per_task <= gpus_per_node: CPU-only nodes get one pretend
    GPU per task and auto_set_gpu=False, so CUDA_VISIBLE_DEVICES is left alone."""
    import tensorflow as tf

    slurm_cluster_resolver = tf.distribute.cluster_resolver.SlurmClusterResolver
    try:
        resolver = slurm_cluster_resolver()
        if resolver.num_accelerators().get("GPU", 0) > 0:
            resolver.cluster_spec()
            return resolver
    except (RuntimeError, ValueError, OSError) as e:
        logging.info("No GPUs for SlurmClusterResolver (%s); using CPUs.", e)
    num_tasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
    return slurm_cluster_resolver(gpus_per_node=num_tasks, gpus_per_task=1, auto_set_gpu=False)


def is_chief(strategy) -> bool:
    """True for the one worker that writes checkpoints and TensorBoard logs."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in (None, "chief") or (
        resolver.task_type == "worker" and resolver.task_id == 0
    )


def select_gpu(gpu_index: int | None) -> None:
    """Makes only GPU `gpu_index` visible to TF (call before TF runs anything).

    On a machine without GPUs the index is ignored with a warning."""
    if gpu_index is None:
        return
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        logging.warning(
            "--gpu_index=%d ignored: no GPU is visible; encoding on the CPU.", gpu_index
        )
        return
    if not 0 <= gpu_index < len(gpus):
        raise ValueError(
            f"--gpu_index={gpu_index} but only {len(gpus)} GPU(s) are visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})."
        )
    try:
        tf.config.set_visible_devices(gpus[gpu_index], "GPU")
    except RuntimeError:
        logging.warning(
            "--gpu_index=%d could not be applied: TensorFlow was already initialized.", gpu_index
        )


def visible_gpu_count(environ: dict | None = None) -> int:
    """GPUs this job may use, from CUDA_VISIBLE_DEVICES (or SLURM_GPUS_ON_NODE); 0 if none."""
    environ = os.environ if environ is None else environ
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        ids = [d for d in cvd.split(",") if d.strip() and d.strip() != "-1"]
        return len(ids)
    try:
        return int(environ.get("SLURM_GPUS_ON_NODE", 0))
    except ValueError:
        return 0
