"""The transformer sequential models: the sliding window's semantics and bounded receptive
field, ALiBi attention by hand, and constructors taking sizes by keyword."""

import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import run_steps

from rl755.models.sequential import models as sm

Z, A = 4, 3


def test_one_layer_window_equals_recomputing_last_window():
    """Documented semantics: a layer attends to the last `window` inputs, positions are
    relative, so a 1-layer model's h_t is exactly a fresh pass over x[t-W+1 .. t]."""
    tf.keras.utils.set_random_seed(1)
    w = 4
    model = sm.deterministic_transformer(Z, A, num_layers=1, model_dim=8, num_heads=2, window=w)
    x = tf.random.normal([2, 10, Z + A])
    stepped = run_steps(model, x)
    for t in range(w, 10):
        recomputed = model.get_hidden_representation(x[:, t - w + 1 : t + 1]).numpy()
        np.testing.assert_allclose(stepped[:, t], recomputed, atol=2e-5)


def test_transformer_receptive_field_is_bounded():
    tf.keras.utils.set_random_seed(2)
    w, layers = 3, 2
    model = sm.deterministic_transformer(
        Z, A, num_layers=layers, model_dim=8, num_heads=2, window=w
    )
    x = np.random.default_rng(0).normal(size=(1, 12, Z + A)).astype(np.float32)
    h = model.get_hidden_representation(x).numpy()
    reach = layers * (w - 1)  # inputs further back than this cannot influence h_T
    far = x.copy()
    far[:, : 12 - 1 - reach] += 100.0
    np.testing.assert_allclose(model.get_hidden_representation(far).numpy(), h, atol=1e-5)
    near = x.copy()
    near[:, 12 - 1 - reach] += 100.0
    assert np.abs(model.get_hidden_representation(near).numpy() - h).max() > 1e-3


def test_transformer_constructors_take_sizes_by_keyword_with_shared_defaults():
    from rl755.models.infilling.model import infilling_transformer
    from rl755.models.retrieval.model import retrieval_transformer

    def causal(model):  # the CausalTransformer, inside the retrieval / maskable wrapper
        return getattr(model.backbone, "backbone", model.backbone)

    for build in (sm.deterministic_transformer, infilling_transformer, retrieval_transformer):
        model = build(Z, A, num_layers=1, model_dim=8, num_heads=2, window=4, predict_done=True)
        t = causal(model)
        assert (t.num_layers, t.model_dim, t.num_heads, t.window) == (1, 8, 2, 4)
        assert model.has_done_head
        t = causal(build(Z, A))
        assert (t.num_layers, t.model_dim, t.num_heads, t.window) == (6, 256, 8, 128)
        with pytest.raises(ValueError, match="num_layer"):
            build(Z, A, num_layer=1)  # a misspelt size is refused (by Keras), not ignored


def test_attention_is_alibi_over_the_sliding_window_by_hand():
    """One SlidingWindowAttention layer against numpy: logits q.k / sqrt(dk) - slope_h (i - j)
    over keys i - W < j <= i (real ones only), slopes 2^(-8 h / heads), h = 1..heads."""
    from rl755.models.sequential.transformer import SlidingWindowAttention, alibi_slopes

    np.testing.assert_allclose(alibi_slopes(4), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])
    heads, dk, w, d, t = 2, 3, 3, 4, 7
    layer = SlidingWindowAttention(heads, dk, w)
    layer.build((None, None, d))
    rng = np.random.default_rng(0)
    for v in layer.weights:
        v.assign(rng.normal(0, 0.7, v.shape).astype(np.float32))
    x = rng.normal(size=(2, t, d)).astype(np.float32)
    key_mask = np.ones((2, t), np.float32)
    key_mask[1, 5:] = 0.0
    got = layer(tf.constant(x), key_mask=tf.constant(key_mask)).numpy()

    qkv = (x @ layer.qkv.kernel.numpy() + layer.qkv.bias.numpy()).reshape(2, t, 3, heads, dk)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]  # [B, T, h, dk]
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    out = np.zeros((2, t, heads, dk))
    for b in range(2):
        for i in range(t):
            js = [j for j in range(max(0, i - w + 1), i + 1) if key_mask[b, j]]
            for h in range(heads):
                logits = np.array(
                    [q[b, i, h] @ k[b, j, h] / np.sqrt(dk) - slopes[h] * (i - j) for j in js]
                )
                p = np.exp(logits - logits.max())
                out[b, i, h] = (p / p.sum()) @ v[b, js, h]
    want = out.reshape(2, t, heads * dk) @ layer.out.kernel.numpy() + layer.out.bias.numpy()
    real = key_mask > 0  # (a padded query's output is not used)
    np.testing.assert_allclose(got[real], want[real], rtol=1e-4, atol=1e-5)
