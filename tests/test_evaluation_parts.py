"""Parts of the world-model benchmark a whole run does not look at closely: a mixture
model's predicted reward, decoded frames' dtype, the table's header, the error-curve figure
with frame errors, and the dataset a --rollouts_pattern selects."""

import os

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from test_world_model_eval import DrawingEncoder, RandomWalkMixture, fake_env_rollouts

from rl755.evaluation import benchmark, figures, open_loop, predictions
from rl755.evaluation.rollouts import from_episodes
from rl755.testing.fake_world_model import FakeDynamicsModel


class RewardingMixture(RandomWalkMixture):
    """RandomWalkMixture that also predicts a reward (twice z's first entry) and an end."""

    def predict_from_hidden(self, hidden):
        out = super().predict_from_hidden(hidden)
        return {**out, "reward": 2.0 * hidden[..., 0], "done_logits": hidden[..., 1]}

    def done_probability(self, logits):
        return tf.sigmoid(logits)


def test_a_mixture_models_next_step_carries_its_reward_and_end():
    hidden = tf.constant([[1.0, 0.0, 2.0], [-3.0, 5.0, 0.0]])
    nxt = predictions.predict_next(RewardingMixture(), hidden, z_t=hidden)
    np.testing.assert_allclose(nxt.reward.numpy(), [2.0, -6.0])
    np.testing.assert_allclose(nxt.done_prob.numpy(), 1 / (1 + np.exp([0.0, -5.0])), rtol=1e-6)
    assert predictions.predict_next(RandomWalkMixture(), hidden, z_t=hidden).reward is None


@pytest.mark.parametrize("dtype", [tf.float16, tf.float64])
def test_decoded_frames_are_float32_whatever_the_decoder_gives(dtype):
    z = np.zeros((5, 2), np.float32)
    frames = open_loop._decode(lambda z: tf.fill([len(z), 4, 4, 3], tf.cast(2.0, dtype)), z, 2)
    assert frames.dtype == np.float32 and frames.shape == (5, 4, 4, 3)
    assert np.all(frames == 1.0)  # clipped to [0, 1]


def test_the_tables_last_column_is_the_copy_baseline():
    data = from_episodes(fake_env_rollouts(num=4))
    settings = benchmark.Settings(horizons=(1, 2), context_length=2, num_starts=4, seed=0)
    report = benchmark.evaluate_world_model("exact", FakeDynamicsModel(), data, settings)
    header = benchmark.format_table([report], benchmark.baselines(data, settings)).splitlines()[0]
    assert header.split() == ["metric", "exact", "copy", "z_t"]
    assert benchmark.format_table([report]).splitlines()[0].split() == ["metric", "exact"]


def _summary(name, frame_mse):
    ol = {"horizons": [1, 2, 4], "z_mse": [0.1, 0.2, 0.4], "z_mse_sem": [0.01] * 3}
    return {"model": name, "open_loop": {**ol, "frame_mse": frame_mse}}


def test_error_curves_add_a_frame_panel_with_each_models_curve(tmp_path, monkeypatch):
    drawn = []
    real = figures._save
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.append(fig) or real(fig, path))
    summaries = [_summary("mdn", [0.01, 0.02, 0.03]), _summary("lstm", None)]
    path = figures.error_curve_figure(str(tmp_path / "e.png"), summaries, [0.2, 0.3, 0.5])
    assert Image.open(path).size == (900, 360)  # 9 x 3.6 in at 100 dpi
    latent, frames = drawn[0].axes
    assert [t.get_text() for t in latent.get_legend().get_texts()] == ["copy last z", "mdn", "lstm"]
    assert [t.get_text() for t in frames.get_legend().get_texts()] == ["mdn"]
    assert frames.get_ylabel() == "decoded-frame MSE (pixels in [0, 1])"
    import matplotlib

    with matplotlib.rc_context({"figure.dpi": 50}):  # a user's own settings do not change it
        one = figures.error_curve_figure(str(tmp_path / "one.png"), [_summary("lstm", None)])
    assert Image.open(one).size == (500, 360)


def test_a_rollouts_pattern_is_what_the_named_dataset_reads(tmp_path):
    from rl755.evaluation import run

    pattern = str(tmp_path / "encoded-{split}*.tfrecord-*")
    dataset = run.resolve_dataset("FAKE_PIXELS", "RawRolloutVae4ld", pattern)
    assert dataset.tfrecords_pattern() == pattern
    own = run.resolve_dataset("FAKE_PIXELS", "RawRolloutVae4ld", None).tfrecords_pattern()
    assert own != pattern and "encoded_rollouts" in own


def test_the_table_has_a_row_per_measure_and_an_empty_baseline_column_without_one():
    data = from_episodes(fake_env_rollouts(num=4))
    settings = benchmark.Settings(horizons=(1, 2), context_length=2, num_starts=4, seed=0)
    report = benchmark.evaluate_world_model("exact", FakeDynamicsModel(), data, settings)
    rows = benchmark.table_rows([report])
    assert [r[0] for r in rows] == [
        "params", "next-step z MSE", "next-step z NLL/dim", "open-loop z MSE k=1",
        "open-loop z MSE k=2", "decoded frame MSE k=1", "decoded frame MSE k=2",
        "episode-end Brier", "  Brier of the base rate", "  predicted / real ends",
        "reward MSE", "dream gap mean |D-R|", "  relative to mean |R|", "seconds",
    ]  # fmt: skip
    assert all(len(r) == 3 and r[-1] == "" for r in rows)  # no baseline given
    with_base = benchmark.table_rows([report], benchmark.baselines(data, settings))
    assert with_base[1][-1] != "" and with_base[3][-1] != ""


def test_training_cost_reports_what_it_measured_with():
    from sequential_helpers import fake_model

    from rl755.evaluation import cost

    t = cost.training_cost(fake_model("lstm.deterministic_lstm"), 4, 5, steps=2, warmup=1)
    assert (t["batch_size"], t["sequence_length"]) == (4, 5)
    assert sorted(t) == [
        "batch_size", "cpu_seconds_per_step", "params", "sequence_length",
        "sequences_per_cpu_second", "sequences_per_second",
    ]  # fmt: skip


def test_the_real_hazard_is_drawn_once_black_and_dashed(tmp_path, monkeypatch):
    drawn = []
    real = figures._save
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.append(fig) or real(fig, path))
    hazard = {"step_start": [0, 10], "step_end": [10, 20], "predicted": [0.1, 0.2],
              "real": [0.1, None], "at_risk": [5, 2]}  # fmt: skip
    reliability = {"mean_predicted": [0.1, 0.5], "observed": [0.0, 1.0], "count": [3, 0]}
    ee = {"hazard": hazard, "reliability": reliability, "brier": 0.25}
    summaries = [{"model": m, "episode_end": ee} for m in ("a", "b")]
    figures.calibration_figure(str(tmp_path / "c.png"), summaries)
    _, haz = drawn[0].axes
    lines = {line.get_label(): line for line in haz.get_lines()}
    assert sorted(lines) == ["a", "b", "real"]
    assert (lines["real"].get_linestyle(), lines["real"].get_color()) == ("--", "k")


def test_a_sampling_models_next_step_has_a_reward_only_with_a_reward_head():
    class NoHeads(FakeDynamicsModel):
        has_reward_head = False
        has_done_head = False

        def predict_from_hidden(self, hidden):
            raise NotImplementedError

        def sample_next(self, hidden, temperature=1.0, seed=None, z=None):
            return {"z": hidden[:, :2], "reward": hidden[:, 2], "done_prob": hidden[:, 3]}

    class Heads(NoHeads):
        has_reward_head = True
        has_done_head = True

    hidden = tf.constant([[0.5, 0.1, 0.7, 0.0]])
    bare = predictions.predict_next(NoHeads(), hidden, z_t=hidden[:, :2])
    assert bare.reward is None and bare.done_prob is None
    full = predictions.predict_next(Heads(), hidden, z_t=hidden[:, :2])
    np.testing.assert_allclose(full.reward.numpy(), [0.7])
    np.testing.assert_allclose(full.done_prob.numpy(), [0.0])


def test_every_picture_of_a_benchmark_run_goes_in_its_out_dir(tmp_path, monkeypatch):
    from rl755.evaluation import run

    data = from_episodes(fake_env_rollouts(num=4))
    settings = benchmark.Settings(horizons=(1, 2), context_length=2, num_starts=4, seed=0)
    report = benchmark.evaluate_world_model(
        "exact", FakeDynamicsModel(), data, settings, DrawingEncoder().decode
    )
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(tmp_path)
    names = run._write_pictures(str(out), [report], benchmark.baselines(data, settings), settings)
    assert sorted(names.values()) == sorted(os.listdir(out))
    assert sorted(names) == ["calibration", "frames:exact", "open_loop_error"]
    assert sorted(os.listdir(tmp_path)) == ["out"]
