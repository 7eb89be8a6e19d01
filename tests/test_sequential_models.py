"""Sequential models: incremental `step` == full forward pass, MDN-RNN numerics and sampling,
heads and losses (the transformer's window and attention: test_transformer_models.py)."""

import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import fake_model, run_steps

from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential.heads import MixtureDensityHead, mixture_log_prob
from rl755.models.sequential.lstm import LstmBackbone

Z, A = 4, 3

MODELS = {
    "transformer": lambda: fake_model("transformer.base_deterministic_transformer_with_heads")(
        window=4
    ),
    "lstm": fake_model("lstm.deterministic_lstm_with_heads"),
    "mdn_rnn": fake_model("mdn_rnn.mdn_rnn_with_heads"),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_step_matches_full_sequence(name):
    tf.keras.utils.set_random_seed(0)
    model = MODELS[name]()
    assert isinstance(model, SequentialModel)
    x = tf.random.normal([3, 11, Z + A])  # 11 > window 4: crosses the transformer's window
    full = model(x)["hidden"].numpy()
    np.testing.assert_allclose(run_steps(model, x), full, atol=2e-5)
    # Another batch size gets its own compiled step (kept per shape), not the first one's.
    np.testing.assert_allclose(run_steps(model, x[:1]), full[:1], atol=2e-5)
    for t in (0, 5, -1):
        np.testing.assert_allclose(
            model.get_hidden_representation(x, position=t).numpy(), full[:, t], atol=1e-6
        )


def test_mdn_loss_finite_on_extreme_outputs_and_targets():
    head = MixtureDensityHead(Z, num_components=5)
    shape = [2, 3, Z, 5]
    extreme = {
        "mdn_logits": tf.fill(shape, 1e4) * tf.sign(tf.random.normal(shape)),
        "mdn_locs": tf.fill(shape, -1e6),
        "mdn_scales": head.min_scale + tf.nn.softplus(tf.fill(shape, -1e4)),
    }
    targets = tf.fill([2, 3, Z], 1e6)
    loss = head.per_position_loss(targets, extreme).numpy()
    assert np.all(np.isfinite(loss))
    # Perfect predictions cannot push the loss to -inf: bounded by the minimum scale.
    perfect = dict(extreme, mdn_locs=tf.fill(shape, 1e6))
    low = head.per_position_loss(targets, perfect).numpy()
    assert np.all(np.isfinite(low)) and np.all(low >= np.log(head.min_scale) - 1.0)


def test_mdn_loss_is_tfps_mixture_log_prob():
    """The training loss writes the mixture NLL out; it must equal TFP's MixtureSameFamily."""
    head = MixtureDensityHead(Z, num_components=5)
    rng = np.random.default_rng(0)
    shape = [3, 7, Z, 5]
    outputs = {
        "mdn_logits": tf.constant(rng.normal(0, 3, shape), tf.float32),
        "mdn_locs": tf.constant(rng.normal(0, 2, shape), tf.float32),
        "mdn_scales": tf.constant(np.exp(rng.normal(-1, 1.5, shape)) + 1e-3, tf.float32),
    }
    targets = tf.constant(rng.normal(0, 3, shape[:-1]), tf.float32)
    want = head.distribution(outputs).log_prob(targets).numpy()
    got = mixture_log_prob(outputs, targets).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        head.per_position_loss(targets, outputs).numpy(), -want.mean(-1), rtol=1e-5, atol=1e-5
    )


def _lstm_pair(units=8, inputs=Z + A):
    """Two LSTM backbones with the same weights: Keras' layer and the CPU sequence kernel."""
    keras_lstm = LstmBackbone(units, sequence_kernel=False)
    kernel = LstmBackbone(units, sequence_kernel=True)
    keras_lstm.build([None, None, inputs])
    kernel.build([None, None, inputs])
    rng = np.random.default_rng(1)
    for a, b in zip(keras_lstm.weights, kernel.weights):
        value = rng.normal(0, 0.5, a.shape).astype(np.float32)
        a.assign(value)
        b.assign(value)
    return keras_lstm, kernel


def test_lstm_sequence_kernel_equals_keras_lstm_values_and_gradients():
    """Padding at the end and a gap inside a sequence: outputs and every gradient agree."""
    keras_lstm, kernel = _lstm_pair()
    x = tf.constant(np.random.default_rng(2).normal(size=(3, 9, Z + A)), tf.float32)
    mask = np.ones((3, 9), np.float32)
    mask[0, 6:] = 0
    mask[1, 2:4] = 0
    weights = tf.constant(np.random.default_rng(3).normal(size=(3, 9, 8)), tf.float32)
    results = []
    for layer in (keras_lstm, kernel):
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = layer(x, mask=tf.constant(mask))
            loss = tf.reduce_sum(tf.tanh(h) * weights)
        grads = tape.gradient(loss, [x, *layer.trainable_variables])
        results.append([h, *grads])
    for a, b in zip(*results):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-5)


def test_mdn_rnn_loss_and_gradients_finite_on_extreme_inputs():
    model = fake_model("mdn_rnn.mdn_rnn_with_heads")()
    x = tf.concat([tf.fill([2, 5, Z], 1e5), tf.fill([2, 5, A], -1e5)], axis=-1)
    batch = {
        "targets": tf.fill([2, 5, Z], -1e5),
        "rewards": tf.fill([2, 5], 1e3),
        "dones": tf.ones([2, 5]),
        "mask": tf.ones([2, 5]),
        "target_mask": tf.ones([2, 5]),
    }
    with tf.GradientTape() as tape:
        loss = model.get_loss_fn()(batch, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(loss.numpy())
    assert all(np.all(np.isfinite(g.numpy())) for g in grads)


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_mdn_samples_match_mixture_moments(temperature):
    head = MixtureDensityHead(1, num_components=2)
    out = {
        "mdn_logits": tf.constant([[[0.0, np.log(3.0)]]]),  # weights 0.25, 0.75
        "mdn_locs": tf.constant([[[-2.0, 1.0]]]),
        "mdn_scales": tf.constant([[[0.5, 1.0]]]),
    }
    n = 40000
    tiled = {k: tf.tile(v, [n, 1, 1]) for k, v in out.items()}
    s = head.sample(tiled, temperature=temperature, seed=[1, 2]).numpy()[:, 0]
    w = np.exp(np.array([0.0, np.log(3.0)]) / temperature)
    w /= w.sum()
    mu, var = np.array([-2.0, 1.0]), np.array([0.25, 1.0]) * temperature
    mean = (w * mu).sum()
    variance = (w * (var + mu**2)).sum() - mean**2
    assert abs(s.mean() - mean) < 0.03
    assert abs(s.var() - variance) / variance < 0.04
    with pytest.raises(ValueError, match="temperature"):
        head.sample(out, temperature=0.0)


def test_deterministic_sample_next_and_difference_targets():
    model = fake_model("lstm.deterministic_lstm_with_heads")()
    h, _ = model.step(tf.zeros([2, Z]), tf.zeros([2, A]), model.initial_state(2))
    pred = model.predict_from_hidden(h)
    nxt = model.sample_next(h, temperature=5.0)
    np.testing.assert_allclose(nxt["z"], pred["z"])
    # The head's weight (10 by default) is divided out of its odds (done_probability).
    calibrated = tf.sigmoid(pred["done_logits"] - np.log(model.done_pos_weight))
    assert model.done_pos_weight == 10.0
    np.testing.assert_allclose(nxt["done_prob"], calibrated, rtol=1e-6)
    np.testing.assert_allclose(nxt["reward"], pred["reward"])
    model.difference_targets = True
    with pytest.raises(ValueError, match="pass the current z"):
        model.sample_next(h)
    z = tf.ones([2, Z])
    np.testing.assert_allclose(model.sample_next(h, z=z)["z"], pred["z"] + 1.0, rtol=1e-6)
    # Without heads, reward and done_prob are zeros.
    plain = fake_model("lstm.deterministic_lstm")()
    h, _ = plain.step(tf.zeros([2, Z]), tf.zeros([2, A]), plain.initial_state(2))
    assert not plain.has_reward_head
    np.testing.assert_array_equal(plain.sample_next(h)["done_prob"], [0.0, 0.0])


@pytest.mark.parametrize("weight", [1.0, 10.0, 50.0])
def test_weighted_done_head_gives_the_real_episode_end_probability(weight):
    """A done head trained with ends weighted w on data whose episodes end with probability
    p each step: `done_probability` (what dreams draw their ends from) gives p back, not the
    ~w-times-too-high sigmoid of its logit."""
    model = fake_model("lstm.deterministic_lstm_with_heads")(done_pos_weight=weight)
    p = 0.004
    labels = tf.constant(np.random.default_rng(1).random(20_000) < p, tf.float32)
    data_p = float(tf.reduce_mean(labels))
    # The mean loss of one shared logit over the labels, on a fine grid of logits.
    grid = tf.range(-12.0, 6.0, 0.0005)

    def xent(label):
        return tf.nn.weighted_cross_entropy_with_logits(
            labels=tf.fill(tf.shape(grid), label), logits=grid, pos_weight=weight
        )

    loss = data_p * xent(1.0) + (1.0 - data_p) * xent(0.0)
    logit = grid[int(tf.argmin(loss))]
    prob = float(model.done_probability(logit))
    assert abs(prob - data_p) < 0.05 * data_p, (prob, data_p)
    if weight > 1:
        assert float(tf.sigmoid(logit)) > 0.8 * weight * data_p  # the raw head over-predicts


def test_loss_is_masked_and_weighted():
    model = fake_model("transformer.base_deterministic_transformer_with_heads")(done_pos_weight=3.0)
    x = tf.random.normal([2, 4, Z + A])
    preds = model(x)
    mask = tf.constant([[1.0, 1, 1, 0], [1, 1, 0, 0]])
    target_mask = tf.constant([[1.0, 1, 0, 0], [1, 0, 0, 0]])
    targets = np.random.default_rng(0).normal(size=(2, 4, Z)).astype(np.float32)
    targets[target_mask.numpy() == 0] = np.inf  # padding must not leak NaN/Inf into the loss
    batch = {"targets": targets, "rewards": tf.ones([2, 4]), "dones": tf.zeros([2, 4])}
    batch.update(mask=mask, target_mask=target_mask)
    loss = model.get_loss_fn()(batch, preds).numpy()
    m, tm = mask.numpy() == 1, target_mask.numpy() == 1
    z_term = np.mean(((preds["z"].numpy() - targets) ** 2).mean(-1)[tm])
    r_term = np.mean(((preds["reward"].numpy() - 1.0) ** 2)[m])
    d_term = np.mean(tf.nn.softplus(preds["done_logits"]).numpy()[m])  # labels 0
    np.testing.assert_allclose(loss, z_term + r_term + d_term, rtol=1e-5)


def test_a_batch_without_target_mask_scores_its_targets_where_mask_is_set():
    """Batches made by hand may leave out "target_mask": the z term then reads "mask"."""
    model = fake_model("transformer.base_deterministic_transformer_with_heads")()
    x = tf.random.normal([2, 4, Z + A], seed=1)
    preds = model(x)
    mask = tf.constant([[1.0, 1, 1, 0], [1, 1, 0, 0]])
    targets = np.random.default_rng(1).normal(size=(2, 4, Z)).astype(np.float32)
    batch = {"targets": targets, "rewards": tf.ones([2, 4]), "dones": tf.zeros([2, 4])}
    without = model.loss_sums({**batch, "mask": mask}, preds)
    with_it = model.loss_sums({**batch, "mask": mask, "target_mask": mask}, preds)
    for a, b in zip(without, with_it):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), rtol=1e-6, err_msg=key)


def test_lstm_mask_carries_state_through_padding():
    model = fake_model("lstm.deterministic_lstm")()
    x = tf.random.normal([1, 5, Z + A])
    mask = tf.constant([[1.0, 1.0, 1.0, 0.0, 0.0]])
    h = model.get_hidden_representation(x, mask=mask, position=-1)
    np.testing.assert_allclose(h, model.get_hidden_representation(x[:, :3]), atol=1e-6)


def test_wrong_input_size_is_explained():
    model = fake_model("lstm.deterministic_lstm")()
    with pytest.raises(ValueError, match=r"Z=4, A=3"):
        model(tf.zeros([1, 2, Z + A + 1]))


def test_car_racing_models_have_paper_sizes():
    from rl755.models import catalogue

    mdn = catalogue.build("CAR_RACING", "mdn_rnn.mdn_rnn").ensure_built()
    assert mdn.count_params() == 422_368  # World Models MDN-RNN, Z=32, LSTM 256, 5 mixtures
    assert mdn.hidden_size == 256 and mdn.representation_size == 32 and mdn.action_size == 3
    assert catalogue.build("CAR_RACING", "lstm.deterministic_lstm").hidden_size == 256
    base = catalogue.build("CAR_RACING", "transformer.base_deterministic_transformer")
    assert base.hidden_size == 256 and base.backbone.window == 128
    heads = catalogue.build("CAR_RACING", "transformer.base_deterministic_transformer_with_heads")
    assert heads.has_reward_head and heads.has_done_head


@pytest.mark.parametrize("name", ["transformer", "mdn_rnn"])
def test_step_and_sample_next_run_inside_a_compiled_while_loop(name):
    """How dream rollouts use the model: step + sample_next in a tf.while_loop."""
    tf.keras.utils.set_random_seed(3)
    model = MODELS[name]()
    model.ensure_built()
    z0 = tf.random.normal([2, Z])
    a = tf.fill([2, A], 0.5)

    @tf.function
    def dream(z0):
        def body(t, z, state, total):
            h, state = model.step(z, a, state)
            nxt = model.sample_next(h, temperature=1.0, seed=tf.stack([t, 7]), z=z)
            return t + 1, nxt["z"], state, total + nxt["reward"]

        _, z, _, total = tf.while_loop(
            lambda t, *_: t < 6, body, (0, z0, model.initial_state(2), tf.zeros([2]))
        )
        return z, total

    z, total = dream(z0)
    assert z.shape == (2, Z) and np.all(np.isfinite(z.numpy())) and np.all(np.isfinite(total))
    if name == "transformer":  # deterministic: the loop equals eager steps
        state, ze = model.initial_state(2), z0
        for _ in range(6):
            h, state = model.step(ze, a, state)
            ze = model.sample_next(h, z=ze)["z"]
        np.testing.assert_allclose(z, ze, atol=1e-5)


def test_loss_weights_and_the_done_heads_positive_weight_by_hand():
    """loss = z_w * z term + reward_w * reward term + done_w * done term, the done term a
    cross-entropy with the episode ends weighted done_pos_weight."""
    model = fake_model("lstm.deterministic_lstm_with_heads")(
        z_loss_weight=2.0, reward_loss_weight=0.5, done_loss_weight=3.0, done_pos_weight=4.0
    )
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(2, 5, Z + A)), tf.float32)
    preds = model(x)
    targets = rng.normal(size=(2, 5, Z)).astype(np.float32)
    rewards = rng.normal(size=(2, 5)).astype(np.float32)
    dones = np.array([[0, 0, 0, 0, 1], [0, 0, 1, 0, 0]], np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.float32)
    batch = dict(targets=targets, rewards=rewards, dones=dones, mask=mask, target_mask=mask)
    loss = float(model.get_loss_fn()(batch, preds))
    m = mask > 0
    z_term = np.mean(((preds["z"].numpy() - targets) ** 2).mean(-1)[m])
    r_term = np.mean(((preds["reward"].numpy() - rewards) ** 2)[m])
    logits = preds["done_logits"].numpy().astype(np.float64)
    log_p, log_not_p = -np.logaddexp(0, -logits), -np.logaddexp(0, logits)
    xent = -(4.0 * dones * log_p + (1 - dones) * log_not_p)
    d_term = np.mean(xent[m])
    assert dones[m].sum() == 2  # both ends are real steps: their weight matters
    np.testing.assert_allclose(loss, 2.0 * z_term + 0.5 * r_term + 3.0 * d_term, rtol=1e-5)
