"""Rollouts to sharded TFRecords: worker-side sinks and the pickles -> TFRecords conversion.

Shard names match the dataset builders' glob `<out_name>-{split}*.tfrecord-*`:

    <out_name>-<split>.tfrecord-00003-of-00074          conversion of a pickle dir
    <out_name>-<split>-<run tag>.tfrecord-00003-of-00012  written straight by collection workers

(split is "train" or "validation"; the run tag keeps concurrent collection instances apart.)
Every shard is written under a hidden temporary name and renamed when complete
(`sharded_io.atomic_output`), so a killed job leaves no partial file under a final name and
a rerun skips the shards that exist. A `dataset_info.json` sidecar describes the directory
(environment, observation_shape, observation_dtype, action_size, compression, producer).

A conversion's shards are a deterministic function of the sorted pickle list and the
arguments; the plan is stored in `<out_dir>/<out_name>.conversion.json`, and a rerun with
different inputs or arguments into the same out_dir/out_name fails instead of mixing data.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import math
import multiprocessing
import os
import pickle
import pickletools
from collections.abc import Iterator, Sequence

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.common.structs import Rollout
from rl755.data_gen.gym_rollouts import RolloutSink, RolloutTask

log = logging.getLogger(__name__)


SPLITS = ("train", "validation")
PICKLE_SUFFIX = ".pickle"
_ROLLOUT_CLASS = ("rl755.common.structs", "Rollout")


# ---- names, plans and the sidecar ----------------------------------------------------------------
def split_shard_name(out_name: str, split: str, index: int, total: int, tag: str = "") -> str:
    """`split_shard_name("rollouts", "train", 3, 74)` -> "rollouts-train.tfrecord-00003-of-00074"."""
    if split not in SPLITS:
        raise BadInput(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
    base = f"{out_name}-{split}" + (f"-{tag}" if tag else "")
    return sharded_io.shard_name(base, index, total)


def validation_indices(n: int, validation_fraction: float) -> set[int]:
    """Which of `n` sorted items go to validation: round(n * fraction) of them (at least one
    if the fraction is positive and n >= 2, never all), evenly spread over the sorted order."""
    if not 0.0 <= validation_fraction < 1.0:
        raise BadInput(f"validation_fraction must be in [0, 1), got {validation_fraction}.")
    if validation_fraction == 0.0 or n < 2:
        return set()
    k = min(n - 1, max(1, round(n * validation_fraction)))
    return {min(n - 1, int((i + 0.5) * n / k)) for i in range(k)}


def chunk(items: Sequence, size: int) -> list[list]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def dataset_info(
    environment: str | None,
    observation_shape: Sequence[int],
    action_size: int,
    compression: str,
    producer: str,
    observation_dtype: str = "uint8",
) -> dict:
    """The `dataset_info.json` content for raw rollouts."""
    return {
        "environment": environment,
        "observation_shape": [int(d) for d in observation_shape],
        "observation_dtype": observation_dtype,
        "action_size": int(action_size),
        "compression": sharded_io.normalize_compression(compression) or "none",
        "producer": producer,
    }


def write_raw_dataset_info(out_dir: str, info: dict) -> None:
    """Writes the sidecar, or checks an existing one describes the same kind of data."""
    keys = ["environment", "observation_shape", "observation_dtype", "action_size"]
    existing = sharded_io.read_dataset_info(out_dir)
    if existing is not None and existing.get("environment") is None:
        keys.remove("environment")
    sharded_io.write_dataset_info(out_dir, info, check_keys=keys)


def check_out_dir(out_dir: str, flag: str = "--out_dir") -> None:
    """Fails fast if `out_dir` is a file or cannot be created."""
    if not out_dir:
        raise BadInput(f"{flag} is empty; pass a directory.")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise BadInput(f"{flag}={out_dir} is a file; pass a directory (it is created if missing).")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise BadInput(f"Cannot create {flag}={out_dir}: {e}. Pass a writable directory.") from e


def check_positive(**values: int) -> None:
    for name, value in values.items():
        if value is None or value <= 0:
            raise BadInput(f"--{name} must be a positive integer, got {value}.")


# ---- sinks (run inside collection workers) -----------------------------------------------------
def _tfrecord_writer(path: str, compression: str):
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type=sharded_io.normalize_compression(compression))
    return tf.io.TFRecordWriter(path, options=options)


class TFRecordShardSink(RolloutSink):
    """Writes each task's rollouts, in order, to the shard `<out_dir>/<task.key>`."""

    def __init__(self, out_dir: str, compression: str = "GZIP"):
        self.out_dir = out_dir
        self.compression = sharded_io.normalize_compression(compression)

    def is_done(self, task: RolloutTask) -> bool:
        return os.path.exists(os.path.join(self.out_dir, task.key))

    def write(self, task: RolloutTask, rollouts: Iterator[Rollout]) -> dict:
        path = os.path.join(self.out_dir, task.key)
        n = frames = 0
        with sharded_io.atomic_output(path) as tmp:
            with _tfrecord_writer(tmp, self.compression) as w:
                for r in rollouts:
                    w.write(r.serialize())
                    n += 1
                    frames += len(r)
        return {"path": path, "rollouts": n, "frames": frames, "bytes": os.path.getsize(path)}


class PickleSink(RolloutSink):
    """Writes each rollout of a task to `<out_dir>/<task.key>` as a pickled `[Rollout]`.

    Tasks have one rollout each (the original project's format: one list per file).
    """

    def __init__(self, out_dir: str):
        self.out_dir = out_dir

    def is_done(self, task: RolloutTask) -> bool:
        return os.path.exists(os.path.join(self.out_dir, task.key))

    def write(self, task: RolloutTask, rollouts: Iterator[Rollout]) -> dict:
        if len(task.items) != 1:
            raise BadInput("PickleSink tasks hold exactly one rollout.")
        path = os.path.join(self.out_dir, task.key)
        frames = nbytes = 0
        for r in rollouts:
            with sharded_io.atomic_output(path) as tmp:
                with open(tmp, "wb") as f:
                    pickle.dump([r], f, protocol=pickle.HIGHEST_PROTOCOL)
            frames += len(r)
            nbytes += os.path.getsize(path)
        return {"path": path, "rollouts": 1, "frames": frames, "bytes": nbytes}


# ---- pickles --------------------------------------------------------------------------------------
def list_pickles(pickle_dir: str) -> list[str]:
    """Sorted paths of the (non-temporary) `*.pickle` files directly in `pickle_dir`."""
    if not pickle_dir:
        raise BadInput("--pickle_dir is empty; pass the directory parallel_rollout_main wrote.")
    if not os.path.exists(pickle_dir):
        raise BadInput(
            f"--pickle_dir={pickle_dir} does not exist. Pass the --out_dir of "
            "parallel_rollout_main.py (--out_format=pickle)."
        )
    if not os.path.isdir(pickle_dir):
        raise BadInput(f"--pickle_dir={pickle_dir} is a file; pass the directory holding it.")
    names = sorted(
        n for n in os.listdir(pickle_dir) if n.endswith(PICKLE_SUFFIX) and not n.startswith(".")
    )
    if not names:
        raise BadInput(
            f"--pickle_dir={pickle_dir} holds no *.pickle files. Collect rollouts first with "
            "scripts/data_gen/car_racing/parallel_rollout_main.py --out_format=pickle "
            f"--out_dir={pickle_dir} (or point --pickle_dir at the right directory)."
        )
    return [os.path.join(pickle_dir, n) for n in names]


def check_pickle_header(path: str, max_ops: int = 64) -> None:
    """Cheaply checks that `path` is a complete pickle of a list starting with a Rollout.

    Reads the first pickle opcodes (a list, then the `rl755.common.structs.Rollout` class) and
    the final STOP byte, without loading the frames. Raises ValueError naming the file.
    """
    what = f"{path} is not a pickled list of Rollouts (as parallel_rollout_main.py writes)"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                raise BadInput(f"{what}: the file is empty. Delete it and rerun.")
            f.seek(size - 1)
            if f.read(1) != b".":
                raise BadInput(f"{what}: it is truncated (no pickle STOP). Delete it and rerun.")
            f.seek(0)
            strings: list[str] = []
            saw_list = False
            for i, (op, arg, _) in enumerate(pickletools.genops(f)):
                if i >= max_ops:
                    break
                if op.name in ("EMPTY_LIST", "LIST"):
                    saw_list = True
                elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
                    strings.append(arg)
                elif op.name in ("GLOBAL", "STACK_GLOBAL", "INST"):
                    if op.name == "STACK_GLOBAL":
                        found = tuple(strings[-2:]) if len(strings) >= 2 else None
                    else:
                        found = tuple(str(arg).split(" ", 1))
                    if not saw_list:
                        raise BadInput(f"{what}: it holds a {found} object, not a list.")
                    if found != _ROLLOUT_CLASS:
                        raise BadInput(f"{what}: its list holds {found}, not a Rollout.")
                    return
                elif op.name == "STOP":
                    break
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - any unreadable pickle is reported the same way
        raise BadInput(f"{what}: {type(e).__name__}: {e}") from e
    if not saw_list:
        raise BadInput(f"{what}: it does not hold a list.")
    raise BadInput(f"{what}: its list holds no Rollout.")


def load_rollouts(path: str) -> list[Rollout]:
    """Loads one pickle and checks it is a non-empty list of valid Rollouts (names the file)."""
    with open(path, "rb") as f:
        try:
            data = pickle.load(f)
        except Exception as e:  # noqa: BLE001
            raise BadInput(f"{path} is not a readable pickle ({type(e).__name__}: {e}).") from e
    if not isinstance(data, list) or not data or not all(isinstance(r, Rollout) for r in data):
        kind = type(data).__name__ if not isinstance(data, list) else "a list of other things"
        raise BadInput(
            f"{path} holds {kind}, not a non-empty list of rl755.common.structs.Rollout. "
            "Remove it from the pickle dir (or regenerate it with parallel_rollout_main.py)."
        )
    for r in data:
        try:
            r.validate()
        except ValueError as e:
            raise BadInput(f"{path} holds an invalid Rollout: {e}") from e
    return data


# ---- conversion ----------------------------------------------------------------------------------
def plan_conversion(
    pickles: Sequence[str],
    out_name: str,
    pickles_per_tfrecord_file: int,
    validation_fraction: float,
) -> dict[str, list[str]]:
    """{shard name: [pickle paths]}, a deterministic function of the sorted pickle list."""
    pickles = sorted(pickles, key=os.path.basename)
    val = validation_indices(len(pickles), validation_fraction)
    by_split = {
        "train": [p for i, p in enumerate(pickles) if i not in val],
        "validation": [p for i, p in enumerate(pickles) if i in val],
    }
    plan: dict[str, list[str]] = {}
    for split, items in by_split.items():
        groups = chunk(items, pickles_per_tfrecord_file)
        for j, group in enumerate(groups):
            plan[split_shard_name(out_name, split, j, len(groups))] = group
    return plan


def _init_worker() -> None:
    from rl755.common import tf_setup

    tf_setup.quiet()
    tf_setup.limit_threads(1)


def convert_shard(
    shard_path: str,
    pickles: Sequence[str],
    compression: str,
    observation_shape: Sequence[int] | None = None,
) -> dict:
    """Writes the rollouts of `pickles`, in order, to one shard (atomically). Returns a summary."""
    frames = rollouts = 0

    def records() -> Iterator[bytes]:
        nonlocal frames, rollouts
        for p in pickles:
            for r in load_rollouts(p):
                shape = tuple(r.obs_l[0].shape)
                if observation_shape is not None and shape != tuple(observation_shape):
                    raise BadInput(
                        f"{p} holds observations of shape {shape}, but the others have "
                        f"{tuple(observation_shape)}; keep one environment per pickle dir."
                    )
                frames += len(r)
                rollouts += 1
                yield r.serialize()

    sharded_io.write_tfrecord(shard_path, records(), compression)
    return {
        "path": shard_path,
        "rollouts": rollouts,
        "frames": frames,
        "bytes": os.path.getsize(shard_path),
    }


def _manifest_path(out_dir: str, out_name: str) -> str:
    return os.path.join(out_dir, f"{out_name}.conversion.json")


def _check_manifest(out_dir: str, out_name: str, manifest: dict) -> None:
    path = _manifest_path(out_dir, out_name)
    if os.path.exists(path):
        with open(path) as f:
            existing = json.load(f)
        started = [
            n for n in existing.get("shards", {}) if os.path.exists(os.path.join(out_dir, n))
        ]
        if existing != manifest and started:
            raise BadInput(
                f"{out_dir} already holds a conversion named {out_name!r} of other pickles or "
                f"with other arguments (see {path}). Rerun with the same arguments to finish "
                f"it, or pass another --out_dir or --out_name (or delete {path} and its shards)."
            )
        if existing == manifest:
            return
    planned = set(manifest["shards"])
    stray = sorted(
        os.path.basename(p)
        for split in SPLITS
        for p in sharded_io.list_shards(os.path.join(out_dir, f"{out_name}-{split}.tfrecord-*"))
        if os.path.basename(p) not in planned
    )
    if stray:
        raise BadInput(
            f"{out_dir} already holds shards named {out_name!r} from another conversion "
            f"({', '.join(stray[:3])}{', ...' if len(stray) > 3 else ''}). Pass another "
            "--out_dir or --out_name, or delete them."
        )
    sharded_io.write_json_atomic(path, manifest)


def convert_pickles_to_tfrecords(
    pickle_dir: str,
    out_dir: str,
    out_name: str = "rollouts",
    pickles_per_tfrecord_file: int = 16,
    parallelism: int = 1,
    compression: str = "GZIP",
    validation_fraction: float = 0.05,
    progress: bool = True,
    run_flags: dict | None = None,
) -> dict:
    """Converts every `*.pickle` in `pickle_dir` into train/validation TFRecord shards.

    Checks everything cheaply before converting (counts, directories, every pickle's header),
    skips shards that already exist (a rerun finishes a killed conversion), writes each shard
    atomically, and records the run (`run_flags`) in `<out_dir>/runs/`. Returns a summary:
    {"shards", "written", "skipped", "rollouts", "frames", "bytes", "out_dir"}.
    """
    check_positive(parallelism=parallelism, pickles_per_tfrecord_file=pickles_per_tfrecord_file)
    compression = sharded_io.normalize_compression(compression)
    if not out_name or os.sep in out_name or out_name.startswith("."):
        raise BadInput(f"--out_name={out_name!r} must be a plain, non-hidden file name prefix.")
    pickles = list_pickles(pickle_dir)
    if os.path.abspath(out_dir) == os.path.abspath(pickle_dir):
        raise BadInput("--out_dir must differ from --pickle_dir.")
    check_out_dir(out_dir)
    for p in pickles:
        check_pickle_header(p)
    plan = plan_conversion(pickles, out_name, pickles_per_tfrecord_file, validation_fraction)
    first = load_rollouts(pickles[0])[0]
    observation_shape = tuple(int(d) for d in first.obs_l[0].shape)
    environment = first.metadata.get("environment") if first.metadata else None
    manifest = {
        "compression": compression or "none",
        "pickles_per_tfrecord_file": pickles_per_tfrecord_file,
        "validation_fraction": validation_fraction,
        "shards": {name: [os.path.basename(p) for p in group] for name, group in plan.items()},
    }
    _check_manifest(out_dir, out_name, manifest)
    write_raw_dataset_info(
        out_dir,
        dataset_info(
            environment,
            observation_shape,
            len(first.action_l[0]),
            compression,
            producer="rollout_pickles_to_tfrecords",
            observation_dtype=str(first.obs_l[0].dtype),
        ),
    )
    todo = [n for n in plan if not os.path.exists(os.path.join(out_dir, n))]
    summary = {"out_dir": out_dir, "shards": len(plan), "skipped": len(plan) - len(todo)}
    if summary["skipped"]:
        log.info(
            "%d of %d shards exist already; converting the rest.", summary["skipped"], len(plan)
        )
    from rl755.common import run_record

    with run_record.record_run(out_dir, run_flags or {}, stage="rollout_pickles_to_tfrecords"):
        results = _run_conversion(
            [(os.path.join(out_dir, n), plan[n]) for n in todo],
            compression,
            observation_shape,
            parallelism,
            progress,
        )
    summary.update(
        written=len(results),
        rollouts=sum(r["rollouts"] for r in results),
        frames=sum(r["frames"] for r in results),
        bytes=sum(r["bytes"] for r in results),
    )
    return summary


def _run_conversion(jobs, compression, observation_shape, parallelism, progress) -> list[dict]:
    from tqdm.auto import tqdm

    results = []
    bar = tqdm(total=len(jobs), unit="shard", desc="shards", disable=not progress)
    try:
        if parallelism == 1 or len(jobs) <= 1:
            for path, group in jobs:
                results.append(convert_shard(path, group, compression, observation_shape))
                bar.update(1)
            return results
        # Workers fork from a server that imported this module (and TensorFlow) once, so
        # `parallelism` workers cost one import; the server runs no TF ops before forking.
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(parallelism, len(jobs)), mp_context=ctx, initializer=_init_worker
        ) as pool:
            futures = [
                pool.submit(convert_shard, path, group, compression, observation_shape)
                for path, group in jobs
            ]
            try:
                for fut in concurrent.futures.as_completed(futures):
                    results.append(fut.result())
                    bar.update(1)
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
        return results
    finally:
        bar.close()


def default_rollouts_per_shard(num_rollouts: int) -> int:
    """Rollouts per shard when unspecified: at least ~64 shards (tasks), at most 16 rollouts each.

    Independent of the parallelism, so a rerun with another --parallelism resumes the same shards.
    """
    return max(1, min(16, math.ceil(num_rollouts / 64)))
