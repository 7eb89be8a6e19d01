"""World Models' Doom settings: a controller on [z, h, c], and dream episodes that end when the
done head crosses a threshold (rl755.controller.agent / dream_eval / cma_train)."""

import json

import numpy as np
import pytest
import tensorflow as tf

from rl755.controller import networks, resolve, saved
from rl755.controller.agent import AgentSpec, controller_features
from rl755.controller.cma_train import CmaConfig, run_cma_es
from rl755.controller.dream_eval import DreamEvaluator
from rl755.environments import Environments
from rl755.models import catalogue
from rl755.models.common.sequential import SequentialModel

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


class ConstantHazard(SequentialModel):
    """Reward 1 per step and done_prob `p` at every step, whatever the inputs."""

    def __init__(self, p: float, **kwargs):
        super().__init__(**kwargs)
        self.p = p

    representation_size = property(lambda self: 2)
    action_size = property(lambda self: 3)
    hidden_size = property(lambda self: 1)
    has_reward_head = property(lambda self: True)
    has_done_head = property(lambda self: True)

    def get_loss_fn(self):
        raise NotImplementedError

    def get_hidden_representation(self, x, mask=None, training=None, position=-1):
        raise NotImplementedError

    def initial_state(self, batch_size):
        return tf.zeros([batch_size, 1])

    def step(self, z, a, state):
        return state, state

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
