"""The world-model benchmark (rl755.evaluation, scripts/models/evaluate_world_model.py):
numbers that can be known exactly, and an exact model against a wrong one (the script end to
end: test_world_model_eval_script.py)."""

import numpy as np
import pytest
import tensorflow as tf

from rl755.common.errors import BadInput
from rl755.evaluation import benchmark, calibration, cost, gap, next_step, open_loop
from rl755.evaluation.rollouts import from_episodes
from rl755.models.common.sequential import SequentialModel
from rl755.testing import fake_env
from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

GRID = fake_env.SIZE - 2  # x is drawn at round(x * GRID)


# ---- models whose scores are known ---------------------------------------------------------------
class DrawingEncoder(FakeLatentEncoder):
    """FakeLatentEncoder with an exact decoder: z = [x_hat, speed_hat] -> the env's frame."""

    def decode(self, z):
        z = np.asarray(z)
        s = self.size
        frames = np.zeros((len(z), s, s, 3), np.float32)
        for i, (x, speed) in enumerate(z):
            col = int(round(x * (s - 2)))
            frames[i, : s - 2, col : col + 2, 0] = 255
            frames[i, : s - 2, col : col + 2, 1] = 128
            frames[i, s - 1, : int(round(speed * (s - 1))) + 1, 2] = 200
        return tf.constant(frames / 255.0)


class HalfSteering(FakeDynamicsModel):
    """A wrong model: steering moves the column half as far as it really does."""

    def step(self, z, a, state):
        return super().step(z, tf.cast(a, tf.float32) * [0.5, 1.0, 1.0], state)


class RandomWalkMixture(SequentialModel):
    """z_{t+1} - z_t ~ 0.25 N(0, 1) + 0.75 N(1, 0.5^2) in each dimension; hidden = z_t."""

    def __init__(self, difference_targets=False, **kwargs):
        super().__init__(**kwargs)
        self.difference_targets = difference_targets

    representation_size = 3
    action_size = 2
    hidden_size = 3

    def get_loss_fn(self):
        raise NotImplementedError

    def get_hidden_representation(self, x, mask=None, training=None, position=-1):
        return x[:, position, :3]

    def initial_state(self, batch_size):
        return tf.zeros([batch_size])

    def step(self, z, a, state):
        return tf.cast(z, tf.float32), state

    def predict_from_hidden(self, hidden):
        base = tf.zeros_like(hidden) if self.difference_targets else hidden
        shape = tf.concat([tf.shape(hidden), [2]], 0)
        return {
            "mdn_logits": tf.broadcast_to(tf.math.log([0.25, 0.75]), shape),
            "mdn_locs": base[..., None] + tf.constant([0.0, 1.0]),
            "mdn_scales": tf.broadcast_to(tf.constant([1.0, 0.5]), shape),
        }


def random_walk_rollouts(lengths, seed=0, step=None):
    rng = np.random.default_rng(seed)
    eps = []
    for n in lengths:
        dz = rng.normal(size=(n, 3)) if step is None else np.full((n, 3), step)
        eps.append(
            {
                "observations": np.cumsum(dz, axis=0).astype(np.float32),
                "actions": rng.normal(size=(n, 2)).astype(np.float32),
                "rewards": rng.normal(size=n).astype(np.float32),
                "done": False,
            }
        )
    return eps


def fake_env_rollouts(num=12, seed=0):
    """Real FAKE_PIXELS episodes encoded by FakeLatentEncoder that the exact model
    reproduces exactly: the column starts on the pixel grid and steering moves it by whole
    cells, except that a move onto a wall steers fully (clipped to exactly 0 or 1; a
    floating-point sum landing a hair short of the wall would not count as touching it).
    Every third episode drives into a wall and terminates."""
    rng = np.random.default_rng(seed)
    enc = FakeLatentEncoder()
    eps = []
    for i in range(num):
        env = fake_env.FakePixelEnv()
        env.reset(seed=seed + i)
        env._x = round(env._x * GRID) / GRID
        frame, frames, actions, rewards, done = env._frame(), [], [], [], False
        for _ in range(fake_env.MAX_STEPS):
            cells = (3 if i % 2 else -3) if i % 3 == 0 else int(rng.integers(-3, 4))
            target = round(env._x * GRID) + cells
            steer = cells * 2 / 7 if 0 < target < GRID else float(np.sign(cells))
            pedal = rng.uniform()
            action = np.array([steer, pedal, pedal], np.float32)  # gas = brake: speed stays 0
            frames.append(frame)
            frame, r, done, _, _ = env.step(action)
            actions.append(action)
            rewards.append(r)
            if done:
                break
        z = enc.compute_representation(np.stack(frames)).numpy()
        eps.append({"observations": z, "actions": actions, "rewards": rewards, "done": done})
    return eps


# ---- exact numbers -------------------------------------------------------------------------------
def test_the_copy_last_baseline_by_hand():
    """ "Nothing changes" (z_{t+1} = z_t): the squared step, averaged over z's dimensions and
    over the steps that have a next z only (not padding, not a rollout's last step)."""
    lengths = [7, 3, 11, 1, 5]
    episodes = random_walk_rollouts(lengths, seed=4)
    per_step = []
    for e in episodes:
        z = e["observations"].astype(np.float64)
        per_step += list(np.mean(np.square(z[1:] - z[:-1]), axis=-1))
    assert len(per_step) == sum(lengths) - len(lengths)
    got = next_step.copy_last_mse(from_episodes(episodes))
    np.testing.assert_allclose(got, np.mean(per_step), rtol=1e-6)


@pytest.mark.parametrize("difference_targets", [False, True])
def test_next_step_nll_and_mse_of_a_known_mixture(difference_targets):
    lengths = [7, 3, 11, 1, 5]  # padded to 11; padding and last steps must not count
    data = from_episodes(random_walk_rollouts(lengths))
    model = RandomWalkMixture(difference_targets=difference_targets)
    pred = next_step.teacher_forced(model, data, chunk_length=4)
    got = next_step.next_step_metrics(pred, data)

    def normal(x, mu, sd):
        return np.exp(-0.5 * ((x - mu) / sd) ** 2) / (sd * np.sqrt(2 * np.pi))

    nll, se = [], []
    for e in random_walk_rollouts(lengths):
        z = e["observations"].astype(np.float64)
        dz = z[1:] - z[:-1]  # [n - 1, 3]
        p = 0.25 * normal(dz, 0, 1) + 0.75 * normal(dz, 1, 0.5)
        nll += list(-np.log(p).mean(axis=1))
        se += list(np.square(dz - 0.75).mean(axis=1))  # mixture mean: z_t + 0.75
    assert got["num_targets"] == sum(lengths) - len(lengths) == len(nll)
    np.testing.assert_allclose(got["z_nll_per_dim"], np.mean(nll), rtol=1e-5)
    np.testing.assert_allclose(got["z_mse"], np.mean(se), rtol=1e-5)
    assert pred.reward is None and pred.done_prob is None


def test_open_loop_of_a_known_drift_and_the_copy_baseline():
    """Data drifting by exactly 0.5 per step, a model whose mean drifts by 0.75: fed its own
    predictions, it is off by 0.25 k after k steps; holding the last z is off by 0.5 k."""
    data = from_episodes(random_walk_rollouts([30, 12, 25], step=0.5))
    windows = open_loop.sample_windows(data.lengths, 3, 20, num_starts=10, seed=1)
    assert len(windows) == 10 and np.all(windows[:, 1] + 23 <= data.lengths[windows[:, 0]])
    all_windows = open_loop.sample_windows(data.lengths, 3, 20, num_starts=1000)
    assert len(all_windows) == (30 - 23 + 1) + (25 - 23 + 1)  # rollout 1 is too short
    ol = open_loop.open_loop(RandomWalkMixture(), data, windows, 3, horizons=(1, 5, 20))
    np.testing.assert_allclose(ol.summary()["z_mse"], [(0.25 * k) ** 2 for k in (1, 5, 20)], 1e-5)
    base = open_loop.copy_last_z_mse(data, windows, 3, (1, 5, 20))
    np.testing.assert_allclose(base, [(0.5 * k) ** 2 for k in (1, 5, 20)], rtol=1e-5)
    with pytest.raises(BadInput, match="--horizons"):
        open_loop.sample_windows(data.lengths, 3, 40, num_starts=4)


def test_open_loop_windows_are_distinct_and_its_sem_is_the_standard_error():
    lengths = [30, 12, 25]  # 8 + 0 + 3 = 11 windows of 3 + 20 steps
    for seed in range(5):
        w = open_loop.sample_windows(lengths, 3, 20, num_starts=10, seed=seed)
        assert len({tuple(r) for r in w.tolist()}) == 10, w
    every = {(0, s) for s in range(8)} | {(2, s) for s in range(3)}
    assert {tuple(r) for r in open_loop.sample_windows(lengths, 3, 20, 11).tolist()} == every
    # Errors 0, 1, 2, 3 at horizon 1: squared errors 0, 1, 4, 9, mean 3.5, sample variance
    # (3.5^2 + 2.5^2 + 0.5^2 + 5.5^2) / 3 = 49 / 3, standard error sqrt(49 / 3) / sqrt(4).
    real = np.zeros((4, 2, 1), np.float32)
    predicted = np.arange(4, dtype=np.float32).reshape(4, 1, 1)
    s = open_loop.OpenLoop((1,), 1, 0.0, predicted, real).summary()
    assert s["z_mse"] == [3.5]
    np.testing.assert_allclose(s["z_mse_sem"], [np.sqrt(49 / 3) / 2], rtol=1e-6)


def test_sampled_open_loop_is_seeded_and_reaches_every_model_kind():
    """At temperature > 0 a mixture model feeds itself samples: the same seed gives the same
    numbers, another seed others; deterministic models give their prediction either way."""
    from sequential_helpers import fake_model

    rng = np.random.default_rng(0)
    eps = [
        {
            "observations": rng.normal(size=(12, 4)),
            "actions": rng.uniform(-1, 1, (12, 3)),
            "rewards": rng.normal(size=12),
            "done": False,
        }
        for _ in range(3)
    ]
    data = from_episodes(eps)
    windows = open_loop.sample_windows(data.lengths, 2, 5, num_starts=6)
    mdn, det = fake_model("mdn_rnn.mdn_rnn")(), fake_model("lstm.deterministic_lstm")(
        difference_targets=True
    )

    def run(model, temperature, seed):
        ol = open_loop.open_loop(model, data, windows, 2, (1, 5), temperature, seed)
        return ol.summary()["z_mse"]

    assert run(mdn, 1.0, 3) == run(mdn, 1.0, 3) != run(mdn, 1.0, 4)
    assert run(mdn, 0.0, 3) == run(mdn, 0.0, 4)  # the mixture mean
    assert run(det, 1.0, 3) == run(det, 0.0, 4)


def test_calibration_numbers_by_hand():
    p = np.array([[0.1, 0.9, 0.0], [0.5, 0.5, 0.7]])
    y = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    mask = np.array([[1, 1, 1], [1, 1, 0]], np.float32)  # the 0.7 / 1.0 step is padding
    m = calibration.episode_end_metrics(p, y, mask, num_bins=2, hazard_bin_width=1)
    np.testing.assert_allclose(m["brier"], (0.01 + 0.01 + 0 + 0.25 + 0.25) / 5)
    np.testing.assert_allclose(m["brier_base_rate"], (4 * 0.2**2 + 0.8**2) / 5)
    assert m["real_ends"] == 1 and m["num_steps"] == 5
    np.testing.assert_allclose(m["predicted_ends"], 2.0)
    rel = m["reliability"]  # bins [0, 0.5) and [0.5, 1]
    assert rel["count"] == [2, 3]
    np.testing.assert_allclose(rel["mean_predicted"], [0.05, 1.9 / 3])
    np.testing.assert_allclose(rel["observed"], [0.0, 1 / 3])
    haz = m["hazard"]
    assert haz["at_risk"] == [2, 2, 1] and haz["step_start"] == [0, 1, 2]
    np.testing.assert_allclose(haz["real"], [0.0, 0.5, 0.0])
    np.testing.assert_allclose(haz["predicted"], [0.3, 0.7, 0.0])
    r = calibration.reward_metrics(p, y, mask)
    np.testing.assert_allclose([r["mse"], r["bias"]], [0.104, (0.1 - 0.1 + 0 + 0.5 + 0.5) / 5])


def test_hazard_bins_default_to_a_tenth_of_the_longest_rollout_in_steps():
    """3 rollouts of up to 40 steps: bins of 4 steps (not of 3 / 10 rollouts, rounded up)."""
    mask = np.ones((3, 40), np.float32)
    mask[0, 25:] = 0  # a shorter rollout does not change the width
    y = np.zeros((3, 40))
    y[0, 24] = y[1, 39] = y[2, 5] = 1.0
    haz = calibration.episode_end_metrics(np.full((3, 40), 0.1), y, mask)["hazard"]
    assert haz["step_start"] == list(range(0, 40, 4)) and haz["step_end"][-1] == 40
    assert haz["at_risk"][:2] == [12, 12] and haz["at_risk"][6:] == [9, 8, 8, 8]
    np.testing.assert_allclose(haz["real"][1], 1 / 12)  # rollout 2's end at step 5
    one_step = calibration.episode_end_metrics(np.full((2, 7), 0.1), y[:2, :7], mask[:2, :7])
    assert one_step["hazard"]["step_start"] == list(range(7))  # ceil(7 / 10) = 1


def test_exact_model_scores_perfectly_and_a_wrong_model_worse():
    data = from_episodes(fake_env_rollouts())
    assert 0 < data.terminated.sum() < data.num_rollouts
    settings = benchmark.Settings(
        horizons=(1, 2, 5, 10), context_length=3, num_starts=40, chunk_length=24, seed=2
    )
    decode = DrawingEncoder().decode
    exact = benchmark.evaluate_world_model("exact", FakeDynamicsModel(), data, settings, decode)
    wrong = benchmark.evaluate_world_model("wrong", HalfSteering(), data, settings, decode)
    e, w = exact.summary, wrong.summary
    assert e["next_step"]["z_mse"] == 0.0 and e["next_step"]["z_nll_per_dim"] is None
    assert e["open_loop"]["z_mse"] == [0.0] * 4 and e["open_loop"]["frame_mse"] == [0.0] * 4
    assert e["open_loop"]["num_windows"] == 40
    assert e["episode_end"]["brier"] == 0.0
    assert e["episode_end"]["predicted_ends"] == e["episode_end"]["real_ends"] > 0
    ends = e["episode_end"]["hazard"]
    assert ends["predicted"] == ends["real"]
    assert e["reward"]["mse"] < 1e-12
    # The wrong model is worse everywhere, and its open-loop error grows with the horizon.
    assert w["next_step"]["z_mse"] > 1e-4
    assert np.all(np.diff(w["open_loop"]["z_mse"]) > 0) and w["open_loop"]["z_mse"][0] > 0
    assert min(w["open_loop"]["frame_mse"]) > 0
    assert w["episode_end"]["brier"] > 0.01 and w["reward"]["mse"] > 1e-4
    frames = exact.example_frames
    assert frames["real"].shape == (3, 5, 16, 16, 3)
    np.testing.assert_array_equal(frames["real"], frames["predicted"])
    table = benchmark.format_table([exact, wrong], benchmark.baselines(data, settings))
    assert "exact" in table and "open-loop z MSE k=10" in table and "copy z_t" in table


def test_dream_gap_number():
    g = {
        "num_episodes": 3,
        "seed": 0,
        "temperature": 1.0,
        "max_steps": 10,
        "policies": {
            "random": {"dream": {"mean": 1.0}, "real": {"mean": 2.0}},
            "constant:x": {"dream": {"mean": -3.0}, "real": {"mean": -1.0}},
            "controller": {"dream": {"mean": 100.0}, "real": {"mean": 0.0}},
        },
    }
    s = gap.summarize_gap(g)
    assert s["mean_abs_gap"] == 1.5 and s["relative_gap"] == 1.0
    assert set(s["policies"]) == {"random", "constant:x"}
    # The exact model's dream differs from the real episode only by where the first frame
    # shows the column (|x_hat - x| <= 1/28, so at most 1/14 of reward per step); a model that
    # steers half as far misjudges the policies that steer.
    kw = dict(num_episodes=3, seed=10, max_steps=24)
    exact = gap.model_dream_gap("FAKE_PIXELS", FakeLatentEncoder, FakeDynamicsModel, **kw)
    wrong = gap.model_dream_gap("FAKE_PIXELS", FakeLatentEncoder, HalfSteering, **kw)
    for name, v in exact["policies"].items():
        assert name == "random" or abs(v["dream"] - v["real"]) <= 24 / 14, (name, v)
    assert exact["mean_abs_gap"] < wrong["mean_abs_gap"], (exact, wrong)
    for name in ("constant:a0_low", "constant:a0_high"):
        e, w = exact["policies"][name], wrong["policies"][name]
        assert e["real"] == w["real"] and abs(w["dream"] - w["real"]) > abs(e["dream"] - e["real"])


def test_the_random_policys_dream_repeats_whatever_the_process_drew_before():
    """dream_gap's uniform random policy draws from its own generator seeded by --seed: the
    same seed dreams the same actions after other random draws and another global seed (it
    once drew from TensorFlow's global stream, so its dream and the gap moved with test
    order)."""
    kw = dict(num_episodes=2, seed=10, max_steps=12)
    tf.random.set_seed(1)
    a = gap.model_dream_gap("FAKE_PIXELS", FakeLatentEncoder, FakeDynamicsModel, **kw)
    tf.random.set_seed(2)
    tf.random.uniform([7])
    b = gap.model_dream_gap("FAKE_PIXELS", FakeLatentEncoder, FakeDynamicsModel, **kw)
    assert a["policies"]["random"]["dream"] == b["policies"]["random"]["dream"]
    other = gap.model_dream_gap("FAKE_PIXELS", FakeLatentEncoder, FakeDynamicsModel, **{
        **kw, "seed": 11})  # fmt: skip
    assert other["policies"]["random"]["dream"] != a["policies"]["random"]["dream"]


def test_cost_figures_of_a_tiny_model():
    from sequential_helpers import fake_model

    t = cost.training_cost(fake_model("lstm.deterministic_lstm"), 4, 5, steps=2, warmup=1)
    a = cost.acting_cost(
        fake_model("lstm.deterministic_lstm"), batch_size=2, context=3, steps=3, warmup=1
    )
    assert t["sequences_per_cpu_second"] > 0 and t["params"] > 0
    assert a["cpu_ms_per_step"] >= 0 and a["wall_ms_per_step"] > 0


# ---- the script ------------------------------------------------------------------------------------
