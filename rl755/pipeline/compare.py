"""Two pipeline runs compared stage by stage: where do they first differ, and by how much?

    from rl755.pipeline import compare
    diffs = compare.compare_runs("runs/A", "runs/B", PRESETS["tiny"])
    print(compare.format_diffs(diffs))       # one row per stage: identical, or what differs
    compare.first_difference(diffs)          # the first stage whose outputs differ, or None

`python scripts/compare_runs.py runs/A runs/B --preset=tiny` prints the same table. Each
stage's outputs (`rl755.pipeline.stages.Paths`) are compared by content, never by bytes of
files that hold times (run records, TensorBoard, pictures):

    collect            raw rollout shards: every record (frames, actions, rewards)
    train_encoder      every checkpoint's weights (.weights.h5, optimizer state included)
    encode             encoded rollout shards: every record (means and std devs)
    train_sequential   every checkpoint's weights and optimizer state
    train_controller   controller_params.npy, the CMA-ES checkpoints' parameters, the
                       per-generation fitness (summary.json)
    evaluate           evaluation.json: returns and steps of the controller and random policy

A stage that differs is reported with its first differing file, the array in it and the
largest absolute difference, so a run that is not bit for bit repeatable says *where* it
breaks: the first differing stage is the source (the later ones inherit its difference).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os

import numpy as np

from rl755.environments import Environments
from rl755.pipeline.presets import Preset
from rl755.pipeline.stages import Paths

STAGES = (
    "collect",
    "train_encoder",
    "encode",
    "train_sequential",
    "train_controller",
    "evaluate",
)


@dataclasses.dataclass
class StageDiff:
    """How one stage's outputs compare. `identical` is None when neither run has them."""

    stage: str
    identical: bool | None
    files: int = 0
    detail: str = ""
    max_abs_diff: float = 0.0


# ---- comparing values ---------------------------------------------------------------------------
def _array_diff(a, b) -> float | None:
    """None when equal (bit for bit, NaNs equal), else the largest |a - b| (inf: shapes/dtypes)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return float("inf")
    if a.dtype.kind in "fc":
        if np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)):
            return None
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(a.astype(np.float64) - b.astype(np.float64))
        d = np.where(np.isnan(d), np.inf, d)
        return float(d.max())  # not empty: empty arrays are equal
    if np.array_equal(a, b):
        return None
    if a.dtype.kind in "iub":
        return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
    return float("inf")


def _h5_arrays(path: str) -> dict[str, np.ndarray]:
    import h5py

    out = {}
    with h5py.File(path, "r") as f:

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[()]

        f.visititems(visit)
    return out


def _npz_arrays(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _tfrecord_arrays(path: str) -> dict[str, np.ndarray]:
    """Every rollout record of a shard as arrays: "<i>/observations", "<i>/actions", ..."""
    import tensorflow as tf

    from rl755.common import sharded_io
    from rl755.common.structs import Rollout

    out = {}
    n = 0
    ds = tf.data.TFRecordDataset(path, compression_type=sharded_io.detect_compression(path))
    for i, record in enumerate(ds.as_numpy_iterator()):
        n += 1
        r = Rollout.from_sequence_example(record)
        out[f"{i}/observations"] = np.stack(r.obs_l)
        out[f"{i}/actions"] = np.stack(r.action_l)
        out[f"{i}/rewards"] = np.asarray(r.reward_l)
        out[f"{i}/done"] = np.asarray(r.done)
        if r.obs_std_l is not None:
            out[f"{i}/observation_std_devs"] = np.stack(r.obs_std_l)
    out["num_records"] = np.asarray(n)
    return out


def _json_arrays(path: str, keys) -> dict[str, np.ndarray]:
    """The numbers under `keys` (dotted paths; "*" maps over a list) of a JSON file."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for key in keys:
        value = [data]
        for part in key.split("."):
            nxt = []
            for v in value:
                if part == "*" and isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict) and part in v:
                    nxt.append(v[part])
            value = nxt
        out[key] = np.asarray(value, dtype=np.float64)
    return out


def _file_arrays(path: str) -> dict[str, np.ndarray]:
    name = os.path.basename(path)
    if name.endswith(".h5"):
        return _h5_arrays(path)
    if name.endswith(".npz"):
        return _npz_arrays(path)
    if name.endswith(".npy"):
        return {"": np.load(path, allow_pickle=False)}
    if ".tfrecord" in name:
        return _tfrecord_arrays(path)
    if name == "evaluation.json":
        keys = ("returns", "steps", "seeds", "random_policy.returns", "random_policy.steps")
        return _json_arrays(path, keys)
    if name == "summary.json":  # CMA-ES: per-generation fitness (not the timings)
        keys = ("history.*.mean", "history.*.best", "history.*.worst", "history.*.sigma")
        return _json_arrays(path, keys + ("evals.*.mean", "best_fitness"))
    if name.endswith(".json"):  # checkpoint markers: the losses they record
        keys = ("step", "train_loss", "validation_loss", "best_fitness")
        return _json_arrays(path, keys)
    raise ValueError(f"No comparison for {path}.")


def compare_files(path_a: str, path_b: str) -> tuple[str, float] | None:
    """None when the two files hold the same content, else (what differs, largest |diff|)."""
    arrays_a, arrays_b = _file_arrays(path_a), _file_arrays(path_b)
    if sorted(arrays_a) != sorted(arrays_b):
        only = sorted(set(arrays_a) ^ set(arrays_b))
        return f"different entries ({', '.join(only[:3])}...)", float("inf")
    worst = None
    for key in sorted(arrays_a):
        d = _array_diff(arrays_a[key], arrays_b[key])
        if d is not None and (worst is None or d > worst[1]):
            worst = (key, d)
    return worst


# ---- the stages ---------------------------------------------------------------------------------
def stage_files(preset: Preset, out_dir: str) -> dict[str, list[str]]:
    """{stage: the files (relative to out_dir) whose content is the stage's output}."""
    paths = Paths(os.path.abspath(out_dir), Environments.from_name(preset.environment))

    def listed(directory: str, *patterns: str) -> list[str]:
        found = set()
        for pattern in patterns:
            for path in glob.glob(os.path.join(directory, pattern)):
                if not os.path.basename(path).startswith("."):
                    found.add(os.path.relpath(path, paths.out_dir))
        return sorted(found)

    return {
        "collect": listed(paths.raw_dir, "*.tfrecord-*"),
        "train_encoder": listed(paths.model_dir(preset.encoder_name), "model-*.h5", "model-*.json"),
        "encode": listed(paths.encoded_dir(preset.encoder_name), "*.tfrecord-*"),
        "train_sequential": listed(
            paths.model_dir(preset.sequential_name), "model-*.h5", "model-*.npz", "model-*.json"
        ),
        "train_controller": listed(
            paths.model_dir(preset.controller_name),
            "controller_params.npy",
            "model-*.params.npz",
            "summary.json",
        ),
        "evaluate": listed(paths.evaluation_dir, "evaluation.json"),
    }


def compare_stage(stage: str, out_a: str, out_b: str, files_a: list, files_b: list) -> StageDiff:
    if not files_a and not files_b:
        return StageDiff(stage, None, 0, "no outputs in either run")
    if files_a != files_b:
        only_a = sorted(set(files_a) - set(files_b))
        only_b = sorted(set(files_b) - set(files_a))
        parts = [
            f"{len(o)} files only in run {n} (e.g. {o[0]})"
            for n, o in (("A", only_a), ("B", only_b))
            if o
        ]
        return StageDiff(stage, False, len(files_a), "; ".join(parts), float("inf"))
    worst = None
    for rel in sorted(files_a, key=lambda f: (f.endswith(".json"), f)):  # markers last
        diff = compare_files(os.path.join(out_a, rel), os.path.join(out_b, rel))
        if diff is not None:
            if worst is None:
                worst = (rel, *diff)
            elif diff[1] > worst[2]:
                worst = (worst[0], worst[1], diff[1])
    if worst is None:
        return StageDiff(stage, True, len(files_a), "identical")
    rel, key, _ = worst
    detail = f"first differing file {rel}" + (f" [{key}]" if key else "")
    return StageDiff(stage, False, len(files_a), detail, worst[2])


def compare_runs(out_a: str, out_b: str, preset: Preset) -> list[StageDiff]:
    """Every stage's outputs of two runs of `preset`, compared (see the module docstring)."""
    files_a, files_b = stage_files(preset, out_a), stage_files(preset, out_b)
    return [compare_stage(s, out_a, out_b, files_a[s], files_b[s]) for s in STAGES]


def first_difference(diffs: list[StageDiff]) -> StageDiff | None:
    """The first stage whose outputs differ (the source of the difference), or None."""
    return next((d for d in diffs if d.identical is False), None)


def format_diffs(diffs: list[StageDiff]) -> str:
    rows = [("stage", "files", "outputs", "max |diff|")]
    for d in diffs:
        state = {True: "identical", False: "DIFFER", None: "-"}[d.identical]
        what = state if d.identical is not False else f"{state}: {d.detail}"
        rows.append(
            (d.stage, str(d.files), what, f"{d.max_abs_diff:.6g}" if d.max_abs_diff else "")
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
