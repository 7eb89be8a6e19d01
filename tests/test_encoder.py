"""Stage 2: the ConvVAE, encoder training (fit, resume, fail fast) and saved encoders."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from encoder_helpers import fake_rollout, pattern, save_untrained_vae, write_raw_rollouts

from rl755.common import checkpoints, sharded_io
from rl755.common.errors import NonFiniteLossError
from rl755.models.encoders.callbacks import StopOnNonFiniteLoss
from rl755.models.encoders.saved import load_encoder
from rl755.models.encoders.train import train_obs_encoder


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("raw")
    write_raw_rollouts(d, "train", num_files=2, per_file=3, seed=1)
    write_raw_rollouts(d, "validation", num_files=1, per_file=2, seed=2, compression="GZIP")
    return d


def _train(model_dir, raw_dir, steps, **kw):
    args = dict(
        model_dir=str(model_dir),
        train_steps=steps,
        environment="FAKE_PIXELS",
        model="vae.Vae",
        batch_size=16,
        representation_size=4,
        save_every_n_steps=20,
        obs_sampled_per_rollout=10,
        learning_rate=3e-3,
        validation_steps=1,
        rollouts_pattern=pattern(raw_dir),
        verbose=0,
    )
    args.update(kw)
    return train_obs_encoder(**args)


def test_car_racing_vae_matches_the_paper():
    from rl755.models import catalogue

    vae = catalogue.build("CAR_RACING", "vae.Vae", obs_sampled_per_rollout=100).build_for_frames()
    assert vae.representation_size == 32 and vae.obs_sampled_per_rollout == 100
    assert vae.count_params() == 4_348_547
    frames = tf.zeros((2, 96, 96, 3), tf.uint8)
    z, extras = vae.compute_full_representation(frames)
    assert z.shape == (2, 32) and extras["std_devs"].shape == (2, 32)
    assert vae.decode(z).shape == (2, 64, 64, 3)
    assert vae.preprocess(frames).shape == (2, 64, 64, 3)  # rows 0:84 cropped, resized
    # KL tolerance: a posterior equal to the prior still costs 0.5 * Z.
    assert float(vae.kl_loss(tf.zeros((1, 32)), tf.ones((1, 32)))) == pytest.approx(16.0)


def test_custom_training_loop_lowers_the_loss():
    from rl755.models import catalogue

    tf.keras.utils.set_random_seed(0)  # Keras initializers too, whatever ran before
    frames = tf.constant(np.stack([fake_rollout(s).obs_l[0] for s in range(16)]))
    vae = catalogue.build("FAKE_PIXELS", "vae.Vae", representation_size=4).build_for_frames()
    opt = tf.keras.optimizers.Adam(3e-3)
    losses = []
    for _ in range(60):
        with tf.GradientTape() as tape:
            loss = vae.total_loss(frames)
        opt.apply_gradients(
            zip(tape.gradient(loss, vae.trainable_variables), vae.trainable_variables)
        )
        losses.append(float(loss))
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5]), losses


def test_training_saves_resumes_and_stops_when_done(tmp_path, raw_dir):
    model_dir = tmp_path / "vae"
    first = _train(model_dir, raw_dir, 40)
    assert first.step == 40 and len(first.train_losses) == 2
    assert first.train_losses[-1] < 0.7 * first.train_losses[0]  # the loss falls
    assert len(first.validation_losses) == 2
    for n in (1, 2):
        assert (model_dir / f"model-{n:03d}.weights.h5").exists()
        assert (model_dir / f"model-{n:03d}.reconstructions.png").exists()
        info = json.loads((model_dir / f"model-{n:03d}.json").read_text())
        assert info["step"] == 20 * n and info["representation_size"] == 4
        assert info["train_loss"] == pytest.approx(first.train_losses[n - 1])
        assert info["validation_loss"] == pytest.approx(first.validation_losses[n - 1])
    # TensorBoard holds the same numbers, by step; images/s is steps/s times the batch size.
    from rl755.common import tensorboard

    train = tensorboard.read_dir(model_dir / "tensorboard" / "train")
    assert [s for s, _ in train["losses/total"]] == [20, 40]
    np.testing.assert_allclose([v for _, v in train["losses/total"]], first.train_losses, rtol=1e-6)
    per_step = dict(train["perf/steps_per_second"])
    for step, images in train["perf/images_per_second"]:
        assert images == pytest.approx(16 * per_step[step], rel=1e-5)
    val = tensorboard.read_dir(model_dir / "tensorboard" / "validation")["losses/total"]
    np.testing.assert_allclose([v for _, v in val], first.validation_losses, rtol=1e-6)
    assert os.listdir(model_dir / "tensorboard" / "train") and os.listdir(model_dir / "runs")
    assert os.listdir(model_dir / "tensorboard" / "validation")
    assert not [f for f in os.listdir(model_dir) if ".tmp-" in f]

    # A rerun with more steps resumes: checkpoint 3 at step 50 (a 10-step remainder), and the
    # step counter comes from the restored optimizer state.
    second = _train(model_dir, raw_dir, 50)
    assert second.step == 50
    ckpt = checkpoints.newest_complete_checkpoint(str(model_dir))
    assert ckpt.number == 3 and ckpt.step == 50

    # Fewer steps than done: nothing happens.
    third = _train(model_dir, raw_dir, 30)
    assert third.already_done and third.step == 50
    assert checkpoints.newest_complete_checkpoint(str(model_dir)).number == 3

    # An incomplete checkpoint (weights without its .json) is not resumed from.
    shutil.copy(model_dir / "model-003.weights.h5", model_dir / "model-004.weights.h5")
    assert checkpoints.newest_complete_checkpoint(str(model_dir)).number == 3


def _weights(model_dir):
    encoder = load_encoder("FAKE_PIXELS", "vae.Vae", str(model_dir), representation_size=4)
    return [w.numpy() for w in encoder.weights]


def test_initial_weights_start_a_new_run_from_another_runs_weights(tmp_path, raw_dir):
    """--initial_weights: a warm start (e.g. from the shipped VAE), step 0 and a new optimizer;
    the markers say where it started; a resumed run keeps its own checkpoint; another model's
    weights, or a dir without a checkpoint, fail before any output."""
    _train(tmp_path / "a", raw_dir, 20)
    a = _weights(tmp_path / "a")
    # A tiny learning rate: one Adam step moves each weight by ~1e-9, so the run's weights are
    # where it started (a cold start with another seed is far from them).
    warm = _train(tmp_path / "b", raw_dir, 1, learning_rate=1e-9, seed=1, save_every_n_steps=1,
                  initial_weights=str(tmp_path / "a"))  # fmt: skip
    assert warm.step == 1
    for wa, wb in zip(a, _weights(tmp_path / "b"), strict=True):
        np.testing.assert_allclose(wa, wb, atol=1e-6)
    started = os.path.join(str(tmp_path / "a"), "model-001.weights.h5")
    assert checkpoints.newest_complete_checkpoint(str(tmp_path / "b")).info["initial_weights"] == (
        started
    )
    _train(tmp_path / "c", raw_dir, 1, learning_rate=1e-9, seed=1, save_every_n_steps=1)
    cold = _weights(tmp_path / "c")
    assert max(np.abs(wa - wc).max() for wa, wc in zip(a, cold, strict=True)) > 1e-2
    # Resuming b ignores --initial_weights; its markers still name a's checkpoint.
    _train(tmp_path / "b", raw_dir, 2, learning_rate=1e-9, save_every_n_steps=1,
           initial_weights=str(tmp_path / "c"))  # fmt: skip
    resumed = checkpoints.newest_complete_checkpoint(str(tmp_path / "b"))
    assert resumed.step == 2 and resumed.info["initial_weights"] == started
    for wa, wb in zip(a, _weights(tmp_path / "b"), strict=True):
        np.testing.assert_allclose(wa, wb, atol=1e-6)
    # Another representation size, or nothing there: refused before any output.
    with pytest.raises(ValueError, match=r"model-001\.json in .*representation_size=4, this run"):
        _train(tmp_path / "d", raw_dir, 1, representation_size=8,
               initial_weights=str(tmp_path / "a"))  # fmt: skip
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        _train(tmp_path / "e", raw_dir, 1, initial_weights=str(tmp_path / "nothing"))
    assert not os.path.exists(tmp_path / "d") or not os.listdir(tmp_path / "d")
    assert not os.path.exists(tmp_path / "e") or not os.listdir(tmp_path / "e")


def test_training_fails_fast_on_bad_input(tmp_path, raw_dir):
    with pytest.raises(FileNotFoundError, match="rollouts_pattern"):
        _train(tmp_path / "a", tmp_path / "nothing_here", 10)
    with pytest.raises(ValueError, match=r"shape \(16, 16, 3\).*CAR_RACING"):
        _train(tmp_path / "b", raw_dir, 10, environment="CAR_RACING")
    with pytest.raises(LookupError, match="vae"):
        _train(tmp_path / "c", raw_dir, 10, model="nope.Vae")
    empty = tmp_path / "empty"
    empty.mkdir()
    sharded_io.write_tfrecord(str(empty / "rollouts-train.tfrecord-00000-of-00001"), [])
    with pytest.raises(ValueError, match="hold no rollouts"):
        _train(tmp_path / "a", empty, 10, validation_steps=0)
    only_train = tmp_path / "only_train"
    write_raw_rollouts(only_train, "train", 1, 1)
    with pytest.raises(FileNotFoundError, match="validation_steps=0"):
        _train(tmp_path / "d", only_train, 10)
    # Resuming into a directory of another representation size is refused.
    save_untrained_vae(tmp_path / "e", representation_size=4)
    with pytest.raises(ValueError, match="representation_size"):
        _train(tmp_path / "e", raw_dir, 10, representation_size=8)
    assert not (tmp_path / "a").exists()


def test_non_finite_loss_stops_with_a_clear_message(tmp_path):
    vae = save_untrained_vae(tmp_path / "m")
    vae.compile(optimizer="adam", loss=vae.get_loss_fn())
    cb = StopOnNonFiniteLoss(str(tmp_path / "m"), check_every=2)
    cb.set_model(vae)
    cb.on_train_batch_end(1, {"loss": 1.0})
    cb.on_train_batch_end(2, {"loss": float("nan")})  # not a checking step
    with pytest.raises(NonFiniteLossError, match=r"model-001.*learning_rate"):
        cb.on_train_batch_end(3, {"loss": float("nan")})
    with pytest.raises(NonFiniteLossError):  # end of a save period: before the checkpoint
        cb.on_epoch_end(0, {"loss": float("inf")})


def test_saved_models_and_wrong_checkpoints(tmp_path):
    from rl755.common import config
    from rl755.models.fake import saved_models

    with pytest.raises(FileNotFoundError, match="train_obs_encoder.py"):
        saved_models.raw_rollout_vae_4ld()
    trained = save_untrained_vae(config.env_models_dir("fake") / "raw_rollout_vae_4ld", seed=3)
    loaded = saved_models.raw_rollout_vae_4ld()
    frames = tf.constant(np.stack(fake_rollout(5).obs_l[:3]))
    np.testing.assert_allclose(
        loaded.compute_representation(frames), trained.compute_representation(frames), atol=1e-6
    )
    model_dir = config.env_models_dir("fake") / "raw_rollout_vae_4ld"
    with pytest.raises(ValueError, match="representation_size=4.*representation_size=8"):
        load_encoder("FAKE_PIXELS", "vae.Vae", model_dir, representation_size=8)
    # Without the .json beside it, the shapes themselves are compared.
    loose = tmp_path / "copied.weights.h5"
    shutil.copy(model_dir / "model-001.weights.h5", loose)
    with pytest.raises(ValueError, match=r"copied\.weights\.h5.*\(64, 8\).*\(64, 4\)"):
        load_encoder(
            "FAKE_PIXELS", "vae.Vae", tmp_path, representation_size=8, checkpoint=str(loose)
        )
    with pytest.raises(ValueError, match=r"CAR_RACING vae\.Vae.*\(4, 4, 3, 32\)"):
        load_encoder(
            "CAR_RACING", "vae.Vae", tmp_path, representation_size=4, checkpoint=str(loose)
        )


def test_car_racing_vae_crops_the_indicator_bar_by_content():
    """Rows 84:96 (the indicator bar) never reach the network: frames differing only there
    encode identically, and what the network sees is rows 0:84 resized to 64x64."""
    from rl755.models import catalogue

    vae = catalogue.build("CAR_RACING", "vae.Vae").build_for_frames()
    frames = np.random.default_rng(0).integers(0, 256, (2, 96, 96, 3), dtype=np.uint8)
    bar_changed = frames.copy()
    bar_changed[:, 84:] = 255 - bar_changed[:, 84:]
    road_changed = frames.copy()
    road_changed[:, 74:84] = 255 - road_changed[:, 74:84]  # the last rows kept
    seen = vae.preprocess(frames).numpy()
    want = tf.image.resize(frames[:, :84].astype(np.float32) / 255.0, (64, 64)).numpy()
    np.testing.assert_allclose(seen, want, atol=1e-6)
    np.testing.assert_array_equal(vae.preprocess(bar_changed).numpy(), seen)
    z = vae.compute_full_representation(frames)[0].numpy()
    np.testing.assert_array_equal(vae.compute_full_representation(bar_changed)[0].numpy(), z)
    assert not np.array_equal(vae.compute_full_representation(road_changed)[0].numpy(), z)


def test_resume_restores_weights_and_adam_state_exactly(tmp_path, raw_dir, monkeypatch):
    """The state a resumed run starts training from (weights, Adam's step count and both
    moments of every variable) is exactly the state the first run ended with. (The batches
    after a resume are new random draws, so whole runs are compared by state, not by loss.)"""
    from rl755.models.encoders.conv_vae import ConvVae

    states = []
    real_fit = ConvVae.fit

    def snapshot(model):
        opt = [v.numpy().copy() for v in model.optimizer.variables]
        return {"optimizer": opt, "weights": [w.numpy().copy() for w in model.weights]}

    def fit(self, *args, **kwargs):
        states.append(("start", snapshot(self)))
        out = real_fit(self, *args, **kwargs)
        states.append(("end", snapshot(self)))
        return out

    monkeypatch.setattr(ConvVae, "fit", fit)
    _train(tmp_path / "vae", raw_dir, 20)
    _train(tmp_path / "vae", raw_dir, 30)
    (_, first_start), (_, first_end), (when, resumed) = states[0], states[1], states[2]
    assert when == "start"
    assert len(resumed["optimizer"]) == len(first_end["optimizer"]) > 2
    for i, (a, b) in enumerate(zip(first_end["optimizer"], resumed["optimizer"])):
        np.testing.assert_array_equal(a, b, err_msg=f"optimizer variable {i}")
    for a, b in zip(first_end["weights"], resumed["weights"]):
        np.testing.assert_array_equal(a, b)
    assert int(resumed["optimizer"][0]) == 20  # the step count
    moved = [np.any(v != 0) for v in first_end["optimizer"][2:]]
    assert all(moved)  # every moment has moved away from its initial zeros
    assert int(first_start["optimizer"][0]) == 0


def test_reconstruction_picture_is_what_the_model_sees_above_its_reconstruction():
    """model-NNN.reconstructions.png: CarRacing frames cropped and resized as the VAE sees them
    (top row; the indicator bar gone), the decoded posterior means below, in order."""
    from rl755.common import pictures
    from rl755.models import catalogue
    from rl755.models.encoders.callbacks import reconstruction_grid

    vae = catalogue.build("CAR_RACING", "vae.Vae").build_for_frames()
    frames = np.random.default_rng(1).integers(0, 256, (3, 96, 96, 3), dtype=np.uint8)
    grid = reconstruction_grid(vae, frames)
    assert grid.shape == (128, 3 * 64, 3) and grid.dtype == np.uint8
    seen = tf.image.resize(frames[:, :84].astype(np.float32) / 255.0, (64, 64)).numpy()
    np.testing.assert_array_equal(grid[:64], pictures.frame_grid(seen))
    np.testing.assert_array_equal(grid[64:], pictures.frame_grid(vae.reconstruct(frames).numpy()))


def test_vae_posterior_std_sampling_and_kl_by_hand():
    """std = exp(log_var / 2); training decodes a reparameterized sample z ~ N(mean, std);
    the KL term is the batch mean of max(KL, kl_tolerance * Z), KL in closed form."""
    from rl755.models import catalogue

    vae = catalogue.build("FAKE_PIXELS", "vae.Vae", representation_size=4).build_for_frames()
    frames = tf.constant(np.stack([fake_rollout(s).obs_l[0] for s in range(2)]))
    mu = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    vae.mean_head.kernel.assign(tf.zeros_like(vae.mean_head.kernel))
    vae.mean_head.bias.assign(mu)
    vae.log_var_head.kernel.assign(tf.zeros_like(vae.log_var_head.kernel))

    def set_std(std):
        vae.log_var_head.bias.assign(np.full(4, 2 * np.log(std), np.float32))

    set_std(2.0)
    mean, std = vae.encode_posterior(frames)
    np.testing.assert_allclose(mean, np.tile(mu, (2, 1)), rtol=1e-6)
    np.testing.assert_allclose(std, np.full((2, 4), 2.0), rtol=1e-5)
    # Training decodes a sample: with std 2, not the mean's decoding, and not twice the same.
    at_mean = vae.decode(mean).numpy()
    first, second = vae(frames, training=True).numpy(), vae(frames, training=True).numpy()
    assert np.abs(first - at_mean).max() > 1e-3 and np.abs(first - second).max() > 1e-3
    set_std(1e-6)  # a sample within 1e-6 of the mean decodes like the mean
    np.testing.assert_allclose(vae(frames, training=True).numpy(), at_mean, atol=1e-4)

    # KL(N(m, s) || N(0, 1)) = 0.5 * sum(s^2 + m^2 - 1 - log s^2), floored at 0.5 * Z = 2.
    m = np.array([[0.1, 0.0, -0.1, 0.2], [2.0, -1.0, 1.5, 0.5]], np.float32)
    s = np.array([[1.0, 0.9, 1.1, 1.0], [0.5, 2.0, 0.3, 1.0]], np.float32)
    kl = 0.5 * np.sum(s**2 + m**2 - 1 - np.log(s**2), axis=1)
    assert kl[0] < 2.0 < kl[1]
    want = np.mean(np.maximum(kl, 2.0))
    assert float(vae.kl_loss(tf.constant(m), tf.constant(s))) == pytest.approx(want, rel=1e-5)
