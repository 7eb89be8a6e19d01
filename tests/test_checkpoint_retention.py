"""Checkpoint retention: every trainer keeps its newest --keep_checkpoints checkpoints plus the
best one (rl755.common.checkpoints), and a run that was pruned along the way still resumes to
exactly the state of an uninterrupted one."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from sequential_helpers import fake_model, fixed_slices

from rl755.common import checkpoints


def _write(d, number, **info):
    def write(path):
        with open(path, "w") as f:
            f.write(str(number))

    return checkpoints.write_checkpoint(str(d), number, {"weights": (".weights.h5", write)}, info)


def test_pruning_keeps_the_newest_and_the_newest_best_and_their_pictures_only(tmp_path):
    for number, loss in enumerate([5.0, 3.0, 4.0, 2.0, 6.0, 7.0, 8.0], start=1):
        best = checkpoints.is_new_best(str(tmp_path), "validation_loss", loss)
        _write(tmp_path, number, validation_loss=loss, best=best)
        (tmp_path / checkpoints.file_name(number, ".reconstructions.png")).write_bytes(b"png")
    assert [c.info["best"] for c in checkpoints.list_complete_checkpoints(str(tmp_path))] == [
        True,
        True,
        False,
        True,
        False,
        False,
        False,
    ]
    assert checkpoints.remove_older_checkpoints(str(tmp_path), keep=2) == [1, 2, 3, 5]
    assert [c.number for c in checkpoints.list_complete_checkpoints(str(tmp_path))] == [4, 6, 7]
    assert sorted(os.listdir(tmp_path)) == [
        checkpoints.file_name(n, suffix)
        for n in (4, 6, 7)
        for suffix in (".json", ".reconstructions.png", ".weights.h5")
    ]
    assert not checkpoints.is_new_best(str(tmp_path), "validation_loss", 2.0)
    assert checkpoints.is_new_best(str(tmp_path), "validation_loss", 1.0)
    assert not checkpoints.is_new_best(str(tmp_path), "validation_loss", None)
    with pytest.raises(ValueError, match="keep_checkpoints must be >= 1"):
        checkpoints.remove_older_checkpoints(str(tmp_path), keep=0)


def _fit(model_dir, steps, keep):
    import tensorflow as tf

    from rl755.models.sequential import loop

    tf.keras.utils.set_random_seed(0)
    return loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        fixed_slices(n=4, length=5),
        model_dir=str(model_dir),
        train_steps=steps,
        batch_size=4,
        learning_rate=1e-2,
        save_every_n_steps=1,
        validation_steps=1,
        keep_checkpoints=keep,
    )


def _state(model_dir):
    """(weights, optimizer variables) of the newest checkpoint, as arrays."""
    from rl755.models.sequential import train as ts

    model = ts.load_trained_model(str(model_dir), fake_model("lstm.deterministic_lstm"))
    newest = checkpoints.newest_complete_checkpoint(str(model_dir))
    with np.load(newest.path("optimizer")) as opt:
        optimizer = [opt[k] for k in sorted(opt.files)]
    return [w.numpy() for w in model.weights], optimizer


@pytest.mark.slow
def test_a_trainer_keeps_its_directory_bounded_and_a_pruned_run_resumes_exactly(tmp_path):
    steps, keep = 12, 2
    everything = _fit(tmp_path / "all", steps, keep=steps)  # nothing pruned: the reference
    assert everything["step"] == steps
    all_ckpts = checkpoints.list_complete_checkpoints(str(tmp_path / "all"))
    assert len(all_ckpts) == steps
    losses = [c.info["validation_loss"] for c in all_ckpts]
    best_number = all_ckpts[int(np.argmin(losses))].number

    _fit(tmp_path / "straight", steps, keep)
    _fit(tmp_path / "resumed", steps // 2, keep)
    assert len(checkpoints.list_complete_checkpoints(str(tmp_path / "resumed"))) <= keep + 1
    resumed = _fit(tmp_path / "resumed", steps, keep)
    assert resumed["start_step"] == steps // 2 and resumed["step"] == steps

    for name in ("straight", "resumed"):
        d = tmp_path / name
        kept = [c.number for c in checkpoints.list_complete_checkpoints(str(d))]
        # The newest `keep` and the lowest validation loss of all 12 saves, nothing else.
        assert kept == sorted({steps - 1, steps, best_number}), name
        files = [f for f in os.listdir(d) if f.startswith("model-")]
        assert len(files) == 3 * len(kept), files  # marker, weights, optimizer state each

    straight, again = _state(tmp_path / "straight"), _state(tmp_path / "resumed")
    reference = _state(tmp_path / "all")
    for got in (straight, again):
        assert len(got[1]) == len(reference[1]) > 2
        for a, b in zip(reference[0] + reference[1], got[0] + got[1]):
            np.testing.assert_array_equal(a, b)


def test_a_bad_keep_checkpoints_fails_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="keep_checkpoints must be a positive integer, got 0"):
        _fit(tmp_path / "bad", 2, keep=0)
    assert not (tmp_path / "bad").exists()


def test_the_encoder_trainer_keeps_the_newest_and_the_best_with_their_pictures(tmp_path):
    from encoder_helpers import pattern, write_raw_rollouts

    from rl755.models.encoders.train import train_obs_encoder

    raw = tmp_path / "raw"
    raw.mkdir()
    write_raw_rollouts(raw, "train", num_files=1, per_file=3, seed=1)
    write_raw_rollouts(raw, "validation", num_files=1, per_file=2, seed=2)
    model_dir = tmp_path / "vae"
    result = train_obs_encoder(
        model_dir=str(model_dir),
        train_steps=12,
        environment="FAKE_PIXELS",
        model="vae.Vae",
        batch_size=8,
        representation_size=4,
        save_every_n_steps=2,
        obs_sampled_per_rollout=4,
        learning_rate=3e-3,
        validation_steps=1,
        rollouts_pattern=pattern(raw),
        verbose=0,
        keep_checkpoints=2,
    )
    assert len(result.validation_losses) == 6
    kept = checkpoints.list_complete_checkpoints(str(model_dir))
    best = 1 + int(np.argmin(result.validation_losses))
    assert [c.number for c in kept] == sorted({5, 6, best})
    assert [c.number for c in kept if c.info["best"]][-1] == best
    pictures = sorted(f for f in os.listdir(model_dir) if f.endswith(".reconstructions.png"))
    assert pictures == [checkpoints.file_name(c.number, ".reconstructions.png") for c in kept]


def test_markers_that_are_no_checkpoint_are_passed_over_not_the_end_of_the_list(
    tmp_path, monkeypatch
):
    """Listed first, a marker of another name, an unreadable one, one that is not a dict and
    one whose files are missing: each is skipped, and the complete checkpoints still come."""
    for number in (1, 2):
        _write(tmp_path, number)
    bad = {"model-x.json": "{}", "model-003.json": "{not json", "model-004.json": "[]",
           "model-005.json": json.dumps({"files": {"weights": "model-005.weights.h5"}})}  # fmt: skip
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
    real_glob = checkpoints.glob.glob
    monkeypatch.setattr(
        checkpoints.glob,
        "glob",
        lambda p: sorted(real_glob(p), key=lambda f: f.endswith(("-001.json", "-002.json"))),
    )
    assert [c.number for c in checkpoints.list_complete_checkpoints(str(tmp_path))] == [1, 2]
