"""World Models' Doom settings: a controller on [z, h, c], and dream episodes that end when the
done head crosses a threshold (rl755.controller.agent / dream_eval / cma_train)."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from dream_helpers import ScriptedModel

from rl755.common import tensorboard
from rl755.controller import networks, resolve, saved
from rl755.controller.agent import AgentSpec, controller_features
from rl755.controller.cma_train import CmaConfig, run_cma_es
from rl755.controller.dream_eval import DreamEvaluator
from rl755.environments import Environments
from rl755.models import catalogue

ENV = Environments.FAKE_PIXELS


def tiny_spec(model="mdn_rnn.mdn_rnn_with_heads", **kw):
    return AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=catalogue.model_fn(ENV, "vae.Vae"),
        sequential_model_fn=catalogue.model_fn(ENV, model),
        encoder_name="vae",
        sequential_model_name="mdn",
        **kw,
    )


def test_cell_state_controller_reads_z_h_and_the_lstm_cell():
    tf.keras.utils.set_random_seed(0)
    agent = tiny_spec(cell_state=True).build(use_tf_function=False)
    seq = agent.sequential_model
    z_size, units = 4, seq.hidden_size
    assert seq.cell_size == units > 0
    assert agent.controller.input_size == z_size + 2 * units

    env = ENV.make()
    obs0, _ = env.reset(seed=1)
    obs1, *_ = env.step(env.action_space.sample())
    params = np.random.default_rng(0).normal(0, 1.0, (1, agent.num_params)).astype(np.float32)
    agent.reset(1)
    a0 = agent.act(obs0[None], params)
    a1 = agent.act(obs1[None], params)

    # The same two steps by hand: features [z, h, c] with the state h came with.
    z0, z1 = agent.encode(obs0[None]), agent.encode(obs1[None])
    state = seq.initial_state(1)
    h = tf.zeros([1, units])
    f0 = tf.concat([z0, h, state["c"]], axis=1)
    want0 = agent.controller.act(tf.constant(params), f0[:, None])[:, 0]
    h, state = seq.step(z0, tf.constant(a0), state)
    assert float(tf.reduce_max(tf.abs(state["c"]))) > 0  # c differs from h and from zero
    f1 = tf.concat([z1, h, state["c"]], axis=1)
    want1 = agent.controller.act(tf.constant(params), f1[:, None])[:, 0]
    np.testing.assert_allclose(a0, want0.numpy(), atol=1e-5)
    np.testing.assert_allclose(a1, want1.numpy(), atol=1e-5)
    np.testing.assert_allclose(
        controller_features(z1, h, state, seq, cell_state=True).numpy(), f1.numpy()
    )


def test_cell_state_is_saved_with_the_controller_and_restored():
    spec = tiny_spec(cell_state=True)
    encoder, seq = spec.build_models()
    controller = spec.build_controller(encoder, seq)
    meta = saved.controller_meta(spec, controller)
    assert meta["cell_state"] is True
    trained = saved.TrainedController(controller, np.zeros(controller.num_params), meta)
    restored = resolve.spec_for_trained(trained, spec.encoder_fn, spec.sequential_model_fn)
    assert restored.cell_state is True
    assert restored.build().controller.input_size == controller.input_size


def test_cell_state_needs_a_model_with_a_memory_cell():
    with pytest.raises(ValueError, match="memory cell"):
        tiny_spec("transformer.tiny_deterministic_transformer", cell_state=True).build()


class ConstantHazard(ScriptedModel):
    """Reward 1 per step and done_prob `p` at every step, whatever the inputs."""

    def __init__(self, p: float, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    def sample_next(self, hidden, temperature=1.0, seed=None, z=None):
        b = tf.shape(hidden)[0]
        return {"z": z, "reward": tf.ones([b]), "done_prob": tf.fill([b], self.p)}


def test_done_threshold_ends_dreams_when_the_head_crosses_it():
    controller = networks.make_controller("LinearController", 3, environment=ENV)
    z0 = np.zeros((4, 2), np.float32)
    params = np.zeros((2, controller.num_params), np.float32)

    def steps(threshold):
        dream = DreamEvaluator(ConstantHazard(0.3), controller, z0, 50, done_threshold=threshold)
        return dream.evaluate(params, np.arange(4), seed=5)["steps"]

    assert np.all(steps(0.5) == 50)  # 0.3 never exceeds 0.5: episodes run to the limit
    assert np.all(steps(0.2) == 1)  # 0.3 > 0.2 at once
    sampled = steps(0.0)  # Bernoulli(0.3) each step: mean length ~ 1 / 0.3
    assert 1.5 < sampled.mean() < 6 and len(np.unique(sampled)) > 1
    with pytest.raises(ValueError, match="done_threshold"):
        DreamEvaluator(ConstantHazard(0.3), controller, z0, 50, done_threshold=1.5)


def test_done_prob_scale_multiplies_the_end_probability_before_either_rule():
    """done_prob x k: the threshold sees 0.1 x 3 = 0.3, the Bernoulli draws end
    an episode where u < 0.3 with the same u, and k = 1 is the unscaled dream draw for draw."""
    controller = networks.make_controller("LinearController", 3, environment=ENV)
    z0 = np.zeros((64, 2), np.float32)
    params = np.zeros((1, controller.num_params), np.float32)

    def steps(**kw):
        dream = DreamEvaluator(ConstantHazard(0.1), controller, z0, 60, **kw)
        return dream.evaluate(params, np.arange(64), seed=5)["steps"][0]

    assert np.all(steps(done_threshold=0.25) == 60)  # 0.1 < 0.25
    assert np.all(steps(done_threshold=0.25, done_prob_scale=3.0) == 1)  # 0.3 > 0.25
    assert np.all(steps(done_prob_scale=20.0) == 1)  # 0.1 x 20 >= 1: every episode ends at once
    plain, scaled = steps(), steps(done_prob_scale=3.0)
    np.testing.assert_array_equal(steps(done_prob_scale=1.0), plain)
    assert np.all(scaled <= plain) and np.any(scaled < plain)  # the same draws, ended sooner
    assert 6 < plain.mean() < 16 and 2 < scaled.mean() < 5.5  # ~ 1 / 0.1 and 1 / 0.3
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="done_prob_scale must be > 0"):
            DreamEvaluator(ConstantHazard(0.1), controller, z0, 60, done_prob_scale=bad)
        with pytest.raises(ValueError, match="done_prob_scale must be > 0"):
            CmaConfig(mode="dream", done_prob_scale=bad).validate()


def test_done_prob_scale_is_recorded_kept_on_resume_and_dream_only(tmp_path):
    spec = tiny_spec()
    cfg = CmaConfig(
        mode="dream", population_size=4, trials_per_member=1, generations=1,
        rollout_max_steps=6, dream_initial_states=2, eval_every=0, done_prob_scale=2.5,
    )  # fmt: skip
    d = tmp_path / "scaled"
    run_cma_es(spec, str(d), cfg)
    assert json.loads((d / "controller.json").read_text())["done_prob_scale"] == 2.5
    with pytest.raises(ValueError, match="done_prob_scale=2.5.*keep the same dream"):
        run_cma_es(spec, str(d), dataclasses.replace(cfg, generations=2, done_prob_scale=1.0))
    plain = tmp_path / "plain"  # the default is not recorded: older runs resume as they were
    run_cma_es(spec, str(plain), dataclasses.replace(cfg, done_prob_scale=1.0))
    assert "done_prob_scale" not in json.loads((plain / "controller.json").read_text())
    real = dataclasses.replace(cfg, mode="real", eval_in="real")
    with pytest.raises(ValueError, match="--done_prob_scale.*--mode=dream"):
        run_cma_es(spec, str(tmp_path / "real"), real)
    assert not (tmp_path / "real").exists()


def test_training_and_its_dream_evaluations_play_the_scaled_dream(tmp_path):
    """Hazard 0.1 under a 0.25 threshold never ends a dream; scaled 3x it ends every one at
    its first step, in the training's episodes and in the evaluations that choose."""
    from rl755.testing.fake_world_model import FakeLatentEncoder

    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=lambda: ConstantHazard(0.1),
    )
    cfg = CmaConfig(
        mode="dream", population_size=4, trials_per_member=2, generations=2, seed=3,
        rollout_max_steps=9, eval_every=1, eval_episodes=3, dream_initial_states=4,
        eval_in="dream", done_threshold=0.25,
    )  # fmt: skip
    for scale, length in ((1.0, 9), (3.0, 1)):
        d = tmp_path / f"k{scale}"
        result = run_cma_es(spec, str(d), dataclasses.replace(cfg, done_prob_scale=scale))
        assert {e["mean"] for e in result["evals"]} == {float(length)}
        assert {(h["mean"], h["best"], h["worst"]) for h in result.history} == {(length,) * 3}


def test_dream_training_records_both_settings(tmp_path):
    out_dir = tmp_path / "c"
    cfg = CmaConfig(
        mode="dream",
        population_size=4,
        trials_per_member=2,
        generations=1,
        rollout_max_steps=8,
        dream_initial_states=4,
        eval_every=0,
        done_threshold=0.2,
        temperature=1.15,
    )
    run_cma_es(tiny_spec(cell_state=True), str(out_dir), cfg)
    meta = json.loads((out_dir / "controller.json").read_text())
    assert meta["cell_state"] is True and meta["done_threshold"] == 0.2
    assert meta["input_size"] == 4 + 2 * catalogue.build(ENV, "mdn_rnn.mdn_rnn").hidden_size


@pytest.mark.parametrize("model", ["exact", "hazard"])
def test_dream_evaluations_and_selection_play_only_dreams(tmp_path, monkeypatch, model):
    """--eval_in=dream: the evaluations and the final selection play dreams (initial state
    seed % K, dream seed = the first seed), no real episode is played, and the best of them
    is saved; a resume that asks for real evaluations is refused. Two models: the fake
    environment's exact dynamics (where the episode's initial state matters) and a constant
    hazard (where the dream's draws do)."""
    from rl755.controller import cma_train
    from rl755.controller.cma_config import derived_seeds, eval_seeds, selection_seeds
    from rl755.controller.dream_eval import encoded_initial_states
    from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

    class NoRealEpisodes:
        def __init__(self, *a, **kw):
            raise AssertionError("a real episode was played")

    monkeypatch.setattr(cma_train, "RealEvaluator", NoRealEpisodes)
    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel if model == "exact" else lambda: ConstantHazard(0.1),
    )
    d = tmp_path / "d"
    cfg = CmaConfig(
        mode="dream", population_size=6, trials_per_member=3, generations=3, sigma=0.5, seed=3,
        rollout_max_steps=24, eval_every=1, eval_episodes=4, dream_initial_states=8,
        eval_in="dream",
    )  # fmt: skip
    plain = run_cma_es(spec, str(d), cfg)
    assert {e["where"] for e in plain["evals"]} == {"dream"} and len(plain["evals"]) == 6
    assert saved.load_trained_controller(str(d)).meta["score_source"] == "dream_evaluation"
    validation = tensorboard.read_dir(d / "tensorboard" / "validation")
    assert "eval/dream_mean" in validation and "eval/dream_to_real_gap" not in validation

    encoder, seq = spec.build_models()
    controller = spec.build_controller(encoder, seq)
    z0 = encoded_initial_states(
        ENV.make_fn(),
        lambda f: encoder.compute_full_representation(f)[0].numpy(),
        derived_seeds(cfg.seed, 3, n=8),
    )
    dream = DreamEvaluator(seq, controller, z0, cfg.rollout_max_steps, cfg.temperature)

    def replay(params, seeds):
        return dream.evaluate(params[None], seeds % 8, seed=int(seeds[0]))["returns"][0]

    for e in plain["evals"]:
        np.testing.assert_allclose(e["mean"], replay(e["params"], eval_seeds(cfg.seed, 4)).mean())

    select = dataclasses.replace(cfg, select_episodes=6, select_top=2)
    out = run_cma_es(spec, str(d), select)
    selection = out["selection"]
    assert selection["where"] == "dream" and len(selection["candidates"]) == 2
    seeds = selection_seeds(cfg.seed, 6)
    top = sorted(plain["evals"], key=lambda e: e["mean"], reverse=True)[:2]
    for c, e in zip(selection["candidates"], top):
        np.testing.assert_allclose(c["returns"], replay(e["params"], seeds))
    best = max(selection["candidates"], key=lambda c: c["mean"])
    trained = saved.load_trained_controller(str(d))
    assert trained.meta["score_source"] == "selection" and trained.meta["score"] == best["mean"]

    with pytest.raises(ValueError, match="evaluated its candidates in dream .* --eval_in=dream"):
        run_cma_es(spec, str(d), dataclasses.replace(select, eval_in="real", generations=4))
    with pytest.raises(ValueError, match="--eval_in=dream .* needs --mode=dream"):
        CmaConfig(mode="real", eval_in="dream").validate()
