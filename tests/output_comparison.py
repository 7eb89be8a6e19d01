"""Comparing two output directories as a user reads them (tests/resume_equivalence.py).

What is compared, as a user reads it: the same files (no
temporary file left behind); every array of every `.h5` (weights, and the optimizer's
state of a compiled model), `.npz` and `.npy` exactly; JSON files (checkpoint markers,
dataset_info.json, controller.json, summaries) equal but for wall-clock keys; TFRecord shards
record by record; other files byte for byte; TensorBoard: per tag, every value ever written
at a step (the killed run's too) equals the uninterrupted run's value there, and the same
steps exist; run records: the last one completed with the same flags and results, the
killed runs' records left "running".
"""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np

from rl755.common import run_record, sharded_io, tensorboard

# Keys whose values are wall-clock measurements or about the process, not the result.
VOLATILE_KEYS = {
    "seconds",
    "elapsed",
    "time",
    "start_time",
    "end_time",
    "submit_time",
    "saved_at",
    "steps_per_s",
    "steps_per_second",
    "sequences_per_second",
    "eval_seconds",
    "pid",
    "argv",
    "removed_stale_tmp_files",
    "record_path",
    "git",  # the checkout's state when the run started, not the run's result
}
VOLATILE_TAGS = ("perf/", tensorboard.HPARAMS_TAG)  # speeds; the flags table is per run


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _files(directory: Path, ignore: tuple[str, ...]) -> set[str]:
    out = set()
    for path in directory.rglob("*"):
        rel = path.relative_to(directory).as_posix()
        if path.is_file() and not any(Path(rel).match(g) for g in ignore):
            out.add(rel)
    return out


def _is_run_record(rel: str) -> bool:
    in_runs = rel.startswith(f"{run_record.RUNS_SUBDIR}/") or f"/{run_record.RUNS_SUBDIR}/" in rel
    return in_runs and not sharded_io.is_tmp_path(rel)


def _h5_arrays(path: Path) -> dict:
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, obj: (
                out.__setitem__(name, np.asarray(obj[()]))
                if isinstance(obj, h5py.Dataset)
                else None
            )
        )
    return out


def _records(path: Path) -> list[bytes]:
    import tensorflow as tf

    ds = tf.data.TFRecordDataset(str(path), compression_type=sharded_io.detect_compression(path))
    return [r.numpy() for r in ds]


def _same_array(a, b, where: str, exact: bool) -> None:
    a, b = np.asarray(a), np.asarray(b)
    if exact:
        np.testing.assert_array_equal(b, a, err_msg=where)
    else:
        assert (a.shape, a.dtype) == (b.shape, b.dtype), f"{where}: {a.shape} != {b.shape}"


def _same_arrays(a: dict, b: dict, where: str, exact: bool) -> None:
    assert sorted(a) == sorted(b), f"{where}: arrays {sorted(a)} != {sorted(b)}"
    for key in a:
        _same_array(a[key], b[key], f"{where}: {key}", exact)


def compare_file(ref: Path, got: Path, where: str, exact: bool = True) -> None:
    name = ref.name
    if name.endswith(".h5"):
        _same_arrays(_h5_arrays(ref), _h5_arrays(got), where, exact)
    elif name.endswith(".npz"):
        with np.load(ref, allow_pickle=False) as a, np.load(got, allow_pickle=False) as b:
            _same_arrays(dict(a), dict(b), where, exact)
    elif name.endswith(".npy"):
        _same_array(np.load(ref), np.load(got), where, exact)
    elif name.endswith(".json"):
        a, b = (_strip(json.loads(p.read_text())) for p in (ref, got))
        _same_json(a, b, where, exact)
    elif ".tfrecord" in name:
        a, b = _records(ref), _records(got)
        assert (a == b) if exact else (len(a) == len(b)), where
    elif name.endswith(".pkl"):
        import pickle

        with open(ref, "rb") as a, open(got, "rb") as b:
            _same_object(pickle.load(a), pickle.load(b), where, set(), exact)
    elif exact:
        assert got.read_bytes() == ref.read_bytes(), where


def _same_json(a, b, where: str, exact: bool) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert sorted(a) == sorted(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            _same_json(a[k], b[k], f"{where}.{k}", exact)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            _same_json(x, y, f"{where}[{i}]", exact)
    else:
        _assert_same_value(b, a, where, exact)


def _same_object(a, b, where: str, seen: set, exact: bool) -> None:
    """Pickled state (e.g. CMA-ES's) compared attribute by attribute, but for its timers."""
    if id(a) in seen:
        return
    seen.add(id(a))
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, np.ndarray):
        _same_array(a, b, where, exact)
    elif isinstance(a, dict) or (hasattr(a, "__dict__") and not isinstance(a, type)):
        da, db = (a, b) if isinstance(a, dict) else (vars(a), vars(b))
        assert sorted(map(str, da)) == sorted(map(str, db)), where
        for k in da:
            if "time" not in str(k) and "timer" not in str(k):
                _same_object(da[k], db[k], f"{where}.{k}", seen, exact)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same_object(x, y, f"{where}[{i}]", seen, exact)
    elif not callable(a):
        _assert_same_value(b, a, where, exact)


def _tensorboard_values(directory: Path) -> dict:
    """{split dir: {tag: {step: [values written there]}}} without the volatile tags."""
    out = {}
    for tb_dir in tensorboard.tensorboard_dirs(str(directory)):
        tags = {}
        for tag, points in tensorboard.read_dir(tb_dir).items():
            if tag.startswith(VOLATILE_TAGS):
                continue
            for step, value in points:
                tags.setdefault(tag, {}).setdefault(step, []).append(value)
        out[os.path.relpath(tb_dir, directory)] = tags
    return out


def compare_tensorboard(reference: Path, resumed: Path, where: str, exact: bool = True) -> None:
    ref, got = _tensorboard_values(reference), _tensorboard_values(resumed)
    assert sorted(got) == sorted(ref), f"{where}: TensorBoard dirs"
    for split, tags in ref.items():
        assert sorted(got[split]) == sorted(tags), f"{where}: {split} tags"
        for tag, steps in tags.items():
            seen = got[split][tag]
            assert sorted(seen) == sorted(steps), f"{where}: {split} {tag} steps"
            for step, values in steps.items():
                (value,) = values
                for other in seen[step]:
                    _assert_same_value(other, value, f"{where}: {split} {tag} step {step}", exact)


def _assert_same_value(got, expected, where: str, exact: bool = True) -> None:
    if isinstance(expected, float):
        if exact:
            assert got == expected or (np.isnan(got) and np.isnan(expected)), (where, got, expected)
        else:
            assert isinstance(got, float), (where, got, expected)
    elif isinstance(expected, bytes) and not exact:  # a picture's encoded bytes
        assert isinstance(got, bytes), where
    else:
        assert got == expected, (where, got, expected)


def compare_run_records(reference: Path, resumed: Path, where: str, exact: bool = True) -> None:
    for runs in sorted(glob.glob(str(reference / "**" / run_record.RUNS_SUBDIR), recursive=True)):
        rel = os.path.relpath(runs, reference)
        (ref,) = run_record.read_records(runs)
        got = run_record.read_records(str(resumed / rel))
        assert got and got[-1]["status"] == "completed", f"{where}: {rel} {got}"
        assert {r["status"] for r in got[:-1]} <= {"running", "completed"}, f"{where}: {rel}"
        _same_json(_strip(ref), _strip(got[-1]), f"{where}: {rel} last run record", exact)


def compare_outputs(
    reference: Path, resumed: Path, ignore: tuple[str, ...], where: str, exact: bool = True
) -> None:
    """Asserts that `resumed` holds what `reference` holds, as a user reads it (see module)."""
    skip = (*ignore, f"**/{tensorboard.EVENT_GLOB}", tensorboard.EVENT_GLOB)
    ref_files = {f for f in _files(reference, skip) if not _is_run_record(f)}
    got_files = {f for f in _files(resumed, skip) if not _is_run_record(f)}
    assert (
        got_files == ref_files
    ), f"{where}: extra {sorted(got_files - ref_files)}, missing {sorted(ref_files - got_files)}"
    for rel in sorted(ref_files):
        compare_file(reference / rel, resumed / rel, f"{where}: {rel}", exact)
    compare_tensorboard(reference, resumed, where, exact)
    compare_run_records(reference, resumed, where, exact)
