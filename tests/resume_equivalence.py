"""Resume equivalence: a stage killed at any moment, then run again with the same command,
ends exactly where an uninterrupted run with the same seed ends.

    from resume_equivalence import STAGES, check_resume_equivalence

    @pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
    def test_resume_equals_an_uninterrupted_run(stage, tmp_path):
        check_resume_equivalence(stage, tmp_path)

A stage is a `ResumableStage`: `prepare(root)` writes its inputs, `run(root, out)` runs it
into `out` (the same command every time). A new resumable stage gets the test by adding one
entry to STAGES.

How the kills are made: every output of a stage is published temp-then-rename (`os.replace`).
The uninterrupted run is watched, and at chosen renames into its output directory the
directory is copied as it stands: what a SIGKILL at that instant leaves on disk (a run
record still "running", temporary files of writers in flight, a checkpoint's weights without
its marker). The points: the first rename (the run record), the first checkpoint file that
is not its marker (between a checkpoint's files), the first marker, the middle one and the
last one. Each copy is then put back in the output directory, its temporary files made to
look like a dead process's (another pid, idle for minutes), and the stage is run again.

What is compared with the uninterrupted run, as a user reads it: the same files (no
temporary file left behind); every array of every `.h5` (weights, and the optimizer's
state of a compiled model), `.npz` and `.npy` exactly; JSON files (checkpoint markers,
dataset_info.json, controller.json, summaries) equal but for wall-clock keys; TFRecord shards
record by record; other files byte for byte; TensorBoard: per tag, every value ever written
at a step (the killed run's too) equals the uninterrupted run's value there, and the same
steps exist; run records: the last one completed with the same flags and results, the
killed runs' records left "running".
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import shutil
import time
from collections.abc import Callable
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


@dataclasses.dataclass(frozen=True)
class ResumableStage:
    """name: test id; prepare(root): writes the inputs under root; run(root, out): the stage's
    command, writing into out; ignore: relative paths (globs) not compared (e.g. a plot);
    new_draws: why a resumed run draws other random numbers than the uninterrupted one (None:
    it does not). Such a stage is compared by structure (the same files, keys, array shapes,
    TensorBoard steps, run records), not by value (see `check_resume_equivalence`)."""

    name: str
    prepare: Callable[[Path], None]
    run: Callable[[Path, Path], object]
    ignore: tuple[str, ...] = ()
    new_draws: str | None = None


# ------------------------------------------------------------------ watching and killing
def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


def _as_killed(out: Path) -> None:
    """Temporary files of `out` as a killed writer leaves them: another (dead) pid, idle for
    ten minutes, so that the next run's `remove_stale_tmp_files` may take them."""
    dead, old = _dead_pid(), time.time() - 600
    for path in out.rglob(".*.tmp-*"):
        name = re.sub(r"(\.tmp-.+-)\d+(-[0-9a-f]{8})", rf"\g<1>{dead}\g<2>", path.name)
        target = path.with_name(name)
        path.rename(target)
        os.utime(target, (old, old))


def _kill_points(published: list[str]) -> list[int]:
    """Indexes (into the renames) after which the copies are taken; see the module."""
    ckpt_file = re.compile(r"(^|/)model-\d+\.(?!json$)[^/]+$")
    marker = re.compile(r"(^|/)model-\d+\.json$")
    points = {0, len(published) // 2, len(published) - 1}
    for pattern in (ckpt_file, marker):
        points.update([i for i, p in enumerate(published) if pattern.search(p)][:1])
    return sorted(p for p in points if 0 <= p < len(published))


def run_watched(stage: ResumableStage, root: Path, out: Path, snapshots: Path) -> list[str]:
    """Runs the stage once; copies `out` after every rename into it (snapshots/<i>); returns
    the renamed paths, relative to out, in order."""
    published: list[str] = []
    real_replace = os.replace
    out_abs = os.path.abspath(out)

    def replace(src, dst, *args, **kwargs):
        real_replace(src, dst, *args, **kwargs)
        dst = os.path.abspath(os.fspath(dst))
        if dst.startswith(out_abs + os.sep):
            shutil.copytree(out, snapshots / str(len(published)), symlinks=True)
            published.append(os.path.relpath(dst, out_abs))

    os.replace = replace
    try:
        stage.run(root, out)
    finally:
        os.replace = real_replace
    return published


def check_resume_equivalence(stage: ResumableStage, tmp_path: Path) -> list[str]:
    """Asserts the property for `stage` (see module); returns the kill points' file names.

    A stage with `new_draws` is held to the same files, keys, shapes, steps and run records;
    and since its values are known to differ after some kill, it fails once they no longer
    do, so that its `new_draws` is removed and the values are held too."""
    root = tmp_path / "root"
    root.mkdir()
    stage.prepare(root)
    out, snapshots, reference = root / "out", tmp_path / "snapshots", tmp_path / "reference"
    published = run_watched(stage, root, out, snapshots)
    assert published, f"{stage.name} published no file through os.replace"
    os.rename(out, reference)
    points = _kill_points(published)
    value_differences = []
    for i in points:
        shutil.copytree(snapshots / str(i), out, symlinks=True)
        _as_killed(out)
        stage.run(root, out)
        where = f"{stage.name} killed after publishing {published[i]} (rename {i + 1})"
        compare_outputs(reference, out, stage.ignore, where, exact=stage.new_draws is None)
        if stage.new_draws:
            try:
                compare_outputs(reference, out, stage.ignore, where, exact=True)
            except AssertionError as e:
                value_differences.append(str(e).splitlines()[0])
        shutil.rmtree(out)
    if stage.new_draws:
        assert value_differences, (
            f"{stage.name} now resumes value for value: remove its new_draws "
            f"({stage.new_draws!r}) in tests/resume_equivalence.py"
        )
    return [published[i] for i in points]


# ------------------------------------------------------------------ comparing
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


# ------------------------------------------------------------------ the stages
def _raw_rollouts(root: Path) -> None:
    from encoder_helpers import write_raw_rollouts

    write_raw_rollouts(root / "raw", "train", num_files=2, per_file=2, seed=1)
    write_raw_rollouts(root / "raw", "validation", num_files=1, per_file=1, seed=2)


def _train_encoder(root: Path, out: Path):
    from encoder_helpers import pattern

    from rl755.models.encoders.train import train_obs_encoder

    flags = dict(train_steps=4, batch_size=8, representation_size=4, save_every_n_steps=2)
    return train_obs_encoder(
        model_dir=str(out), environment="FAKE_PIXELS", model="vae.Vae",
        obs_sampled_per_rollout=4, learning_rate=3e-3, validation_steps=1,
        rollouts_pattern=pattern(root / "raw"), run_flags=flags, seed=5, **flags,
    )  # fmt: skip


def _raw_rollouts_and_encoder(root: Path) -> None:
    from encoder_helpers import save_untrained_vae

    _raw_rollouts(root)
    save_untrained_vae(root / "vae", representation_size=4, seed=4)


def _encode(root: Path, out: Path):
    from encoder_helpers import pattern

    from rl755.data_gen import encode

    return encode.encode_raw_rollouts(
        "FAKE_PIXELS", "vae.Vae", "train", str(out), "encoded", num_sub_shards=3,
        model_dir=str(root / "vae"), rollouts_pattern=pattern(root / "raw"),
    )  # fmt: skip


def _encoded_rollouts(root: Path) -> None:
    from sequential_helpers import write_encoded_dataset

    from rl755.common import config

    write_encoded_dataset(config.env_data_dir("fake") / "encoded_rollouts" / "vae")


def _train_sequential(root: Path, out: Path):
    from sequential_helpers import train_tiny

    return train_tiny(out, 4, "mdn_rnn.mdn_rnn_with_heads")


def _nothing(root: Path) -> None:
    pass


def _train_controller(mode: str):
    def run(root: Path, out: Path):
        from rl755.controller.agent import AgentSpec
        from rl755.controller.cma_train import CmaConfig, run_cma_es
        from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

        spec = AgentSpec(
            "FAKE_PIXELS", "LinearController", encoder_fn=FakeLatentEncoder,
            sequential_model_fn=FakeDynamicsModel, encoder_name="FakeLatentEncoder",
            sequential_model_name="FakeDynamicsModel",
        )  # fmt: skip
        cfg = CmaConfig(
            mode=mode, population_size=4, trials_per_member=2, generations=4,
            rollout_max_steps=16, sigma=0.5, seed=3, eval_every=2, eval_episodes=2,
            dream_initial_states=4, temperature=1.15 if mode == "dream" else 1.0,
        )  # fmt: skip
        flags = {"mode": mode, "generations": 4, "seed": 3}
        # as train_controller does, without resolving zoo names
        with run_record.record_run(str(out), flags, stage="train_controller"):
            return run_cma_es(spec, str(out), cfg, hparams=flags)

    return run


def _collect(out_format: str):
    def run(root: Path, out: Path):
        from rl755.data_gen import collect

        shards = {"rollouts_per_shard": 2} if out_format == "tfrecord" else {}
        return collect.collect_rollouts(
            "FAKE_PIXELS", "RandomPolicy", num_rollouts=5, parallelism=1, max_steps=20,
            out_dir=str(out), out_format=out_format, seed=2, validation_fraction=0.2,
            progress=False, **shards,
        )  # fmt: skip

    return run


# The controller's learning curve has a panel against the hours spent: wall clock.
CURVE = ("learning_curve.png",)

# One line per resumable stage.
STAGES = [
    ResumableStage("encoder_training", _raw_rollouts, _train_encoder),
    ResumableStage("encoding", _raw_rollouts_and_encoder, _encode),
    ResumableStage("sequential_training", _encoded_rollouts, _train_sequential),
    ResumableStage("controller_real", _nothing, _train_controller("real"), CURVE),
    ResumableStage("controller_dream", _nothing, _train_controller("dream"), CURVE),
    ResumableStage("collection_pickle", _nothing, _collect("pickle")),
    ResumableStage("collection_tfrecord", _nothing, _collect("tfrecord")),
]
