"""The infilling U-Net (rl755/models/unet/model*.py, infill_*.py): data windows and masks, the
networks, training with and without the GAN loss (checkpoints, exact resume, NaN guard,
TensorBoard, pictures), the measures, and the comparison of trained models."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from encoder_helpers import pattern, write_raw_rollouts

from rl755.common import checkpoints, tensorboard
from rl755.common.errors import BadInput, NonFiniteLossError
from rl755.data import registry
from rl755.models import catalogue
from rl755.models.infilling import data as infill_data
from rl755.models.infilling import metrics as infill_metrics
from rl755.models.infilling.config import InfillConfig
from rl755.models.unet.loop import fit_infilling_unet
from rl755.models.unet.model import InfillingUNet, PatchDiscriminator

ENV = "FAKE_PIXELS"
MODEL = "unet.infilling_unet"


@pytest.fixture(scope="module")
def raw_dir(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    train = write_raw_rollouts(raw, "train", num_files=1, per_file=3, seed=1)
    write_raw_rollouts(raw, "validation", num_files=1, per_file=2, seed=2)
    return raw, train


def _config(**kwargs) -> InfillConfig:
    args = dict(
        noise_size=4, batch_size=6, train_steps=4, save_every_n_steps=2, validation_steps=1,
        num_draws=3, learning_rate=1e-3,
    )  # fmt: skip
    return InfillConfig(**{**args, **kwargs})


def _train(model_dir, raw, **kwargs):
    from rl755.models.unet.train import train_infilling_unet

    return train_infilling_unet(
        str(model_dir), ENV, MODEL, _config(**kwargs), windows_per_rollout=4,
        rollouts_pattern=pattern(raw), run_flags={"trainer": "unet", **kwargs},
    )  # fmt: skip


def _generator(**kwargs) -> InfillingUNet:
    return catalogue.build(ENV, MODEL, kind=catalogue.INFILLING, **kwargs).build_for_frames()


def _batch(seed=0, b=3):
    rng = np.random.default_rng(seed)
    return {
        "frames": rng.integers(0, 256, (b, 3, 16, 16, 3), dtype=np.uint8),
        "actions": rng.uniform(-1, 1, (b, 2, 3)).astype(np.float32),
    }


# ---- data --------------------------------------------------------------------------------------
def test_windows_are_consecutive_frames_with_the_actions_between_them(raw_dir):
    raw, rollouts = raw_dir
    builder = registry.raw_rollouts_class(ENV)(tfrecords_pattern=pattern(raw))
    ds = infill_data.frame_windows(builder, "train", 2, 5, repeat=False, shuffle_files=False)
    windows = list(ds.as_numpy_iterator())
    assert len(windows) == 15
    for i, w in enumerate(windows):
        r = rollouts[i // 5]
        obs = np.stack(r.obs_l)
        (start,) = [t for t in range(len(obs) - 2) if np.array_equal(obs[t : t + 3], w["frames"])]
        np.testing.assert_array_equal(w["actions"], np.stack(r.action_l)[start : start + 2])

    def seeded(seed):  # what the comparison of models reads: the same windows every time
        ds = infill_data.frame_windows(builder, "train", 2, 4, shuffle_files=False, seed=seed)
        return np.stack([w["frames"] for w in ds.take(24).as_numpy_iterator()])

    np.testing.assert_array_equal(seeded(3), seeded(3))
    assert not np.array_equal(seeded(3), seeded(4))


def test_masks_are_repeatable_rectangles_of_the_documented_size():
    full = infill_data.masks("next_frame", 2, (16, 16), [0, 1])
    assert full.shape == (2, 16, 16, 1) and np.all(full.numpy() == 1)
    m = infill_data.masks("region", 64, (16, 16), [3, 4]).numpy()[..., 0]
    np.testing.assert_array_equal(m, infill_data.masks("region", 64, (16, 16), [3, 4])[..., 0])
    assert not np.array_equal(m, infill_data.masks("region", 64, (16, 16), [3, 5])[..., 0])
    for one in m:
        rows, cols = np.nonzero(one.any(1))[0], np.nonzero(one.any(0))[0]
        assert one.sum() == len(rows) * len(cols)  # a filled rectangle
        assert 4 <= len(rows) <= 8 and 4 <= len(cols) <= 8  # 1/4 to 1/2 of 16
    with pytest.raises(BadInput, match="Unknown --task 'nope'; valid: next_frame, region"):
        infill_data.masks("nope", 1, (16, 16), [0, 0])


# ---- networks ----------------------------------------------------------------------------------
def test_the_generator_copies_known_pixels_and_never_reads_masked_ones():
    g = _generator(noise_size=2)
    inputs = infill_data.model_inputs(_batch(), "region", 2, [1, 2])
    out = g(inputs).numpy()
    mask = inputs["mask"].numpy()
    np.testing.assert_array_equal((out * (1 - mask)), inputs["target"].numpy() * (1 - mask))
    assert np.all((out >= 0) & (out <= 1))
    secret = dict(inputs, target=inputs["target"] * (1 - mask) + 0.77 * mask)
    np.testing.assert_allclose(g(secret).numpy(), out, atol=1e-6)  # the hidden pixels
    d = PatchDiscriminator.like(g, (8, 16)).build_for_frames()
    assert d(inputs, out).shape == (3, 4, 4)  # one logit per patch
    with pytest.raises(ValueError, match=r"16x16 do not divide by 2 \*\* 5 = 32"):
        catalogue.build(ENV, MODEL, filters=(4, 4, 4, 4, 4))


def test_both_networks_keep_the_sizes_they_are_given_and_check_them():
    g = InfillingUNet([16, 16, 3], 3.0, context_frames=2.0, noise_size=0, use_actions=0,
                      filters=[8.0])  # fmt: skip
    d = PatchDiscriminator.like(g, [8, 16])
    for net, filters in ((g, (8,)), (d, (8, 16))):
        assert (net.frame_shape, net.action_size, net.context_frames) == ((16, 16, 3), 3, 2)
        assert net.use_actions is False and net.filters == filters
    with pytest.raises(ValueError, match=r"patch_discriminator_filters=\[4, 4, 4, 4, 4\]"):
        PatchDiscriminator.like(g, (4, 4, 4, 4, 4))
    with pytest.raises(ValueError, match="context_frames must be >= 1, got 0"):
        PatchDiscriminator((16, 16, 3), 3, 0)


# ---- measures ----------------------------------------------------------------------------------
def test_diversity_is_zero_for_a_deterministic_generator_and_positive_with_noise():
    batch = _batch()
    for noise_size, positive in ((0, False), (4, True)):
        g = _generator(noise_size=noise_size)
        inputs, draws = infill_data.sample_draws(g, batch, "next_frame", 4, [0, 0])
        diversity = infill_metrics.sample_diversity(draws, inputs["mask"]).numpy()
        assert diversity.shape == (3,)
        assert np.all(diversity > 1e-4) if positive else np.all(diversity == 0.0)
    real = tf.convert_to_tensor(batch["frames"][:, -1] / 255.0, tf.float32)
    mask = tf.ones([3, 16, 16, 1])
    assert infill_metrics.sample_diversity(tf.stack([real, real]), mask).numpy().max() == 0.0
    np.testing.assert_allclose(
        infill_metrics.sample_diversity(tf.stack([real, 1 - real, real]), mask),
        2 / 3 * tf.reduce_mean(tf.abs(1 - 2 * real), [1, 2, 3]),
        rtol=1e-5,
    )


def test_sharpness_drops_with_blur_and_frame_measures_are_consistent():
    real = tf.convert_to_tensor(_batch(b=4)["frames"][:, -1] / 255.0, tf.float32)
    blurred = tf.nn.avg_pool2d(real, 3, 1, "SAME")
    mask = tf.ones([4, 16, 16, 1])
    for measure in (infill_metrics.laplacian_variance, infill_metrics.gradient_energy):
        assert np.all(measure(blurred, mask) < 0.5 * measure(real, mask))
    m = infill_metrics.summarize(
        infill_metrics.frame_measures(tf.stack([real, blurred]), real, mask)
    )
    assert m["mse"] == 0 and m["best_of_draws_mse"] == 0 and m["ssim"] == pytest.approx(1.0)
    assert m["laplacian_variance_ratio"] == pytest.approx(1.0) and m["sample_diversity"] > 0
    assert 0 < m["mse_of_mean"] < infill_metrics.masked_mse(blurred, real, mask).numpy().mean()


# ---- training ----------------------------------------------------------------------------------
@pytest.mark.parametrize("adversarial_weight", [0.0, 0.1])
def test_trains_with_and_without_the_gan_loss(adversarial_weight, raw_dir, tmp_path):
    raw, _ = raw_dir
    model_dir = tmp_path / "m"
    result = _train(model_dir, raw, adversarial_weight=adversarial_weight)
    assert result["step"] == 4 and len(result["train_terms"]) == 4
    gan = adversarial_weight > 0
    ckpts = checkpoints.list_complete_checkpoints(str(model_dir))
    assert [(c.number, c.step) for c in ckpts] == [(1, 2), (2, 4)]
    roles = {"weights", "optimizer"} | (
        {"discriminator", "discriminator_optimizer"} if gan else set()
    )
    assert set(ckpts[-1].files) == roles
    png = model_dir / ckpts[-1].info["infills_png"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ckpts[-1].info["validation"]["sample_diversity"] > 0

    tb = model_dir / "tensorboard"
    train_tags = tensorboard.read_dir(tb / "train")
    val_tags = tensorboard.read_dir(tb / "validation")
    for tag in [*train_tags, *val_tags]:
        if tag != tensorboard.HPARAMS_TAG:
            tensorboard.check_key(tag)
    terms = {"losses/total", "losses/reconstruction", "perf/steps_per_second"}
    terms |= {"losses/adversarial", "losses/discriminator"} if gan else set()
    assert terms <= set(train_tags)
    assert ("losses/adversarial" in train_tags) == gan
    assert {"losses/reconstruction", "eval/ssim", "eval/sample_diversity"} <= set(val_tags)
    ((_, table),) = train_tags[tensorboard.HPARAMS_TAG]
    assert "| trainer | unet |" in table
    (record,) = os.listdir(model_dir / "runs")
    assert json.load(open(model_dir / "runs" / record))["status"] == "completed"

    from rl755.models.unet.train import load_infilling_unet

    generator, info = load_infilling_unet(str(model_dir))
    assert info["step"] == 4 and info["adversarial"] is gan and generator.noise_size == 4
    assert info["adversarial_weight"] == adversarial_weight and info["task"] == "next_frame"
    assert {"mode_seeking_weight", "reconstruction_loss", "use_actions"} <= set(info)


def _fixed_windows(split, poison=False):
    """The same 6 windows in the same order, forever (so a resumed run sees what an
    uninterrupted one does)."""
    batch = _batch(seed=7, b=6)
    if poison:
        batch["actions"][0, 0, 0] = np.nan
    return tf.data.Dataset.from_tensor_slices(batch).repeat()


def _fit(model_dir, steps, poison=False, **kwargs):
    return fit_infilling_unet(
        catalogue.model_fn(ENV, MODEL, noise_size=4),
        lambda g: PatchDiscriminator.like(g, (8, 16)),
        lambda split: _fixed_windows(split, poison),
        str(model_dir),
        _config(train_steps=steps, save_every_n_steps=2, validation_steps=0, **kwargs),
    )


def _h5_arrays(path) -> dict:
    import h5py

    names = []
    with h5py.File(path) as f:
        f.visititems(lambda n, o: names.append(n) if hasattr(o, "shape") else None)
        return {n: f[n][()] for n in names}


def _all_state(model_dir):
    """(step, {role/array name: values}) of every file of the newest checkpoint."""
    ckpt = checkpoints.newest_complete_checkpoint(str(model_dir))
    out = {}
    for role, path in ckpt.files.items():
        if path.endswith(".npz"):
            with np.load(path) as f:
                out.update({f"{role}/{k}": f[k] for k in f.files})
            continue
        out.update({f"{role}/{n}": v for n, v in _h5_arrays(path).items()})
    return ckpt.step, out


def test_a_resumed_gan_run_equals_an_uninterrupted_one(tmp_path):
    _fit(tmp_path / "straight", 4, adversarial_weight=0.1, mode_seeking_weight=0.01)
    _fit(tmp_path / "resumed", 2, adversarial_weight=0.1, mode_seeking_weight=0.01)
    assert (
        _fit(tmp_path / "resumed", 4, adversarial_weight=0.1, mode_seeking_weight=0.01)[
            "start_step"
        ]
        == 2
    )
    step_a, a = _all_state(tmp_path / "straight")
    step_b, b = _all_state(tmp_path / "resumed")
    assert step_a == step_b == 4 and sorted(a) == sorted(b)
    assert any(k.startswith("discriminator_optimizer/") for k in a)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)

    # A checkpoint missing a file is partial: the rerun resumes from the one before.
    os.remove(
        checkpoints.newest_complete_checkpoint(str(tmp_path / "resumed")).path("discriminator")
    )
    assert (
        _fit(tmp_path / "resumed", 4, adversarial_weight=0.1, mode_seeking_weight=0.01)[
            "start_step"
        ]
        == 2
    )
    # Asking for no more steps does nothing; other settings are refused.
    assert _fit(tmp_path / "resumed", 4, adversarial_weight=0.1)["train_terms"] == []
    with pytest.raises(ValueError, match=r"adversarial=True \(now False\)"):
        _fit(tmp_path / "resumed", 6, adversarial_weight=0.0)


def test_a_nan_loss_stops_training_before_any_checkpoint(tmp_path):
    with pytest.raises(NonFiniteLossError) as e:
        _fit(tmp_path / "nan", 4, poison=True, adversarial_weight=0.1)
    msg = str(e.value)
    assert "step 1" in msg and "reconstruction" in msg and "--check_numerics" in msg
    assert checkpoints.list_complete_checkpoints(str(tmp_path / "nan")) == []


def test_bad_names_and_flags_fail_before_anything_is_written(raw_dir, tmp_path):
    raw, _ = raw_dir
    from rl755.models.unet.train import train_infilling_unet

    def train(**kwargs):
        args = dict(model_dir=str(tmp_path / "bad"), environment=ENV, model=MODEL, config=_config())
        train_infilling_unet(**{**args, **kwargs}, rollouts_pattern=pattern(raw))

    with pytest.raises(BadInput, match=r"Unknown infilling model 'unet.nope'.*unet.infilling_unet"):
        train(model="unet.nope")
    with pytest.raises(BadInput, match=r"is a sequential model"):
        train(model="lstm.deterministic_lstm")
    with pytest.raises(BadInput, match="Valid --environment"):
        train(environment="NOPE")
    with pytest.raises(BadInput, match="do not divide"):
        train(unet_filters=[4, 4, 4, 4, 4])
    with pytest.raises(BadInput, match="--num_draws must be >= 2"):
        _config(num_draws=1)
    with pytest.raises(BadInput, match="--mode_seeking_weight needs noise"):
        _config(noise_size=0, mode_seeking_weight=1.0)
    with pytest.raises(FileNotFoundError, match="no 'train' shards"):
        train_infilling_unet(
            str(tmp_path / "bad"),
            ENV,
            MODEL,
            _config(),
            rollouts_pattern=str(tmp_path / "x-{split}*"),
        )
    assert not (tmp_path / "bad").exists()


# ---- comparison --------------------------------------------------------------------------------
def test_the_scripts_train_and_compare_models(raw_dir, tmp_path, repo_root):
    raw, _ = raw_dir
    _train(tmp_path / "l2", raw, train_steps=2, validation_steps=0)
    script = os.path.join(repo_root, "scripts", "models", "train_infilling_unet.py")
    subprocess.run(
        [
            sys.executable, script, f"--model_dir={tmp_path / 'gan'}", f"--environment={ENV}",
            "--train_steps=2", "--batch_size=4", "--save_every_n_steps=2", "--validation_steps=1",
            "--noise_size=4", "--windows_per_rollout=2", "--num_draws=2", "--num_threads=1",
            f"--rollouts_pattern={pattern(raw)}", "--adversarial_weight=0.1",
        ],
        check=True,
    )  # fmt: skip
    assert checkpoints.newest_complete_checkpoint(str(tmp_path / "gan")).info["adversarial"]
    out = tmp_path / "cmp"
    evaluate = os.path.join(repo_root, "scripts", "models", "evaluate_infilling_unet.py")
    run = subprocess.run(
        [
            sys.executable, evaluate, f"--out_dir={out}", "--num_examples=8", "--num_draws=3",
            f"--model_dir={tmp_path / 'l2'}", f"--model_dir={tmp_path / 'gan'}",
        ],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert "| copy t-1 |" in run.stdout and "| gan | 0.1 |" in run.stdout
    data = json.loads((out / "infilling_benchmark.json").read_text())
    assert set(data["models"]) == {"copy t-1", "l2", "gan"}
    assert data["models"]["copy t-1"]["sample_diversity"] == 0.0
    assert data["models"]["gan"]["sample_diversity"] > 0 and data["settings"]["examples"] == 8
    from PIL import Image

    picture = np.asarray(Image.open(out / "infills.png").convert("L"))
    assert picture[:, :3].min() == 255  # the row labels ("gan+ms #1", ...) are not cut off
    assert (out / "table.txt").read_text().startswith("| model |")


def test_comparing_bad_directories_fails_naming_them_and_writes_nothing(raw_dir, tmp_path):
    from rl755.models.infilling.eval import evaluate_infilling_models

    raw, _ = raw_dir
    out = tmp_path / "nothing"
    with pytest.raises(BadInput, match=r"--model_dir=.*none: No complete checkpoint"):
        evaluate_infilling_models([str(tmp_path / "none")], str(out))
    _train(tmp_path / "next", raw, train_steps=1, save_every_n_steps=1, validation_steps=0)
    _train(
        tmp_path / "region", raw, train_steps=1, save_every_n_steps=1, validation_steps=0,
        task="region",
    )  # fmt: skip
    with pytest.raises(BadInput, match=r"different things \(\{'task': \('next_frame', 'region'\)"):
        evaluate_infilling_models([str(tmp_path / "next"), str(tmp_path / "region")], str(out))
    with pytest.raises(BadInput, match="one distinct name per --model_dir"):
        evaluate_infilling_models([str(tmp_path / "next")], str(out), names=["a", "b"])
    assert not out.exists()
