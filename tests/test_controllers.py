"""Controllers, the batched world-model agent, dream evaluation (no Ray)."""

import numpy as np
import pytest
import tensorflow as tf

from rl755.controller import networks as controllers
from rl755.controller import resolve, saved
from rl755.controller.agent import AgentSpec, run_episodes
from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
from rl755.data_gen import episodes
from rl755.environments import Environments
from rl755.policies.learned import WorldModelPolicy
from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

ENV = Environments.FAKE_PIXELS
# Reset seeds whose initial x lies on the frame's pixel grid (|14 x - round(14 x)| < 1e-4):
# there the frame shows the whole state, so the exact model knows everything the env knows.
GRID_SEEDS = [3850, 4645, 5222, 10642, 11026, 20136, 47408, 47771]


def exact_spec(controller="LinearController", **kw):
    return AgentSpec(
        ENV.name,
        controller,
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel,
        **kw,
    )


def test_world_models_param_counts():
    car = Environments.CAR_RACING
    assert controllers.make_controller("LinearController", 32 + 256, car).num_params == 867
    hidden = controllers.make_controller("HiddenLayerController", 32, car, hidden_units=40)
    assert hidden.num_params == 1443  # the paper's "z + 40 hidden units" controller
    doom = controllers.make_controller(
        "ThresholdController", 64 + 512 + 512, Environments.DOOM_TAKE_COVER
    )
    assert doom.num_params == 1088  # the paper's Doom controller: [z, h, c] -> one output


def test_threshold_controller_plays_left_noop_right_by_its_one_output():
    """World Models' Doom rule: y = tanh(w . x); y < -1/3 left, y > 1/3 right, else no-op."""
    doom = Environments.DOOM_TAKE_COVER
    ctrl = controllers.make_controller("ThresholdController", 2, doom)
    meanings = doom.spec.action_meanings
    w = np.array([[1.0, 0.0]])
    y = np.array([-0.9, -0.34, -0.32, 0.0, 0.32, 0.34, 0.9])
    inputs = np.stack([np.arctanh(y), np.full_like(y, 7.0)], axis=-1)[None]  # [1, 7, 2]
    actions = ctrl.act(w, inputs)
    assert actions.shape == (1, 7, 3) and np.all(actions.sum(-1) == 1)
    played = [meanings[i] for i in actions[0].argmax(-1)]
    assert played == ["MOVE_LEFT"] * 2 + ["NOOP"] * 3 + ["MOVE_RIGHT"] * 2
    via_tf = ctrl.act(tf.constant(w), tf.constant(inputs, tf.float32)).numpy()
    np.testing.assert_array_equal(via_tf, actions)
    # Saved and loaded, it plays the levels it was made with.
    mirrored = controllers.make_controller("ThresholdController", 2, doom, levels=ctrl.levels[::-1])
    meta = saved.controller_meta(resolve.make_agent_spec(doom, "ThresholdController"), mirrored)
    again = controllers.make_controller(
        "ThresholdController", 2, doom, **saved.saved_controller_kwargs(meta)
    )
    mirrored_play = [meanings[i] for i in again.act(w, inputs)[0].argmax(-1)]
    assert mirrored_play == ["MOVE_RIGHT"] * 2 + ["NOOP"] * 3 + ["MOVE_LEFT"] * 2
    breakout = controllers.make_controller("ThresholdController", 2, Environments.BREAKOUT)
    assert [Environments.BREAKOUT.spec.action_meanings[i] for i in breakout.levels] == [
        "LEFT",
        "NOOP",
        "RIGHT",
    ]
    with pytest.raises(ValueError, match="CAR_RACING's actions are continuous.*LinearController"):
        resolve.make_agent_spec("CAR_RACING", "ThresholdController")
    with pytest.raises(ValueError, match="three different action indices"):
        controllers.ThresholdController(2, 3, 0.0, 1.0, levels=(0, 0, 1))


def test_unknown_controller_lists_valid_names():
    with pytest.raises(LookupError, match="HiddenLayerController, LinearController"):
        controllers.get_controller_class("Linear")
    with pytest.raises(LookupError, match="LinearController"):
        resolve.make_agent_spec("FAKE_PIXELS", "Controller")


@pytest.mark.parametrize("name", ["LinearController", "HiddenLayerController"])
def test_actions_squashed_into_the_action_box(name):
    ctrl = controllers.make_controller(name, 5, Environments.CAR_RACING)
    rng = np.random.default_rng(0)
    params = rng.normal(0, 10, (6, ctrl.num_params))
    inputs = rng.normal(0, 100, (6, 7, 5))
    a = ctrl.act(params, inputs)
    assert a.shape == (6, 7, 3)
    assert np.all(a >= [-1, 0, 0]) and np.all(a <= [1, 1, 1])
    assert a[..., 0].min() < -0.99 and a[..., 0].max() > 0.99  # steering uses the full range
    zero = ctrl.act(np.zeros((1, ctrl.num_params)), inputs[:1])
    # World Models: steering tanh, gas (tanh + 1) / 2, brake clip(tanh, 0, 1).
    np.testing.assert_allclose(zero[0, 0], [0.0, 0.5, 0.0], atol=1e-6)
    assert np.mean(a[..., 2] == 0.0) > 0.3  # a negative output is no brake at all
    assert a[..., 2].max() > 0.99


def test_clipped_and_scaled_dimensions_follow_their_formulas():
    ctrl = controllers.LinearController(1, 2, (-1.0, 0.0), (1.0, 1.0), ("clipped", "clipped"))
    y = np.array([-2.0, -0.3, 0.0, 0.4, 3.0])
    params = np.array([[1.0, 1.0, 0.0, 0.0]])  # W = [[1, 1]], b = 0: both outputs are y
    a = ctrl.act(params, y.reshape(1, -1, 1))[0]
    np.testing.assert_allclose(a[:, 0], np.tanh(y), rtol=1e-6)  # [-1, 1]: clip is a no-op
    np.testing.assert_allclose(a[:, 1], np.clip(np.tanh(y), 0, 1), rtol=1e-6)
    scaled = controllers.LinearController(1, 2, (-1.0, 0.0), (1.0, 1.0))
    np.testing.assert_allclose(
        scaled.act(params, y.reshape(1, -1, 1))[0, :, 1], (np.tanh(y) + 1) / 2, rtol=1e-6
    )
    assert scaled.config() == {"action_squash": ["scaled", "scaled"]}
    with pytest.raises(ValueError, match="one of .*scaled.*per action dimension"):
        controllers.LinearController(1, 2, (-1.0, 0.0), (1.0, 1.0), ("clipped", "tanh"))


def test_an_environment_gives_one_squash_per_action_dimension():
    from rl755.environments.spec import EnvironmentSpec

    box = dict(observation_shape=(16, 16, 3), open_ai_name="X-v0")
    spec = EnvironmentSpec("TWO_D", action_low=(0.0, 0.0), action_high=(1.0, 1.0), **box)
    assert spec.controller_squash == ("scaled", "scaled")
    assert Environments.CAR_RACING.controller_squash == ("scaled", "scaled", "clipped")
    with pytest.raises(ValueError, match="TWO_D: controller_squash .* one entry per action dim"):
        EnvironmentSpec(
            "TWO_D",
            action_low=(0.0, 0.0),
            action_high=(1.0, 1.0),
            controller_squash=("clipped",),
            **box,
        )


def test_a_controller_saved_before_action_squash_keeps_scaling_every_dimension():
    from rl755.controller.saved import saved_controller_kwargs

    old = {"controller_kwargs": {}, "action_size": 3}
    assert saved_controller_kwargs(old)["action_squash"] == ("scaled",) * 3
    new = {
        "controller_kwargs": {"action_squash": ["scaled", "scaled", "clipped"]},
        "action_size": 3,
    }
    assert saved_controller_kwargs(new)["action_squash"] == ("scaled", "scaled", "clipped")
    ctrl = controllers.make_controller(
        "LinearController", 2, Environments.CAR_RACING, **saved_controller_kwargs(old)
    )
    zero = ctrl.act(np.zeros((1, ctrl.num_params)), np.ones((1, 1, 2)))
    np.testing.assert_allclose(zero[0, 0], [0.0, 0.5, 0.5], atol=1e-6)


@pytest.mark.parametrize("name", ["LinearController", "HiddenLayerController"])
def test_batched_equals_per_member_and_numpy_equals_tf(name):
    ctrl = (
        controllers.make_controller(name, 4, ENV, hidden_units=3)
        if name[0] == "H"
        else (controllers.make_controller(name, 4, ENV))
    )
    rng = np.random.default_rng(1)
    params = rng.normal(size=(5, ctrl.num_params))
    inputs = rng.normal(size=(5, 3, 4))
    batched = ctrl.act(params, inputs)
    for p in range(5):
        for b in range(3):
            np.testing.assert_allclose(
                batched[p, b], ctrl.act_single(params[p], inputs[p, b]), rtol=1e-5, atol=1e-6
            )
    via_tf = ctrl.act(tf.constant(params), tf.constant(inputs, tf.float32)).numpy()
    np.testing.assert_allclose(batched, via_tf, rtol=1e-5, atol=1e-6)
    if name == "LinearController":  # layout: W [D, A] row-major, then b [A]
        w, b = params[0, :12].reshape(4, 3), params[0, 12:]
        expect = np.tanh(inputs[0] @ w + b)
        np.testing.assert_allclose(batched[0][:, 0], expect[:, 0], rtol=1e-5, atol=1e-6)


def test_batched_episodes_equal_single_episodes_and_policy_interface():
    spec = exact_spec()
    agent = spec.build()
    params = np.random.default_rng(2).normal(0, 1, (3, agent.num_params))
    seeds = [5, 6, 7]
    envs = [ENV.make() for _ in range(3)]
    together = run_episodes(envs, agent, params, seeds, 24)
    for i in range(3):
        alone = run_episodes(envs, agent, params[i : i + 1], seeds[i : i + 1], 24)
        assert alone["returns"][0] == pytest.approx(together["returns"][i], abs=1e-5)
        assert alone["steps"][0] == together["steps"][i]
        rollout = episodes.single_rollout(
            ENV.make_fn(), WorldModelPolicy(spec, params[i]), max_steps=24, seed=seeds[i]
        )
        assert sum(rollout.reward_l) == pytest.approx(together["returns"][i], abs=1e-5)


def test_real_episodes_stop_at_max_steps_and_each_job_plays_its_own_seed():
    """run_episodes and an evaluation worker's batches (2 envs, 5 jobs): job i's return and
    length are those of the single rollout of its parameters on its seed, cut at max_steps
    (here 5, below the environment's own 24-step limit)."""
    from rl755.controller.real_eval import RealEvaluator

    spec = exact_spec()
    agent = spec.build()
    params = np.random.default_rng(4).normal(0, 1, (5, agent.num_params)).astype(np.float32)
    seeds = [11, 12, 13, 14, 15]
    alone = [
        episodes.single_rollout(
            ENV.make_fn(), WorldModelPolicy(spec, params[i]), max_steps=5, seed=seeds[i]
        )
        for i in range(5)
    ]
    want_returns = [sum(r.reward_l) for r in alone]
    want_steps = [len(r) for r in alone]
    assert max(want_steps) == 5  # the limit ended episodes, not the environment
    got = run_episodes([ENV.make() for _ in range(5)], agent, params, seeds, 5)
    assert got["steps"].tolist() == want_steps
    np.testing.assert_allclose(got["returns"], want_returns, atol=1e-5)
    evaluator = RealEvaluator(spec, ENV.make_fn(), parallelism=0, envs_per_worker=2)
    try:
        out = evaluator.evaluate(params, seeds, 5)
    finally:
        evaluator.close()
    assert out["steps"].tolist() == want_steps
    np.testing.assert_allclose(out["returns"], want_returns, atol=1e-5)


def test_sizes_that_do_not_fit_fail_before_any_rollout():
    from rl755.models import catalogue

    vae = catalogue.model_fn(ENV, "vae.Vae")
    spec = AgentSpec(
        ENV.name, "LinearController", encoder_fn=vae, sequential_model_fn=FakeDynamicsModel
    )
    with pytest.raises(ValueError, match="representation size 4 .* representation size 2"):
        spec.build()
    with pytest.raises(LookupError, match="saved_models"):
        resolve.make_agent_spec("FAKE_PIXELS", "LinearController", encoder="no_such_encoder")


def test_dream_equals_real_when_the_model_is_exact():
    """The exact latent model (rl755.testing.fake_world_model) runs the env's dynamics; on
    starts the frame shows exactly (GRID_SEEDS), dream returns equal real returns."""
    for s in GRID_SEEDS:
        env = ENV.make()
        env.reset(seed=s)
        assert abs(env.unwrapped._x * 14 - round(env.unwrapped._x * 14)) < 1e-4
    spec = exact_spec()
    agent = spec.build()
    params = np.random.default_rng(3).normal(0, 1, (6, agent.num_params))
    z0 = encoded_initial_states(ENV.make_fn(), agent.encode, GRID_SEEDS)
    dream = DreamEvaluator(agent.sequential_model, agent.controller, z0, max_steps=24)
    d = dream.evaluate(params, np.arange(len(GRID_SEEDS)))  # [P, T]
    envs = [ENV.make() for _ in GRID_SEEDS]
    for p in range(len(params)):
        real = run_episodes(envs, agent, np.repeat(params[p : p + 1], len(envs), 0), GRID_SEEDS, 24)
        np.testing.assert_allclose(d["returns"][p], real["returns"], atol=1e-3)
        np.testing.assert_array_equal(d["steps"][p], real["steps"])
    assert len(set(np.round(d["returns"].mean(1), 3))) > 1  # the members really differ


def test_real_tiny_models_compose_in_real_and_dream_mode():
    """The repository's own tiny VAE + MDN-RNN (random weights) through both paths."""
    from rl755.models import catalogue

    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=catalogue.model_fn(ENV, "vae.Vae"),
        sequential_model_fn=catalogue.model_fn(ENV, "mdn_rnn.mdn_rnn_with_heads"),
    )
    agent = spec.build()
    assert agent.controller.input_size == 4 + agent.sequential_model.hidden_size
    params = np.random.default_rng(4).normal(0, 0.1, (2, agent.num_params))
    out = run_episodes([ENV.make(), ENV.make()], agent, params, [0, 1], 10)
    assert out["steps"].tolist() == [10, 10] and np.all(np.isfinite(out["returns"]))
    z0 = encoded_initial_states(ENV.make_fn(), agent.encode, [0, 1, 2])
    dream = DreamEvaluator(agent.sequential_model, agent.controller, z0, 10, temperature=1.2)
    d = dream.evaluate(params, [0, 2])
    assert d["returns"].shape == (2, 2) and np.all(np.isfinite(d["returns"]))
    assert np.all((d["steps"] >= 1) & (d["steps"] <= 10))
    full = DreamEvaluator(agent.sequential_model, agent.controller, z0, 10, end_episodes=False)
    assert np.all(full.evaluate(params, [0, 2])["steps"] == 10)


def test_training_directories_resolve_to_picklable_constructors(tmp_path):
    import pickle

    spec = resolve.make_agent_spec(
        "FAKE_PIXELS",
        "LinearController",
        encoder_dir=str(tmp_path / "enc"),
        encoder_model="vae.Vae",
        representation_size=4,
        sequential_model_dir=str(tmp_path / "seq"),
    )
    spec = pickle.loads(pickle.dumps(spec))
    assert spec.encoder_fn.model_dir == str(tmp_path / "enc")
    assert spec.sequential_model_fn.model_dir == str(tmp_path / "seq")
    with pytest.raises(FileNotFoundError, match="train_obs_encoder.py"):
        spec.build()


def test_overridden_actions_are_what_the_model_steps_with():
    spec = exact_spec()
    agent = spec.build(use_tf_function=False)
    params = np.random.default_rng(0).normal(0, 1, (2, agent.num_params))
    envs = [ENV.make() for _ in range(2)]
    obs = np.stack([e.reset(seed=s)[0] for e, s in zip(envs, GRID_SEEDS[:2])])
    agent.reset(2)
    own = agent.act(obs, params)
    override = np.array([[-1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], np.float32)
    agent.reset(2)
    got = agent.act(obs, params, override, np.array([True, False]))
    np.testing.assert_allclose(got[0], override[0])
    np.testing.assert_allclose(got[1], own[1], atol=1e-6)
    # The model's state follows the action taken: env 0 steps as if it had played override[0].
    model, z = FakeDynamicsModel(), FakeLatentEncoder().compute_full_representation(obs)[0]
    h, _ = model.step(z, tf.constant(got), model.initial_state(2))
    np.testing.assert_allclose(agent._h.numpy(), h.numpy(), atol=1e-6)


def test_exploring_policy_takes_random_actions_at_the_asked_rate():
    spec = exact_spec()
    params = np.random.default_rng(1).normal(0, 1, spec.build().num_params)
    plain = episodes.single_rollout(
        ENV.make_fn(), WorldModelPolicy(spec, params), max_steps=24, seed=GRID_SEEDS[0]
    )
    again = episodes.single_rollout(
        ENV.make_fn(), WorldModelPolicy(spec, params, 0.5), max_steps=24, seed=GRID_SEEDS[0]
    )
    same = episodes.single_rollout(
        ENV.make_fn(), WorldModelPolicy(spec, params, 0.5), max_steps=24, seed=GRID_SEEDS[0]
    )
    np.testing.assert_array_equal(np.stack(again.action_l), np.stack(same.action_l))  # seeded
    n = min(len(plain), len(again))
    differ = np.any(np.stack(plain.action_l[:n]) != np.stack(again.action_l[:n]), axis=1)
    assert 0 < differ.sum() < n
    with pytest.raises(ValueError, match="random_action_prob"):
        WorldModelPolicy(spec, params, 1.5)


def test_dream_temperature_sets_how_random_the_dream_is():
    """The repository's tiny MDN-RNN (random weights): near temperature 0 a dream hardly
    depends on evaluate's seed (each mixture at its likeliest component, its std scaled by
    sqrt(tau)); at temperature 2 it does. Episode ends are off so only z sampling varies."""
    from rl755.models import catalogue

    tf.keras.utils.set_random_seed(0)
    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=catalogue.model_fn(ENV, "vae.Vae"),
        sequential_model_fn=catalogue.model_fn(ENV, "mdn_rnn.mdn_rnn_with_heads"),
    )
    agent = spec.build()
    params = np.random.default_rng(4).normal(0, 0.5, (2, agent.num_params))
    z0 = encoded_initial_states(ENV.make_fn(), agent.encode, [0, 1])

    def spread(temperature):
        dream = DreamEvaluator(
            agent.sequential_model, agent.controller, z0, 12, temperature, end_episodes=False
        )
        returns = [dream.evaluate(params, [0, 1], seed=s)["returns"] for s in range(4)]
        return float(np.std(returns, axis=0).mean())

    cold, hot = spread(1e-4), spread(2.0)
    assert hot > 0 and cold < 0.05 * hot, (cold, hot)
    # The seed alone decides the draws: the same seed replays the same dreams.
    dream = DreamEvaluator(agent.sequential_model, agent.controller, z0, 12, 2.0)
    again = [dream.evaluate(params, [0, 1], seed=9) for _ in range(2)]
    np.testing.assert_array_equal(again[0]["returns"], again[1]["returns"])
    np.testing.assert_array_equal(again[0]["steps"], again[1]["steps"])


def test_real_evaluation_on_workers_puts_each_batchs_scores_back_in_job_order():
    """J jobs go out in batches of envs_per_worker (the last one shorter); each job's return
    and steps come back at its own index, whatever batch a worker played."""
    from rl755.controller.real_eval import RealEvaluator

    class Pool:  # RayWorkerPool.run: one result per job, in the jobs' order
        def run(self, method, jobs):
            self.batches = [(job.args[1].tolist(), job.args[2]) for job in jobs]
            return [
                {"returns": p.sum(axis=1).astype(np.float64), "steps": s * 10}
                for p, s, _ in (job.args for job in jobs)
            ]

    evaluator = RealEvaluator.__new__(RealEvaluator)
    evaluator._local, evaluator._pool = None, Pool()
    evaluator.envs_per_worker, evaluator.trial_timeout_s = 2, 5.0
    params = np.arange(10, dtype=np.float32).reshape(5, 2)
    out = evaluator.evaluate(params, [7, 8, 9, 10, 11], max_steps=30)
    assert evaluator._pool.batches == [([7, 8], 30), ([9, 10], 30), ([11], 30)]
    np.testing.assert_array_equal(out["returns"], [1.0, 5.0, 9.0, 13.0, 17.0])
    np.testing.assert_array_equal(out["steps"], [70, 80, 90, 100, 110])
    assert (out["returns"].dtype, out["steps"].dtype) == (np.float64, np.int64)
