"""Training sequential models: the script's library function end to end, exact resume,
starting from another run's weights, data flags, NaN stop, fail-fast checks, loading."""

import glob
import json
import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import (
    Z,
    checkpoint_steps,
    fake_model,
    fixed_slices,
    train_mdn,
    write_encoded_dataset,
)

from rl755.common import checkpoints, tensorboard
from rl755.common.errors import NonFiniteLossError
from rl755.data.fake.encoded_rollouts import VaeEncodedRollouts
from rl755.models import catalogue
from rl755.models.sequential import data as seq_data
from rl755.models.sequential import loop
from rl755.models.sequential import train as ts


@pytest.fixture
def encoded_dir(tmp_path):
    return write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")


def test_train_checkpoints_tensorboard_record_and_resume(encoded_dir, tmp_path):
    model_dir = tmp_path / "models" / "mdn"
    first = train_mdn(model_dir, 2)
    assert first["start_step"] == 0 and first["step"] == 2 and len(first["train_losses"]) == 2
    assert set(first["validation"]) == {"loss", "z", "reward", "done"}
    assert os.path.basename(first["checkpoint"]) == "model-001.weights.h5"
    assert glob.glob(str(model_dir / "tensorboard" / "train" / "events.*"))
    assert glob.glob(str(model_dir / "tensorboard" / "validation" / "events.*"))
    records = glob.glob(str(model_dir / "runs" / "*.json"))
    assert records and json.load(open(records[0]))["status"] == "completed"
    info = ts.read_model_info(str(model_dir))
    assert info["model"] == "mdn_rnn.mdn_rnn_with_heads" and info["environment"] == "FAKE_PIXELS"
    # The numbers logged are the run's own: by value, not only by key.
    assert info["train_loss"] == pytest.approx(first["train_losses"][-1])
    assert info["validation_loss"] == pytest.approx(first["validation"]["loss"])
    from rl755.common import tensorboard

    train = tensorboard.read_dir(model_dir / "tensorboard" / "train")
    ((step, total),) = train["losses/total"]
    assert step == 2 and total == pytest.approx(np.mean(first["train_losses"]), rel=1e-5)
    ((_, steps_per_s),) = train["perf/steps_per_second"]
    ((_, seqs_per_s),) = train["perf/sequences_per_second"]
    assert seqs_per_s == pytest.approx(4 * steps_per_s, rel=1e-5)  # batch_size 4
    val = tensorboard.read_dir(model_dir / "tensorboard" / "validation")
    for term in ("z", "reward", "done"):
        assert val[f"losses/{term}"][0][1] == pytest.approx(first["validation"][term], rel=1e-5)
    # Rerun with more steps: resumes at step 2, ends at 4.
    second = train_mdn(model_dir, 4)
    assert second["start_step"] == 2 and second["step"] == 4 and len(second["train_losses"]) == 2
    assert checkpoint_steps(model_dir) == [2, 4]
    assert not [f for f in os.listdir(model_dir) if ".tmp" in f]
    # Rerun with the same steps: nothing to do.
    assert train_mdn(model_dir, 4)["train_losses"] == []
    # A different model in the same dir is refused.
    with pytest.raises(ValueError, match="different settings"):
        train_mdn(model_dir, 6, model="lstm.deterministic_lstm")
    loaded = ts.load_trained_model(str(model_dir))
    assert loaded.has_done_head and loaded.count_params() > 0


def test_resume_restores_optimizer_state_exactly(tmp_path):
    data = fixed_slices(n=4, length=5)
    kw = dict(dataset_fn=data, batch_size=4, learning_rate=1e-2, validation_steps=0)
    tf.keras.utils.set_random_seed(0)
    loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        model_dir=str(tmp_path / "a"),
        train_steps=4,
        save_every_n_steps=4,
        **kw,
    )
    tf.keras.utils.set_random_seed(0)
    loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        model_dir=str(tmp_path / "b"),
        train_steps=2,
        save_every_n_steps=2,
        **kw,
    )
    resumed = loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        model_dir=str(tmp_path / "b"),
        train_steps=4,
        save_every_n_steps=2,
        **kw,
    )
    assert resumed["start_step"] == 2
    a = ts.load_trained_model(str(tmp_path / "a"), fake_model("lstm.deterministic_lstm"))
    b = ts.load_trained_model(str(tmp_path / "b"), fake_model("lstm.deterministic_lstm"))
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-5, atol=1e-6)


def test_dropout_draws_are_a_function_of_the_checkpoint_segment(tmp_path):
    """A transformer with dropout on fixed data, stopped at a checkpoint and resumed, ends
    with the losses and weights of an uninterrupted run: every segment restarts the dropout
    seed generators from (seed, step), which the checkpoint does not hold."""
    model = catalogue.model_fn("FAKE_PIXELS", "transformer.tiny_deterministic_transformer",
                               dropout=0.5)  # fmt: skip
    kw = dict(dataset_fn=fixed_slices(n=4, length=5), batch_size=4, learning_rate=1e-2,
              validation_steps=0, save_every_n_steps=2, seed=3)  # fmt: skip

    def fit(name, steps):
        tf.keras.utils.set_random_seed(0)  # the same initial weights
        return loop.fit_sequential_model(model, model_dir=str(tmp_path / name),
                                         train_steps=steps, **kw)  # fmt: skip

    whole = fit("whole", 4)
    fit("split", 2)
    split = fit("split", 4)
    assert split["start_step"] == 2 and split["train_losses"] == whole["train_losses"][2:]
    assert whole["train_losses"][0] != whole["train_losses"][1]  # the draws do differ
    a, b = (ts.load_trained_model(str(tmp_path / n), model) for n in ("whole", "split"))
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(vb.numpy(), va.numpy())


def test_tensorboard_step_means_restart_at_every_checkpoint(tmp_path):
    """Logging every 3 steps and saving every 2: a run resumed at step 2 writes the
    TensorBoard values of an uninterrupted run (each save is logged, so no mean spans one)."""
    kw = dict(dataset_fn=fixed_slices(n=4, length=5), batch_size=4, learning_rate=1e-2,
              validation_steps=0, save_every_n_steps=2, log_every_n_steps=3)  # fmt: skip

    def fit(name, steps):
        tf.keras.utils.set_random_seed(0)
        loop.fit_sequential_model(fake_model("lstm.deterministic_lstm"),
                                  model_dir=str(tmp_path / name), train_steps=steps, **kw)  # fmt: skip
        return tensorboard.read_dir(str(tmp_path / name / "tensorboard" / "train"))["losses/total"]

    whole = fit("whole", 4)
    fit("split", 2)
    assert [s for s, _ in whole] == [2, 3, 4]
    assert fit("split", 4) == whole


def test_initial_weights_start_a_new_run_from_another_runs_weights(tmp_path):
    """--initial_weights: a warm start (e.g. from a shipped model), step 0 and a new optimizer;
    a resumed run keeps its own checkpoint; another model's weights fail naming the file."""
    data = fixed_slices(n=4, length=5)
    kw = dict(dataset_fn=data, batch_size=4, validation_steps=0, save_every_n_steps=1)
    mdn = fake_model("mdn_rnn.mdn_rnn")
    tf.keras.utils.set_random_seed(0)
    loop.fit_sequential_model(
        mdn, model_dir=str(tmp_path / "a"), train_steps=4, learning_rate=1e-2, **kw
    )
    a = ts.load_trained_model(str(tmp_path / "a"), mdn)
    # A tiny learning rate: one Adam step moves each weight by ~1e-9, so the run's weights
    # are where it started.
    tf.keras.utils.set_random_seed(1)
    warm = loop.fit_sequential_model(
        mdn,
        model_dir=str(tmp_path / "b"),
        train_steps=1,
        learning_rate=1e-9,
        initial_weights=str(tmp_path / "a"),
        **kw,
    )
    assert warm["start_step"] == 0 and warm["step"] == 1
    b = ts.load_trained_model(str(tmp_path / "b"), mdn)
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), atol=1e-6)
    assert ts.read_model_info(str(tmp_path / "b"))["initial_weights"].endswith(
        "model-004.weights.h5"
    )
    tf.keras.utils.set_random_seed(1)
    loop.fit_sequential_model(
        mdn, model_dir=str(tmp_path / "c"), train_steps=1, learning_rate=1e-9, **kw
    )
    c = ts.load_trained_model(str(tmp_path / "c"), mdn)
    assert max(np.abs(va.numpy() - vc.numpy()).max() for va, vc in zip(a.weights, c.weights)) > 1e-2
    # Resuming b ignores --initial_weights (its checkpoint holds the optimizer too).
    resumed = loop.fit_sequential_model(
        mdn,
        model_dir=str(tmp_path / "b"),
        train_steps=2,
        learning_rate=1e-9,
        initial_weights=str(tmp_path / "c"),
        **kw,
    )
    assert resumed["start_step"] == 1
    assert ts.read_model_info(str(tmp_path / "b"))["initial_weights"].endswith(
        os.path.join("a", "model-004.weights.h5")
    )
    # Another model's weights, or a dir without a checkpoint: refused, naming the file.
    with pytest.raises(ValueError, match=r"a/model-004\.weights\.h5 does not fit"):
        loop.fit_sequential_model(
            fake_model("lstm.deterministic_lstm"),
            model_dir=str(tmp_path / "d"),
            train_steps=1,
            learning_rate=1e-3,
            initial_weights=str(tmp_path / "a"),
            **kw,
        )
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        loop.fit_sequential_model(
            mdn,
            model_dir=str(tmp_path / "e"),
            train_steps=1,
            learning_rate=1e-3,
            initial_weights=str(tmp_path / "nothing"),
            **kw,
        )
    assert not checkpoints.list_complete_checkpoints(str(tmp_path / "d"))


def test_initial_weights_reach_the_stage_and_another_model_is_named(encoded_dir, tmp_path):
    train_mdn(tmp_path / "a", 2)  # mdn_rnn.mdn_rnn_with_heads
    with pytest.raises(ValueError, match=r"model='mdn_rnn.mdn_rnn_with_heads', this run trains"):
        train_mdn(tmp_path / "b", 1, model="mdn_rnn.mdn_rnn", initial_weights=str(tmp_path / "a"))
    assert not checkpoints.list_complete_checkpoints(str(tmp_path / "b"))
    train_mdn(tmp_path / "c", 1, initial_weights=str(tmp_path / "a"))
    assert ts.read_model_info(str(tmp_path / "c"))["initial_weights"] == str(
        tmp_path / "a" / "model-001.weights.h5"
    )


def test_difference_targets_and_sample_observations_reach_the_batches(encoded_dir):
    from rl755.data.fake.encoded_rollouts import VaeEncodedRollouts

    builder = VaeEncodedRollouts()

    def first(**kw):
        tf.random.set_seed(0)
        fn = seq_data.autoregressive_dataset_fn(builder, 6, shuffle_buffer=1, **kw)
        return next(iter(fn("train").batch(64).take(1)))

    plain = first()
    for b in [plain]:
        # Inputs carry the stored means: each target z_{t+1} is the next input's z.
        both = (b["target_mask"][:, :-1] == 1) & (b["mask"][:, 1:] == 1)
        np.testing.assert_allclose(
            tf.boolean_mask(b["targets"][:, :-1], both),
            tf.boolean_mask(b["inputs"][:, 1:, :Z], both),
        )
    diff = first(difference_targets=True)
    m = diff["target_mask"][:, :-1] == 1
    np.testing.assert_allclose(
        tf.boolean_mask(diff["targets"][:, :-1], m),
        tf.boolean_mask(diff["inputs"][:, 1:, :Z] - diff["inputs"][:, :-1, :Z], m),
        atol=1e-6,
    )
    sampled = first(sample_observations=True)
    # With sampled observations the inputs are means + 0.3 * noise: not on the stored grid.
    stored = {tuple(np.round(r, 5)) for r in plain["inputs"][..., :Z].numpy().reshape(-1, Z)}
    got = {tuple(np.round(r, 5)) for r in sampled["inputs"][..., :Z].numpy().reshape(-1, Z)}
    assert len(got & stored) <= 1  # only padding rows (zeros) may coincide


def test_difference_targets_is_recorded_for_loading(encoded_dir, tmp_path):
    model_dir = tmp_path / "models" / "diff"
    train_mdn(
        model_dir,
        1,
        model="lstm.deterministic_lstm",
        difference_targets=True,
        validation_steps=0,
        save_every_n_steps=1,
    )
    assert ts.read_model_info(str(model_dir))["difference_targets"] is True
    assert ts.load_trained_model(str(model_dir)).difference_targets


def test_nan_loss_stops_training_with_a_message(tmp_path):
    with pytest.raises(NonFiniteLossError) as e:
        loop.fit_sequential_model(
            fake_model("mdn_rnn.mdn_rnn"),
            fixed_slices(poison=True),
            model_dir=str(tmp_path / "nan"),
            train_steps=5,
            batch_size=2,
            learning_rate=1e-3,
            validation_steps=0,
        )
    msg = str(e.value)
    assert "step 1" in msg and "loss term(s) z" in msg and "--check_numerics" in msg
    assert checkpoint_steps(tmp_path / "nan") == []


def test_mismatched_sizes_and_unknown_names_fail_before_training(encoded_dir, tmp_path):
    other = write_encoded_dataset(tmp_path / "z6", z=6)
    with pytest.raises(ValueError, match="representations of size 6 .* expects Z=4"):
        train_mdn(tmp_path / "m1", 1, rollouts_pattern=str(other / "encoded-{split}*.tfrecord-*"))
    with pytest.raises(LookupError, match="mdn_rnn_with_heads"):
        train_mdn(tmp_path / "m2", 1, model="mdn_rnn.no_such_model")
    with pytest.raises(LookupError, match="VaeEncodedRollouts"):
        train_mdn(tmp_path / "m3", 1, rollouts_dataset="NoSuchDataset")
    with pytest.raises(FileNotFoundError, match="no 'train' shards"):
        train_mdn(tmp_path / "m4", 1, rollouts_pattern=str(tmp_path / "nowhere-{split}*"))
    with pytest.raises(ValueError, match=r"batch_shards=3 must be a positive divisor .* \(4\)"):
        train_mdn(tmp_path / "m5", 1, batch_shards=3)
    for d in ("m1", "m2", "m3", "m4", "m5"):
        assert not os.path.exists(tmp_path / d)


def test_saved_models_load_trained_sequential_models(tmp_path):
    from rl755.common import config
    from rl755.models import catalogue
    from rl755.models.car_racing import saved_models

    with pytest.raises(FileNotFoundError, match="Train it first: python scripts/models/"):
        saved_models.mdn_rnn_vae_32ld()
    model_dir = config.env_models_dir("car_racing") / "mdn_rnn_vae_32ld"
    model_dir.mkdir(parents=True)
    trained = catalogue.build("CAR_RACING", "mdn_rnn.mdn_rnn").ensure_built()
    trained.z_head.dense.kernel.assign(tf.ones_like(trained.z_head.dense.kernel))
    opt = keras.optimizers.Adam()
    opt.build(trained.trainable_variables)
    info = {"environment": "CAR_RACING", "model": "mdn_rnn.mdn_rnn", "difference_targets": True}
    checkpoints.save_checkpoint(str(model_dir), 1, trained, dict(info, step=7), optimizer=opt)
    loaded = saved_models.mdn_rnn_vae_32ld()
    assert loaded.difference_targets
    for a, b in zip(trained.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_old_format_model_dirs_load_but_do_not_resume(tmp_path):
    """sequential_model.json + model-<step>.weights.h5 + .optimizer.npz (before the common
    checkpoint format): load_trained_model reads them; training into them is refused."""
    model_dir = tmp_path / "old"
    model_dir.mkdir()
    trained = fake_model("lstm.deterministic_lstm")().ensure_built()
    trained.save_weights(str(model_dir / "model-007.weights.h5"))
    np.savez(model_dir / "model-007.optimizer.npz", step=np.int64(7))
    (model_dir / "model-009.weights.h5").write_bytes(b"")  # no optimizer file: incomplete
    info = {"environment": "FAKE_PIXELS", "model": "lstm.deterministic_lstm"}
    (model_dir / "sequential_model.json").write_text(json.dumps(info))
    loaded = ts.load_trained_model(str(model_dir))
    for a, b in zip(trained.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ts.read_model_info(str(model_dir))["step"] == 7
    with pytest.raises(ValueError, match="old format.*another --model_dir"):
        loop.fit_sequential_model(
            fake_model("lstm.deterministic_lstm"),
            fixed_slices(),
            model_dir=str(model_dir),
            train_steps=9,
            batch_size=2,
            learning_rate=1e-3,
            validation_steps=0,
        )


def test_training_from_episode_starts_names_the_episodes_it_cuts(encoded_dir, tmp_path, caplog):
    """--slice_start=episode_start never trains on a rollout's steps after the first L (its end
    included): training says so once, naming how many rollouts and the longest. Slices long
    enough, or uniform slices, say nothing."""
    with caplog.at_level(logging.WARNING):
        train_mdn(tmp_path / "cut", 1, slice_start="episode_start")
    cut = [r.getMessage() for r in caplog.records if "--sequence_length" in r.getMessage()]
    assert len(cut) == 1, cut
    assert cut[0].startswith(
        "4 of the first 4 train rollouts are longer than --sequence_length=6 (the longest: "
        "12 steps). With --slice_start=episode_start their later steps and their ends are "
        "never trained on"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        train_mdn(tmp_path / "whole", 1, slice_start="episode_start", sequence_length=12)
        train_mdn(tmp_path / "uniform", 1)
    assert not [r for r in caplog.records if "--sequence_length" in r.getMessage()]
    builder = VaeEncodedRollouts()
    assert seq_data.warn_if_episodes_are_cut(builder, 11, "episode_start") == (4, 4, 12)
    assert seq_data.warn_if_episodes_are_cut(builder, 12, "episode_start") == (0, 4, 12)
    assert seq_data.warn_if_episodes_are_cut(builder, 6, "uniform") == (0, 0, 0)
    assert seq_data.warn_if_episodes_are_cut(builder, 11, "episode_start", sample=2)[:2] == (2, 2)
