"""Stage 3: re-encode raw rollouts with a trained `ObservationEncoder`, sharded across
processes, GPUs and SLURM jobs (scripts/data_gen/encode_raw_rollouts.py; all instances of a
job at once: rl755.data_gen.encode_instances, scripts/data_gen/encode_raw_rollouts_multi.py).

Work split (rl755.data_gen.encode_shards). The sorted raw shard files of a split are cut into `num_outer_shards` contiguous
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

Before loading the encoder, each of the instance's input shards is checked to read to the end
(rl755.common.shard_checks): a truncated or damaged file fails naming it and the finder script,
before any output. A damaged record met while encoding fails the same way, naming the file; a
run that fails before any output shard leaves only its failed run record.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import os
import time

import numpy as np
from absl import logging

from rl755 import zoo
from rl755.common import determinism, devices, run_record, shard_checks, sharded_io, tf_setup
from rl755.common.errors import BadInput, MissingData
from rl755.common.results import Result
from rl755.common.structs import Rollout, parse_rollout_tensors
from rl755.data_gen.encode_shards import (
    outer_shard_files,
    output_file_name,
    resolve_out_dir,
    sub_shard_files,
)
from rl755.environments import Environments

PRODUCER = "scripts/data_gen/encode_raw_rollouts.py"


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
    from rl755.models.encoders.saved import _checkpoint_info, load_encoder

    env = Environments.from_name(environment)
    if model_dir is None:
        if checkpoint:
            raise ValueError("--checkpoint needs --model_dir (the training run's directory).")
        encoder = zoo.get(env, model, kind=zoo.ENCODER)()
        name = model
        desc = {"saved_model": f"{env.folder_module('models')}.saved_models.{model}"}
    else:
        model_dir = os.path.expanduser(model_dir)
        if not os.path.isdir(model_dir):
            raise BadInput(
                f"--model_dir {model_dir} does not exist: pass the --model_dir of a "
                "scripts/models/train_obs_encoder.py run (or --model=<a zoo encoder> without it)."
            )
        if representation_size is None:
            path = (
                os.path.join(model_dir, checkpoint)
                if checkpoint and not os.path.isabs(checkpoint)
                else checkpoint or checkpoints.newest_weights_file(model_dir)
            )
            info = _checkpoint_info(path) if path else None
            if not info or "representation_size" not in info:
                raise BadInput(
                    f"--model_dir {model_dir} holds no trained checkpoint (model-NNN.json) that "
                    "says its representation size: train the encoder there first "
                    "(scripts/models/train_obs_encoder.py), or pass --representation_size."
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


@contextlib.contextmanager
def _dataset_info_removed_on_failure(out_dir: str, created: bool):
    """A failed instance that wrote dataset_info.json into an empty out_dir takes it back
    (other instances' shards, or their writes in progress, keep it)."""
    try:
        yield
    except BaseException:
        busy = sharded_io.list_shards(os.path.join(out_dir, "*.tfrecord-*")) or [
            n for n in os.listdir(out_dir) if sharded_io.is_tmp_path(n)
        ]
        if created and not busy:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(out_dir, sharded_io.DATASET_INFO))
        raise


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
    deterministic: bool | None = None,
    seed: int = 0,
) -> EncodingSummary:
    """Encodes this instance's outer shard into `num_sub_shards` files; see module docstring.

    Encoding draws no random numbers (posterior means) and reads its files in order;
    `deterministic` and `seed` go to `rl755.common.determinism.configure` all the same.

    Returns an `EncodingSummary` (`summary.written`, `summary.rollouts`, ...).
    """
    tf_setup.limit_threads(num_threads)
    devices.select_gpu(gpu_index)
    determinism.configure(seed, deterministic)
    env = Environments.from_name(environment)
    compression = sharded_io.normalize_compression(compression)
    if batch_size <= 0:
        raise ValueError(f"--batch_size must be positive, got {batch_size}.")
    from rl755.models.encoders.train import raw_rollouts_builder

    builder = raw_rollouts_builder(env, rollouts_pattern)
    try:
        all_files = builder.get_tfrecord_files(split)
    except FileNotFoundError as e:
        raise MissingData(f"{e} Or pass --rollouts_pattern.") from e
    my_files = outer_shard_files(all_files, num_outer_shards, outer_shard_index)
    groups = sub_shard_files(my_files, num_sub_shards)
    pattern = builder.tfrecords_pattern().format(split=split)
    shard_checks.check_shards(my_files, pattern)  # before any compute or output
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
    info_path = os.path.join(out_dir, sharded_io.DATASET_INFO)
    new_info = not os.path.exists(info_path)
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
    with (
        run_record.record_run(out_dir, flags, stage="encode_raw_rollouts"),
        _dataset_info_removed_on_failure(out_dir, new_info),
    ):
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
            with (
                shard_checks.naming_bad_shards(group, pattern),
                sharded_io.atomic_output(final) as tmp,
                tf.io.TFRecordWriter(tmp, options=options) as writer,
            ):
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
    return EncodingSummary(**result)


@dataclasses.dataclass(frozen=True)
class EncodingSummary(Result):
    """What `encode_raw_rollouts` did.

    Attributes:
      out_dir: where the encoded shards are.
      written: the sub shards written by this call.
      skipped: the sub shards that existed already (a resumed run).
      rollouts: rollouts encoded by this call.
      frames: frames encoded by this call.
      seconds: wall time of reading, encoding and writing the sub shards (not set-up).
    """

    out_dir: str
    written: list[str]
    skipped: list[str]
    rollouts: int
    frames: int
    seconds: float
