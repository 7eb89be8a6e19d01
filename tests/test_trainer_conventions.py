"""What every trainer shares: one checkpoint format (complete-marked, partial ones ignored,
exact resume from the newest complete one) and one TensorBoard layout (tensorboard/{train,
validation}, namespaced keys, the run's flags as a table), for the encoder, sequential and
CMA-ES trainers alike; and the two common modules on their own."""

from __future__ import annotations

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from encoder_helpers import pattern, write_raw_rollouts
from sequential_helpers import write_encoded_dataset

from rl755.common import checkpoints, tensorboard

# ---- the three trainers, tiny --------------------------------------------------------------


def _train_encoder(model_dir, tmp_path):
    from rl755.models.encoders.train import train_obs_encoder

    raw = tmp_path / "raw"
    if not raw.exists():
        write_raw_rollouts(raw, "train", num_files=1, per_file=2, seed=1)
        write_raw_rollouts(raw, "validation", num_files=1, per_file=1, seed=2)
    train_obs_encoder(
        model_dir=str(model_dir), train_steps=4, environment="FAKE_PIXELS", model="vae.Vae",
        batch_size=4, representation_size=4, save_every_n_steps=2, obs_sampled_per_rollout=4,
        learning_rate=1e-3, validation_steps=1, rollouts_pattern=pattern(raw), verbose=0,
        run_flags={"trainer": "encoder", "train_steps": 4},
    )  # fmt: skip


def _train_sequential(model_dir, tmp_path):
    from rl755.models.sequential.train import train_sequential_model

    encoded = tmp_path / "data" / "fake" / "encoded_rollouts" / "vae"
    if not encoded.exists():
        write_encoded_dataset(encoded)
    train_sequential_model(
        model_dir=str(model_dir), train_steps=4, environment="FAKE_PIXELS",
        model="lstm.deterministic_lstm", rollouts_dataset="VaeEncodedRollouts", batch_size=4,
        sequence_length=6, learning_rate=1e-3, save_every_n_steps=2, validation_steps=1,
        run_flags={"trainer": "sequential", "train_steps": 4},
    )  # fmt: skip


def _train_controller(model_dir, tmp_path):
    from rl755.controller.agent import AgentSpec
    from rl755.controller.cma_train import CmaConfig, run_cma_es
    from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

    spec = AgentSpec(
        "FAKE_PIXELS", "LinearController", encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel, encoder_name="FakeLatentEncoder",
        sequential_model_name="FakeDynamicsModel",
    )  # fmt: skip
    cfg = CmaConfig(
        population_size=4, trials_per_member=1, generations=2, rollout_max_steps=12, sigma=0.5,
        seed=1, eval_every=1, eval_episodes=1,
    )  # fmt: skip
    run_cma_es(spec, str(model_dir), cfg, hparams={"trainer": "controller", "generations": 2})


TRAINERS = {
    "encoder": (_train_encoder, "losses/total", "weights"),
    "sequential": (_train_sequential, "losses/total", "weights"),
    "controller": (_train_controller, "fitness/mean", "params"),
}


@pytest.mark.parametrize("trainer", sorted(TRAINERS))
def test_every_trainer_writes_one_tensorboard_layout_and_complete_checkpoints(trainer, tmp_path):
    train, main_key, some_file = TRAINERS[trainer]
    model_dir = tmp_path / "m"
    train(model_dir, tmp_path)

    # TensorBoard: train/ and validation/ under tensorboard/, nothing else writes events.
    tb = model_dir / "tensorboard"
    assert tensorboard.tensorboard_dirs(str(model_dir)) == [
        str(tb / "train"),
        str(tb / "validation"),
    ]
    train_tags = tensorboard.read_dir(tb / "train")
    validation_tags = tensorboard.read_dir(tb / "validation")
    for tag in [*train_tags, *validation_tags]:
        if tag != tensorboard.HPARAMS_TAG:
            tensorboard.check_key(tag)  # namespaced
    assert main_key in train_tags
    assert any(t.startswith("perf/") and t.endswith("_per_second") for t in train_tags)
    assert validation_tags  # validation losses or real evaluations
    ((_, table),) = train_tags[tensorboard.HPARAMS_TAG]  # once per run
    assert table.startswith("| flag | value |") and f"| trainer | {trainer} |" in table

    # Checkpoints: complete-marked, two of them (2 steps or generations apart).
    ckpts = checkpoints.list_complete_checkpoints(str(model_dir))
    assert [c.number for c in ckpts] == [1, 2] and ckpts[1].step == 2 * ckpts[0].step
    for c in ckpts:
        assert c.files and all(os.path.exists(p) for p in c.files.values())
    assert not [f for f in os.listdir(model_dir) if ".tmp-" in f]

    # A checkpoint missing one of its files is partial: ignored, and the rerun resumes from
    # the one before it and writes it again, completely.
    os.remove(ckpts[1].path(some_file))
    newest = checkpoints.newest_complete_checkpoint(str(model_dir))
    assert newest.number == 1
    train(model_dir, tmp_path)
    again = checkpoints.list_complete_checkpoints(str(model_dir))
    assert [(c.number, c.step) for c in again] == [(1, ckpts[0].step), (2, ckpts[1].step)]
    assert len(tensorboard.read_dir(tb / "train")[tensorboard.HPARAMS_TAG]) == 2  # 2 runs


# ---- rl755.common.checkpoints ----------------------------------------------------------------


def _writer(text):
    def write(path):
        with open(path, "w") as f:
            f.write(text)

    return write


def test_a_checkpoint_is_complete_only_with_its_marker_and_every_file(tmp_path):
    d = str(tmp_path)
    for n in (1, 2, 3):
        files = {"a": (".a.txt", _writer(f"a{n}")), "b": (".b.txt", _writer(f"b{n}"))}
        checkpoints.write_checkpoint(d, n, files, {"step": 10 * n})
    assert [c.step for c in checkpoints.list_complete_checkpoints(d)] == [10, 20, 30]
    assert open(checkpoints.newest_complete_checkpoint(d).path("b")).read() == "b3"
    os.remove(tmp_path / "model-003.b.txt")  # a file of 3 is missing
    os.remove(tmp_path / "model-002.json")  # 2's marker was never written
    (tmp_path / "model-004.json").write_text("{not json")  # a marker cut short
    assert [c.number for c in checkpoints.list_complete_checkpoints(d)] == [1]
    with pytest.raises(KeyError, match=r"'c'.*\['a', 'b'\]"):
        checkpoints.newest_complete_checkpoint(d).path("c")
    for n in (5, 6, 7):
        checkpoints.write_checkpoint(d, n, {"a": (".a.txt", _writer("x"))}, {"step": n})
    assert checkpoints.remove_older_checkpoints(d, keep=2) == [1, 5]
    assert [c.number for c in checkpoints.list_complete_checkpoints(d)] == [6, 7]
    assert not (tmp_path / "model-001.a.txt").exists()


def test_checkpoint_at_picks_the_newest_or_the_one_at_a_step(tmp_path):
    d = str(tmp_path)
    with pytest.raises(FileNotFoundError, match=f"No complete checkpoint in {d}: train it"):
        checkpoints.checkpoint_at(d, None, "train it")
    for n in (1, 2):
        checkpoints.write_checkpoint(d, n, {"a": (".a.txt", _writer("a"))}, {"step": 10 * n})
    assert checkpoints.checkpoint_at(d, None, "").number == 2
    assert checkpoints.checkpoint_at(d, 10, "").number == 1
    assert checkpoints.checkpoint_at(d, "20", "").number == 2  # a step given as a flag string
    with pytest.raises(FileNotFoundError, match=f"in {d} at step 15: train it"):
        checkpoints.checkpoint_at(d, 15, "train it")
    first = checkpoints.list_complete_checkpoints(d)[:1]
    assert checkpoints.checkpoint_at(d, None, "", ckpts=first).number == 1


def test_a_failed_file_write_leaves_no_checkpoint(tmp_path):
    def fail(path):
        open(path, "w").close()
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        checkpoints.write_checkpoint(
            str(tmp_path), 1, {"a": (".a.txt", _writer("a")), "b": (".b.txt", fail)}
        )
    assert checkpoints.list_complete_checkpoints(str(tmp_path)) == []
    assert sorted(os.listdir(tmp_path)) == ["model-001.a.txt"]  # no marker, no temp file


def test_optimizer_state_round_trips_and_other_settings_are_refused(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt = keras.optimizers.Adam(1e-2)
    opt.build(model.trainable_variables)
    x = np.ones((4, 3), np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
    variables = model.trainable_variables
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    ckpt = checkpoints.save_checkpoint(str(tmp_path), 1, model, {"model": "a"}, optimizer=opt)
    fresh = keras.optimizers.Adam(1e-2)
    fresh.build(model.trainable_variables)
    checkpoints.restore_optimizer(fresh, ckpt)
    for a, b in zip(opt.variables, fresh.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(fresh.iterations.numpy()) == 1
    checkpoints.check_same_run(ckpt, {"model": "a", "other": 1}, ("model",), str(tmp_path))
    with pytest.raises(ValueError, match=r"model='a' \(now 'b'\)"):
        checkpoints.check_same_run(ckpt, {"model": "b"}, ("model",), str(tmp_path))


# ---- rl755.common.tensorboard ----------------------------------------------------------------


def test_tensorboard_keys_must_be_namespaced(tmp_path):
    logs = tensorboard.TrainingLogs(str(tmp_path))
    with pytest.raises(ValueError, match="not namespaced.*losses, perf"):
        logs.scalars("train", 1, {"loss": 1.0})
    with pytest.raises(ValueError, match="not namespaced"):
        logs.scalars("train", 1, {"misc/x": 1.0})
    with pytest.raises(ValueError, match="valid: train, validation"):
        logs.scalars("test", 1, {"losses/total": 1.0})
    logs.scalars("validation", 3, {"losses/total": 0.5, "perf/steps_per_second": 2.0})
    logs.hparams({"lr": 0.1, "name": "a|b"}, step=0)
    logs.close()
    assert tensorboard.read_dir(tmp_path / "tensorboard" / "validation") == {
        "losses/total": [(3, 0.5)],
        "perf/steps_per_second": [(3, 2.0)],
    }
    (hp,) = tensorboard.read_dir(tmp_path / "tensorboard" / "train")["hparams"]
    assert hp == (0, "| flag | value |\n|---|---|\n| lr | 0.1 |\n| name | a\\|b |")
    assert tensorboard.latest_metrics(tensorboard.tensorboard_dirs(str(tmp_path))) == {
        "validation/losses/total": (3, 0.5),
        "validation/perf/steps_per_second": (3, 2.0),
    }
    off = tensorboard.TrainingLogs(str(tmp_path / "off"), enabled=False)  # non-chief worker
    off.scalars("train", 1, {"losses/total": 1.0})
    off.close()
    assert not (tmp_path / "off").exists()


def test_step_means_average_the_steps_since_the_last_take(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(tensorboard.time, "perf_counter", lambda: now[0])
    window = tensorboard.StepMeans(batch_size=8, items="frames")
    window.add({"loss": 1.0, "z": 4.0})
    window.add({"loss": 3.0, "z": 0.0})
    now[0] = 104.0
    means, perf = window.take()
    assert means == {"loss": 2.0, "z": 2.0}
    assert perf == {"perf/steps_per_second": 0.5, "perf/frames_per_second": 4.0}
    window.add({"loss": 5.0})  # a new window, timed from the take
    now[0] = 106.0
    window.restart_clock()  # e.g. after saving a checkpoint
    now[0] = 107.0
    assert window.take() == (
        {"loss": 5.0},
        {"perf/steps_per_second": 1.0, "perf/frames_per_second": 8.0},
    )
