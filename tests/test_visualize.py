"""rl755.visualize: pictures a notebook shows inline and a script saves (tiny fake models)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from rl755 import visualize
from rl755.environments import Environments

H, W = Environments.FAKE_PIXELS.observation_shape[:2]


def _frames(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, H, W, 3), dtype=np.uint8)


def _open(picture):
    return Image.open(io.BytesIO(picture.data))


def test_frame_grid_lays_out_rows_and_pads_with_blank_frames():
    frames = _frames(5)
    grid = visualize.frame_grid(frames, columns=3)  # 2 rows x 3 columns, last cell blank
    assert grid.shape == (2 * H, 3 * W, 3) and grid.dtype == np.uint8
    np.testing.assert_array_equal(grid[:H, W : 2 * W], frames[1])
    np.testing.assert_array_equal(grid[H:, :W], frames[3])
    assert not grid[H:, 2 * W :].any()
    floats = visualize.frame_grid(np.full((2, H, W, 3), 0.5, np.float32))
    assert floats.dtype == np.uint8 and floats.max() == 128 and floats.shape == (H, 2 * W, 3)
    with pytest.raises(ValueError, match="frames \\[N, H, W, C\\]"):
        visualize.frame_grid(frames[0])


def test_pictures_are_png_or_gif_shown_inline_and_saved(tmp_path):
    png = visualize.frames_image(_frames(4))
    assert png.format == "png" and png.data[:4] == b"\x89PNG"
    assert _open(png).size[1] >= visualize.MIN_HEIGHT  # 16-pixel frames scaled up to be seen
    assert set(png._repr_mimebundle_()) == {"image/png", "text/plain"}

    gif = visualize.animation(_frames(6), fps=5, scale=1)
    assert gif.format == "gif" and _open(gif).n_frames == 6 and _open(gif).size == (W, H)
    assert _open(gif).info["duration"] == 200
    # each frame 1/fps to GIF's 10 ms, at least 20 ms (browsers slow down 0-10 ms frames)
    for fps, ms in ((30, 30), (12, 80), (28.6, 30), (28.4, 40), (51.3, 20), (60, 20), (500, 20)):
        assert _open(visualize.animation(_frames(2), fps=fps)).info["duration"] == ms, fps
    assert "data:image/gif;base64," in gif._repr_mimebundle_()["text/html"]

    path = gif.save(str(tmp_path / "sub" / "a.gif"))
    assert visualize.from_file(path) == gif
    assert visualize.from_file(png.save(str(tmp_path / "b.png"))).format == "png"
    bigger = _open(visualize.from_file(path, scale=None))  # a stage's 16-pixel GIF, scaled up
    assert bigger.n_frames == 6 and bigger.size[1] >= visualize.MIN_HEIGHT
    assert bigger.info["duration"] == 200
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.gif", "b.png", "sub"]  # no temps


def test_jupyter_displays_a_picture():
    formatters = pytest.importorskip("IPython.core.formatters")
    data, _ = formatters.DisplayFormatter().format(visualize.frames_image(_frames(2)))
    assert "image/png" in data


def test_labeled_rows_leave_room_for_their_labels(monkeypatch):
    """1.4 in. at least beside the frames, and 0.4 + 0.09 in. a character for long labels."""
    sizes = []
    from rl755.common import pictures

    real = pictures.figure
    monkeypatch.setattr(
        pictures, "figure", lambda fig: sizes.append(fig.get_size_inches()) or real(fig)
    )
    rows = {"real": _frames(2), "dream": _frames(2)}
    visualize.labeled_rows(rows)
    visualize.labeled_rows({"a label thirty characters long": _frames(2), "x": _frames(2)})
    frames_w = sizes[0][0] - 1.4
    assert sizes[1][0] == pytest.approx(frames_w + 0.4 + 0.09 * 30)


def test_labeled_rows_and_figures_are_pngs_without_touching_pyplot():
    import matplotlib

    backend = matplotlib.get_backend()
    picture = visualize.labeled_rows({"real": _frames(3), "dream": _frames(2)}, title="t")
    assert picture.format == "png" and _open(picture).size[0] > 3 * W
    fig, ax = visualize.new_figure()
    ax.plot([0, 1], [1, 0])
    assert visualize.figure(fig).format == "png"
    assert matplotlib.get_backend() == backend  # a notebook's inline backend stays in force


@pytest.fixture(scope="module")
def tiny_world_model():
    """A tiny VAE and MDN-RNN at random weights, and one fake rollout (24 steps)."""
    import keras

    from rl755.models import catalogue

    keras.utils.set_random_seed(0)
    vae = catalogue.build("FAKE_PIXELS", "vae.Vae", representation_size=4).build_for_frames()
    seq = catalogue.build("FAKE_PIXELS", "mdn_rnn.mdn_rnn")
    env = Environments.FAKE_PIXELS.make()
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    frames, actions = [obs], []
    for _ in range(16):
        a = rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32)
        obs, *_ = env.step(a)
        frames.append(obs)
        actions.append(a)
    return vae, seq, np.stack(frames), np.stack(actions)


def test_reconstructions_put_the_seen_frames_above_their_reconstructions(tiny_world_model):
    vae, _, frames, _ = tiny_world_model
    grid = visualize.reconstructions(vae, frames[:5])
    assert grid.shape == (2 * H, 5 * W, 3) and grid.dtype == np.uint8
    np.testing.assert_array_equal(grid[:H], visualize.frame_grid(frames[:5]))  # no crop here
    assert visualize.reconstructions_image(vae, frames[:5]).format == "png"


class _PlusOne:
    """A sequential model whose next z is the z it was last fed plus 1 (no noise)."""

    def initial_state(self, batch):
        return ()

    def step(self, z, action, state):
        return z, state

    def sample_next(self, h, temperature, seed, z):
        return {"z": tf.cast(h, tf.float64) + 1.0}  # a model of another dtype


def test_the_one_step_row_feeds_real_latents_and_the_dream_its_own():
    z = np.arange(10, dtype=np.float32)[:, None] * 10.0 * np.ones((1, 2), np.float32)
    actions = np.zeros((10, 3), np.float32)
    args = (_PlusOne(), z, actions, 3, 4)
    one_step = visualize._step_latents(*args, False, 1.0, 0)
    dream = visualize._step_latents(*args, True, 1.0, 0)
    np.testing.assert_array_equal(one_step[:, 0], [31, 41, 51, 61])  # z_t + 1, t = 3..6
    np.testing.assert_array_equal(dream[:, 0], [31, 32, 33, 34])  # from z_3, on its own
    assert one_step.dtype == dream.dtype == np.float32  # and fed back as float32


def test_world_model_rows_one_step_and_dreams(tiny_world_model):
    vae, seq, frames, actions = tiny_world_model
    rows = visualize.world_model_rows(
        vae, seq, frames, actions, start=4, num_steps=6, temperature=1.0, seed=3
    )
    assert list(rows) == ["real", "VAE", "one-step", "dream"]
    for label, r in rows.items():
        assert r.shape == (6, H, W, 3), label
    np.testing.assert_allclose(rows["real"], frames[5:11] / 255.0, atol=1e-6)
    # Both see the real frames up to `start`, so their first prediction is the same sample;
    # after it the dream feeds on its own samples and the one-step row on the real frames.
    np.testing.assert_allclose(rows["dream"][0], rows["one-step"][0], atol=1e-6)
    assert np.abs(rows["dream"][1:] - rows["one-step"][1:]).max() > 1e-4
    again = visualize.world_model_rows(
        vae, seq, frames, actions, 4, 6, rows=("dream",), temperature=1.0, seed=3
    )
    np.testing.assert_array_equal(again["dream"], rows["dream"])  # seeded: reproducible
    other = visualize.world_model_rows(
        vae, seq, frames, actions, 4, 6, rows=("dream T=1.5",), seed=3
    )
    assert np.abs(other["dream T=1.5"] - rows["dream"]).max() > 1e-4
    # "dream T=1.5" is the dream at temperature 1.5, whatever `temperature` says
    hot = visualize.world_model_rows(vae, seq, frames, actions, 4, 6, rows=("dream",),
                                     temperature=1.5, seed=3)  # fmt: skip
    np.testing.assert_array_equal(other["dream T=1.5"], hot["dream"])
    with pytest.raises(ValueError) as info:
        visualize.world_model_rows(vae, seq, frames, actions, start=11, num_steps=6)
    assert str(info.value) == (
        f"Steps 12..17 need at least 18 frames and 17 actions, got {len(frames)} and "
        f"{len(actions)}."
    )
    with pytest.raises(ValueError, match="Unknown row"):
        visualize.world_model_rows(vae, seq, frames, actions, 2, 2, rows=("nope",))


def test_model_pictures(tiny_world_model, tmp_path):
    vae, seq, frames, actions = tiny_world_model
    image = visualize.predicted_frames(vae, seq, frames, actions, start=2, num_steps=5)
    assert image.shape == (3 * H, 5 * W, 3) and image.dtype == np.uint8
    visualize.save_png(str(tmp_path / "p.png"), image, title="x")
    assert visualize.from_file(str(tmp_path / "p.png")).format == "png"
    assert visualize.predictions_image(vae, seq, frames, actions, 2, 5).format == "png"
    assert visualize.temperatures_image(vae, seq, frames, actions, (0.5, 2.0), 2, 5).format == "png"
    gif = visualize.dream_animation(vae, seq, frames, actions, start=0)
    assert _open(gif).n_frames == len(frames) - 1
    assert _open(gif).size[0] == 2 * _open(gif).size[1]  # real | dream side by side
    rewards = np.linspace(0, 1, len(frames))
    assert visualize.latent_projection(vae, frames, rewards, "reward").format == "png"


def test_pictures_and_visualize_import_without_tensorflow():
    """Stage code and notebooks import them cheaply; TensorFlow loads only for model pictures."""
    import subprocess
    import sys

    code = "import sys, rl755.visualize; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_registered_models_are_loaded_by_kind_and_drawn(monkeypatch, tmp_path):
    """predicted_frames_for_registry builds the encoder and the sequential model from their
    zoo names (each looked up as its kind) and draws with those two."""
    from rl755 import zoo

    asked, drawn = [], []

    def get(env, name, kind=None):
        asked.append((env, name, kind))
        return lambda: f"built {name}"

    monkeypatch.setattr(zoo, "get", get)
    monkeypatch.setattr(visualize, "predicted_frames_of_models", lambda *a: drawn.append(a) or a[3])
    out = str(tmp_path / "p.png")
    assert visualize.predicted_frames_for_registry("FAKE_PIXELS", "e", "s", out, 3) == out
    assert asked == [("FAKE_PIXELS", "e", zoo.ENCODER), ("FAKE_PIXELS", "s", zoo.SEQUENTIAL)]
    assert drawn == [("FAKE_PIXELS", "built e", "built s", out, 3)]


def test_latent_projection_plots_the_centred_latents_on_their_principal_axes(monkeypatch):
    """z far from the origin, moving along dimension 0: the points lie on PC 1 at z_t's offset
    from the mean, and PC 2 is 0 (the mean is taken out before the projection)."""
    t = np.arange(8, dtype=np.float64)
    z = np.stack([100.0 + 3 * t, np.full(8, 50.0), np.full(8, -20.0)], axis=1)
    monkeypatch.setattr(visualize, "encode", lambda encoder, frames: z)
    figures = []
    real = visualize.figure
    monkeypatch.setattr(visualize, "figure", lambda fig: figures.append(fig) or real(fig))
    visualize.latent_projection(None, np.zeros((8, H, W, 3), np.uint8))
    xy = figures[0].axes[0].collections[0].get_offsets()
    np.testing.assert_allclose(np.abs(xy[:, 0]), np.abs(3 * t - 10.5), atol=1e-9)
    np.testing.assert_allclose(xy[:, 1], 0.0, atol=1e-9)


def test_latent_projection_labels_its_colour_bar_axes_and_title(tiny_world_model, monkeypatch):
    vae, _, frames, _ = tiny_world_model
    assert _open(visualize.latent_projection(vae, frames)).size == (600, 450)  # 6 x 4.5 in
    figures = []
    real = visualize.figure
    monkeypatch.setattr(visualize, "figure", lambda fig: figures.append(fig) or real(fig))
    visualize.latent_projection(vae, frames)
    rewards = np.linspace(1.0, 0.0, len(frames))
    visualize.latent_projection(vae, frames, rewards, "reward")
    (ax, bar), (reward_ax, reward_bar) = (f.axes for f in figures)
    assert (bar.get_ylabel(), reward_bar.get_ylabel()) == ("time step", "reward")
    # each frame's point is coloured by its value: the frame index, or the colour given
    [points], [reward_points] = ax.collections, reward_ax.collections
    # the points are where the line through them in time order goes
    np.testing.assert_array_equal(points.get_offsets(), ax.lines[0].get_xydata())
    np.testing.assert_array_equal(points.get_array(), np.arange(len(frames)))
    np.testing.assert_array_equal(reward_points.get_array(), rewards)
    z = vae.representation_size
    assert ax.get_title() == f"z of {len(frames)} frames (Z = {z})"
    assert ax.title.get_fontsize() == 9
    assert ax.get_xlabel().startswith("PC 1 (") and ax.get_ylabel().startswith("PC 2 (")


def test_world_model_rows_encode_only_the_frames_they_show(tiny_world_model, monkeypatch):
    vae, seq, frames, actions = tiny_world_model
    encoded = []
    real = visualize.encode
    monkeypatch.setattr(visualize, "encode", lambda e, f: encoded.append(len(f)) or real(e, f))
    visualize.world_model_rows(vae, seq, frames, actions, start=2, num_steps=3, rows=("VAE",))
    assert encoded == [6]  # frames 0..5: the start's context and the steps shown


def test_frames_in_0_1_become_bytes_clipped_and_rounded():
    from rl755.common.pictures import to_uint8

    frames = np.array([-0.2, 0.0, 0.5, 1.0, 1.5, 0.999])
    np.testing.assert_array_equal(to_uint8(frames), [0, 0, 128, 255, 255, 255])


def test_predicted_frames_are_drawn_from_the_first_long_enough_validation_rollout(
    tiny_world_model, tmp_path, monkeypatch
):
    from test_rollout_datasets import _raw_rollout, _write

    vae, seq, _, _ = tiny_world_model
    rng = np.random.default_rng(0)
    raw = tmp_path / "data" / "fake" / "raw_rollouts"
    raw.mkdir(parents=True)
    _write(raw, "rollouts-validation", [_raw_rollout(rng, 8), _raw_rollout(rng, 30)])
    _write(raw, "rollouts-train", [_raw_rollout(rng, 80)])
    drawn = []

    def predicted_frames(encoder, seq_, frames, actions, start, num_steps):
        assert encoder is vae and seq_ is seq  # the models it was given
        assert len(frames) == len(actions)  # the rollout as stored
        drawn.append((len(actions), start, num_steps))
        return np.zeros((H, W, 3), np.uint8)

    monkeypatch.setattr(visualize, "predicted_frames", predicted_frames)
    env = Environments.FAKE_PIXELS
    out = str(tmp_path / "p.png")
    assert visualize.predicted_frames_of_models(env, vae, seq, out, num_steps=4) == out
    assert drawn == [(30, 25, 4)]  # 30 steps: starts 4 + 1 before the end (at most 50)
    visualize.predicted_frames_of_models(env, vae, seq, out, num_steps=20)  # 41 steps: train
    assert drawn[1] == (80, 50, 20)
    with pytest.raises(ValueError, match="No rollout with at least 201 steps"):
        visualize.predicted_frames_of_models(env, vae, seq, out, num_steps=100)


def test_a_predictions_picture_starts_after_8_steps_by_default(tiny_world_model, monkeypatch):
    vae, seq, frames, actions = tiny_world_model
    titles = []
    real = visualize.labeled_rows
    monkeypatch.setattr(
        visualize, "labeled_rows", lambda rows, title: titles.append(title) or real(rows, title)
    )
    visualize.predictions_image(vae, seq, frames, actions)
    assert titles == ["steps 9-16"]
