"""Heads that turn a sequential model's hidden representation into a prediction of z_{t+1}.

    head = DeterministicHead(representation_size=32)         # "z": [..., Z]
    head = MixtureDensityHead(representation_size=32, num_components=5)
    out = head(hidden)                                        # hidden [..., H] -> dict
    nll = head.per_position_loss(targets, out)                # targets [..., Z] -> [...]
    z = head.sample(out, temperature=1.15, seed=3)            # [..., Z]

The mixture head is the World Models MDN: K Gaussians per latent dimension, a
`tfp.distributions` MixtureSameFamily of Categorical + Normal (sampling, means). Its training
loss is the same log-likelihood written out (`mixture_log_prob`: a log-sum-exp over
components, equal to TFP's `log_prob` to float rounding, tested) with standard deviations
bounded below by `min_scale`, so the loss stays finite and cannot run off to -inf.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf
import tensorflow_probability as tfp

from rl755.common import tf_setup

tfd = tfp.distributions


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def mixture_log_prob(outputs, targets):
    """log p(targets) under the mixture of `outputs` (temperature 1): targets [..., Z] ->
    [..., Z]. `distribution(outputs).log_prob(targets)` written out (log-softmax of the
    logits plus each Gaussian's log density, log-sum-exp over the K components): the same
    math in a few ops that XLA fuses (TFP's graph does not fuse)."""
    z = (targets[..., None] - outputs["mdn_locs"]) / outputs["mdn_scales"]  # [..., Z, K]
    log_normal = -0.5 * tf.square(z) - tf.math.log(outputs["mdn_scales"]) - _HALF_LOG_2PI
    log_weights = tf.nn.log_softmax(outputs["mdn_logits"], axis=-1)
    return tf.reduce_logsumexp(log_weights + log_normal, axis=-1)


class DeterministicHead(keras.layers.Layer):
    """Linear prediction of the target; loss = squared error averaged over Z."""

    def __init__(self, representation_size: int, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True  # inputs may carry a Keras mask; masking is explicit here
        self.representation_size = int(representation_size)
        self.dense = keras.layers.Dense(self.representation_size, name="z")

    def call(self, hidden):
        return {"z": self.dense(hidden)}  # [..., Z]

    def per_position_loss(self, targets, outputs):
        """targets [..., Z] -> mean squared error [...]."""
        return tf.reduce_mean(tf.square(outputs["z"] - targets), axis=-1)

    def sample(self, outputs, temperature=1.0, seed=None):
        """The prediction itself (deterministic; temperature and seed are ignored)."""
        del temperature, seed
        return outputs["z"]


class MixtureDensityHead(keras.layers.Layer):
    """K-component Gaussian mixture per latent dimension (World Models' MDN).

    Outputs "mdn_logits", "mdn_locs", "mdn_scales", each [..., Z, K]; scales are
    `min_scale + softplus(raw)`. The loss is the negative log-likelihood averaged over Z.
    """

    def __init__(
        self,
        representation_size: int,
        num_components: int = 5,
        min_scale: float = 1e-3,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.supports_masking = True  # inputs may carry a Keras mask; masking is explicit here
        self.representation_size = int(representation_size)
        self.num_components = int(num_components)
        self.min_scale = float(min_scale)
        self.dense = keras.layers.Dense(
            self.representation_size * self.num_components * 3, name="mdn"
        )

    def call(self, hidden):
        raw = self.dense(hidden)  # [..., Z * K * 3]
        shape = tf.concat(
            [tf.shape(raw)[:-1], [self.representation_size, self.num_components, 3]], axis=0
        )
        raw = tf.reshape(raw, shape)  # [..., Z, K, 3]
        return {
            "mdn_logits": raw[..., 0],
            "mdn_locs": raw[..., 1],
            "mdn_scales": self.min_scale + tf.nn.softplus(raw[..., 2]),
        }

    def distribution(self, outputs, temperature=1.0) -> tfd.Distribution:
        """The mixture over each latent dimension, batch shape [..., Z]; at temperature tau
        the mixture logits are divided by tau and the standard deviations multiplied by
        sqrt(tau) (Ha & Schmidhuber 2018)."""
        tf_setup.absorb_onednn_type_notice()  # sampling transposes int32 indices
        tau = tf.convert_to_tensor(temperature, tf.float32)
        return tfd.MixtureSameFamily(
            mixture_distribution=tfd.Categorical(logits=outputs["mdn_logits"] / tau),
            components_distribution=tfd.Normal(
                loc=outputs["mdn_locs"], scale=outputs["mdn_scales"] * tf.sqrt(tau)
            ),
        )

    def per_position_loss(self, targets, outputs):
        """targets [..., Z] -> negative log-likelihood averaged over Z, [...]."""
        return -tf.reduce_mean(mixture_log_prob(outputs, targets), axis=-1)

    def sample(self, outputs, temperature=1.0, seed=None):
        """A sample [..., Z] at `temperature` (> 0)."""
        if isinstance(temperature, int | float) and temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}.")
        return self.distribution(outputs, temperature).sample(seed=seed)

    def mean(self, outputs):
        """The mixture mean [..., Z] (temperature 1)."""
        return self.distribution(outputs).mean()
