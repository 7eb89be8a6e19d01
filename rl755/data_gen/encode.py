"""Stage 3: re-encode raw rollouts with a trained `ObservationEncoder`, sharded across
processes, GPUs and SLURM jobs (scripts/data_gen/encode_raw_rollouts.py and
scripts/data_gen/encode_raw_rollouts_multi.py).

Work split. The sorted raw shard files of a split are cut into `num_outer_shards` contiguous
groups of near-equal size (`outer_shard_files`; the count need not divide the files); one
instance encodes one group. Its `num_sub_shards` output files each take a contiguous run of
the group's input files (`sub_shard_files`), so the assignment is a pure function of the
flags and the file list. Outputs are named

    <out_name>-<split>-o<outer>of<num_outer>.tfrecord-<sub>-of-<num_sub>
    e.g. encoded-train-o00003of00012.tfrecord-00001-of-00004

so the instances never write the same name, and `<out_name>-{split}*.tfrecord-*` reads
them all. Each sub shard is written to a temporary name and renamed when complete; a rerun
skips the sub shards that exist, so a killed job loses at most the sub shard in progress.
A group with fewer input files than sub shards writes empty files for the rest (valid
TFRecord files holding no rollouts) so the set of names stays complete.

Each encoded rollout keeps the raw rollout's actions, rewards and done flag and stores
    obs_l      float32 [T, Z]  the representation (a VAE's posterior mean)
    obs_std_l  float32 [T, Z]  the posterior std devs (when the encoder returns "std_devs")
(`rl755.common.structs.Rollout`). `dataset_info.json` beside the shards records the
environment, representation size, action size, dtype, encoder model and checkpoint.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import subprocess
import sys
import time

import numpy as np
from absl import logging

from rl755 import zoo
from rl755.common import config, run_record, sharded_io, tf_setup
from rl755.common.structs import Rollout, parse_rollout_tensors
from rl755.environments import Environments

PRODUCER = "scripts/data_gen/encode_raw_rollouts.py"


# ---- the work split (pure functions) ----------------------------------------------------------
def _contiguous_split(items: list, n: int) -> list[list]:
    """`n` contiguous runs of near-equal length (the first ones one longer)."""
    q, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return out


def outer_shard_files(files: list[str], num_outer_shards: int, outer_shard_index: int) -> list[str]:
    """The input files of outer shard `outer_shard_index` (of the sorted `files`)."""
    if num_outer_shards <= 0:
        raise ValueError(f"--num_outer_shards must be positive, got {num_outer_shards}.")
    if not 0 <= outer_shard_index < num_outer_shards:
        raise ValueError(
            f"--outer_shard_index={outer_shard_index} is outside [0, {num_outer_shards}) "
            f"(--num_outer_shards={num_outer_shards})."
        )
    return _contiguous_split(sorted(files), num_outer_shards)[outer_shard_index]


def sub_shard_files(files: list[str], num_sub_shards: int) -> list[list[str]]:
    """Input files of each of this instance's `num_sub_shards` output files."""
    if num_sub_shards <= 0:
        raise ValueError(f"--num_sub_shards must be positive, got {num_sub_shards}.")
    return _contiguous_split(list(files), num_sub_shards)


def output_file_name(
    out_name: str,
    split: str,
    outer_shard_index: int,
    num_outer_shards: int,
    sub_shard_index: int,
    num_sub_shards: int,
) -> str:
    """e.g. "encoded-train-o00003of00012.tfrecord-00001-of-00004"."""
    base = f"{out_name}-{split}-o{outer_shard_index:05d}of{num_outer_shards:05d}"
    return sharded_io.shard_name(base, sub_shard_index, num_sub_shards)


def default_out_dir(environment: Environments | str, model_name: str) -> str:
    """`<data_dir>/<env folder>/encoded_rollouts/<model name>`."""
    env = Environments.from_name(environment)
    return str(config.env_data_dir(env.folder_name) / "encoded_rollouts" / model_name)


def resolve_out_dir(
    environment: Environments | str, model: str, model_dir: str | None, out_dir: str | None
) -> str:
    """--out_dir, else the default for the saved model `model` (or the model dir's basename)."""
    if out_dir:
        return os.path.abspath(os.path.expanduser(out_dir))
    name = model if model_dir is None else os.path.basename(os.path.normpath(model_dir))
    return default_out_dir(environment, name)


# ---- devices ----------------------------------------------------------------------------------
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


# ---- loading the encoder ----------------------------------------------------------------------
@dataclasses.dataclass
class LoadedEncoder:
    encoder: object
    name: str  # saved_models function name, or the model dir's basename
    description: dict  # goes into dataset_info.json


def load_encoder_for_encoding(
    environment: Environments | str,
    model: str,
    model_dir: str | None = None,
    checkpoint: str | None = None,
    representation_size: int | None = None,
) -> LoadedEncoder:
    """Without `model_dir`: the zoo's encoder `model` (rl755.zoo).

    With `model_dir` (a training run's --model_dir): `model` is the model class name (e.g.
    "vae.Vae"); `representation_size` defaults to the one in the checkpoint's .json;
    `checkpoint` picks a weights file (default: newest complete checkpoint)."""
    from rl755.common import checkpoints
    from rl755.models.common.encoder import ObservationEncoder
    from rl755.models.common.saved_encoders import _checkpoint_info, load_encoder

    env = Environments.from_name(environment)
    if model_dir is None:
        if checkpoint:
            raise ValueError("--checkpoint needs --model_dir (the training run's directory).")
        encoder = zoo.get(env, model, kind=zoo.ENCODER)()
        name = model
        desc = {"saved_model": f"{env.folder_module('models')}.saved_models.{model}"}
    else:
        model_dir = os.path.expanduser(model_dir)
        if representation_size is None:
            path = (
                os.path.join(model_dir, checkpoint)
                if checkpoint and not os.path.isabs(checkpoint)
                else checkpoint or checkpoints.newest_weights_file(model_dir)
            )
            info = _checkpoint_info(path) if path else None
            if not info or "representation_size" not in info:
                raise ValueError(
                    f"Pass --representation_size: no checkpoint .json in {model_dir} says it."
                )
            representation_size = int(info["representation_size"])
        encoder = load_encoder(env, model, model_dir, representation_size, checkpoint=checkpoint)
        name = os.path.basename(os.path.normpath(model_dir))
        desc = {"model": model, "model_dir": os.path.abspath(model_dir)}
    if not isinstance(encoder, ObservationEncoder):
        raise TypeError(f"{model} gave a {type(encoder).__name__}, not an ObservationEncoder.")
    desc["checkpoint"] = getattr(encoder, "checkpoint_path", None)
    desc["class"] = f"{type(encoder).__module__}.{type(encoder).__qualname__}"
    return LoadedEncoder(encoder, name, desc)


# ---- encoding ---------------------------------------------------------------------------------
def make_encode_fn(encoder, observation_shape, batch_size: int):
    """uint8 [T, H, W, C] numpy -> (float32 [T, Z], float32 [T, Z] or None), in batches."""
    import tensorflow as tf

    @tf.function(
        input_signature=[tf.TensorSpec([None, *observation_shape], tf.uint8)],
        reduce_retracing=True,
    )
    def encode_batch(frames):
        rep, extras = encoder.compute_full_representation(frames, training=False)
        std = extras.get("std_devs") if extras else None
        return rep, (std if std is not None else tf.zeros([0, 0]))

    def encode(frames: np.ndarray):
        reps, stds = [], []
        for start in range(0, len(frames), batch_size):
            rep, std = encode_batch(frames[start : start + batch_size])
            reps.append(rep.numpy())
            stds.append(std.numpy())
        std = np.concatenate(stds) if stds[0].size else None
        return np.concatenate(reps).astype(np.float32), std

    return encode


def read_rollouts(files: list[str], environment: Environments):
    """Raw rollouts of `files` in file order, as numpy dicts (parsed in parallel)."""
    import tensorflow as tf

    if not files:
        return
    ds = sharded_io.tfrecord_dataset(files, cycle_length=1, deterministic=True)
    ds = ds.map(
        lambda s: parse_rollout_tensors(
            s, environment.observation_shape, int(environment.action_shape[0])
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    ).prefetch(2)
    yield from ds.as_numpy_iterator()


def encoded_rollout(raw: dict, rep: np.ndarray, std: np.ndarray | None) -> Rollout:
    """The encoded version of a parsed raw rollout (see the module docstring)."""
    return Rollout(
        obs_l=rep,
        action_l=raw["actions"],
        reward_l=raw["rewards"],
        done=bool(raw["done"]),
        obs_std_l=std,
    )


def encode_files_to_tfrecord(encode, files, environment, writer) -> tuple[int, int]:
    """Encodes the rollouts of `files` into `writer`, in order; returns (rollouts, frames).

    Parsing runs ahead in tf.data threads and serializing + writing in a second thread, so
    the encoder (the GPU, when there is one) does not wait for either."""
    pending: collections.deque = collections.deque()
    n_rollouts = n_frames = 0

    def write(raw, rep, std):
        writer.write(encoded_rollout(raw, rep, std).serialize())

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        for raw in read_rollouts(files, environment):
            rep, std = encode(raw["observations"])
            pending.append(pool.submit(write, raw, rep, std))
            n_rollouts += 1
            n_frames += len(rep)
            while len(pending) > 2:
                pending.popleft().result()
        while pending:
            pending.popleft().result()
    return n_rollouts, n_frames


def encode_raw_rollouts(
    environment: Environments | str,
    model: str,
    split: str,
    out_dir: str | None,
    out_name: str,
    num_sub_shards: int,
    num_outer_shards: int = 1,
    outer_shard_index: int = 0,
    gpu_index: int | None = None,
    model_dir: str | None = None,
    checkpoint: str | None = None,
    representation_size: int | None = None,
    batch_size: int = 500,
    compression: str = "",
    rollouts_pattern: str | None = None,
    num_threads: int | None = None,
    run_flags: dict | None = None,
) -> dict:
    """Encodes this instance's outer shard into `num_sub_shards` files; see module docstring.

    Returns {"out_dir", "written": [paths], "skipped": [paths], "rollouts", "frames", "seconds"}.
    """
    tf_setup.limit_threads(num_threads)
    select_gpu(gpu_index)
    env = Environments.from_name(environment)
    compression = sharded_io.normalize_compression(compression)
    if batch_size <= 0:
        raise ValueError(f"--batch_size must be positive, got {batch_size}.")
    from rl755.models.common.train_encoder import raw_rollouts_builder

    builder = raw_rollouts_builder(env, rollouts_pattern)
    try:
        all_files = builder.get_tfrecord_files(split)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{e} Or pass --rollouts_pattern.") from e
    my_files = outer_shard_files(all_files, num_outer_shards, outer_shard_index)
    groups = sub_shard_files(my_files, num_sub_shards)
    loaded = load_encoder_for_encoding(env, model, model_dir, checkpoint, representation_size)
    out_dir = resolve_out_dir(env, model, model_dir, out_dir)
    z = int(loaded.encoder.representation_size)
    info = {
        "environment": env.name,
        "observation_shape": [z],
        "observation_dtype": "float32",
        "dtype": "float32",
        "representation_size": z,
        "action_size": int(env.action_shape[0]),
        "encoder": loaded.description,
        "compression": compression or "none",
        "producer": PRODUCER,
        "out_name": out_name,
        "source_pattern": builder.tfrecords_pattern(),
    }
    encode = make_encode_fn(loaded.encoder, env.observation_shape, batch_size)
    # has_std_devs: one probe frame says whether the encoder gives std devs.
    probe = np.zeros((1, *env.observation_shape), np.uint8)
    info["has_std_devs"] = encode(probe)[1] is not None
    sharded_io.write_dataset_info(
        out_dir,
        info,
        check_keys=[
            "environment",
            "observation_shape",
            "representation_size",
            "action_size",
            "encoder",
            "has_std_devs",
        ],
    )
    result = {
        "out_dir": out_dir,
        "written": [],
        "skipped": [],
        "rollouts": 0,
        "frames": 0,
        "seconds": 0.0,  # reading, encoding and writing the sub shards (not set-up)
    }
    flags = run_flags if run_flags is not None else {"model": model, "split": split}
    with run_record.record_run(out_dir, flags, stage="encode_raw_rollouts"):
        options = None
        for j, group in enumerate(groups):
            name = output_file_name(
                out_name, split, outer_shard_index, num_outer_shards, j, num_sub_shards
            )
            final = os.path.join(out_dir, name)
            if os.path.exists(final):
                logging.info("sub shard %d/%d exists, skipping: %s", j + 1, len(groups), final)
                result["skipped"].append(final)
                continue
            if not group:
                logging.warning(
                    "sub shard %d/%d gets no input files (outer shard %d has %d files for %d "
                    "sub shards); writing an empty file.",
                    j + 1,
                    len(groups),
                    outer_shard_index,
                    len(my_files),
                    num_sub_shards,
                )
            import tensorflow as tf

            options = tf.io.TFRecordOptions(compression_type=compression)
            start = time.time()
            with sharded_io.atomic_output(final) as tmp:
                with tf.io.TFRecordWriter(tmp, options=options) as writer:
                    n_rollouts, n_frames = encode_files_to_tfrecord(encode, group, env, writer)
            secs = time.time() - start
            result["written"].append(final)
            result["rollouts"] += n_rollouts
            result["frames"] += n_frames
            result["seconds"] += secs
            logging.info(
                "sub shard %d/%d: %d rollouts, %d frames from %d files in %.1f s (%.0f frames/s) "
                "-> %s",
                j + 1,
                len(groups),
                n_rollouts,
                n_frames,
                len(group),
                secs,
                n_frames / max(secs, 1e-9),
                final,
            )
    return result


# ---- several instances: one SLURM job's GPUs, a job array's jobs ------------------------------
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
