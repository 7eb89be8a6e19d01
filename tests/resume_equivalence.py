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

What is compared with the uninterrupted run: tests/output_comparison.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from output_comparison import compare_outputs

from rl755.common import run_record


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


def _evaluate(root: Path, out: Path):
    import numpy as np
    from controller_helpers import exact_spec

    from rl755.controller.evaluate import score_controller

    params = np.random.default_rng(5).normal(0, 1, 21).astype(np.float32)
    flags = {"num_episodes": 5, "seed": 40}
    # One episode a batch: the middle kill point falls between episodes (after episode 4).
    with run_record.record_run(str(out), flags, stage="evaluate_controller"):
        return score_controller(
            params, exact_spec(), num_episodes=5, seed=40, max_steps=12, envs_at_once=1,
            out_dir=str(out), compare_random=True,
        )  # fmt: skip


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
    ResumableStage("evaluation", _nothing, _evaluate),
]
