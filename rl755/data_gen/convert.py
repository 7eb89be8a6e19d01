"""Stage 1b: a directory of pickled rollouts -> train/validation TFRecord shards.

    convert_pickles_to_tfrecords(pickle_dir, out_dir, pickles_per_tfrecord_file=16,
                                 parallelism=4)   # -> <out_dir>/rollouts-train.tfrecord-00003-of-00074

`scripts/data_gen/convert_pickles_to_tfrecords.py` (alias: the original
`scripts/data_gen/car_racing/rollout_pickles_to_tfrecords.py`) is the command-line face of this.
A conversion's shards are a deterministic function of the sorted pickle list and the
arguments; the plan is stored in `<out_dir>/<out_name>.conversion.json`, and a rerun with
different inputs or arguments into the same out_dir/out_name fails instead of mixing data.
Shard names and the sidecar: `rl755.data_gen.shards`.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import multiprocessing
import os
from collections.abc import Iterator, Sequence

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.data_gen.pickles import check_pickle_header, list_pickles, load_rollouts
from rl755.data_gen.shards import (
    SPLITS,
    check_out_dir,
    check_positive,
    chunk,
    dataset_info,
    record_bytes,
    split_shard_name,
    validation_indices,
    write_raw_dataset_info,
)

log = logging.getLogger(__name__)


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
                yield record_bytes(r)

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
            producer="convert_pickles_to_tfrecords",
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

    with run_record.record_run(out_dir, run_flags or {}, stage="convert_pickles_to_tfrecords"):
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
