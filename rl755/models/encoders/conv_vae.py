"""A convolutional VAE (World Models' "V") as an `ObservationEncoder`, parameterized by size.

    vae = ConvVae(frame_shape=(96, 96, 3), representation_size=32, crop_rows=(0, 84), image_size=64)
    z, extras = vae.compute_full_representation(frames)  # uint8 [B, 96, 96, 3] -> [B, 32], std [B, 32]
    recon = vae.decode(z)                                # [B, 64, 64, 3] in [0, 1]

Preprocessing (inside the model, so callers feed raw environment frames): cast to float32,
scale to [0, 1], keep rows `crop_rows` (CarRacing: 0:84 drops the indicator bar), resize to
`image_size` x `image_size` (bilinear).

Encoder: Conv2D(filters_i, `encoder_kernel`, stride 2, relu) for each of `encoder_filters`,
flatten, then two dense heads: the posterior mean and log-variance, [B, Z] each.
Decoder: Dense(`decoder_dense_size`) -> reshape [B, 1, 1, D] -> Conv2DTranspose(filters_i,
kernel_i, stride 2, relu) for `decoder_filters`, then a last Conv2DTranspose to the frame's
channels with a sigmoid. The decoder's output size must equal the preprocessed image size
(checked when the model is built).

Loss (Ha & Schmidhuber 2018): per example, the summed squared error over the pixels of the
preprocessed frame plus KL(q(z|x) || N(0, I)) clipped from below at `kl_tolerance * Z`
(`kl = max(kl, kl_tolerance * Z)`, so the KL term stops pulling once it is small), averaged
over the batch. The posterior and prior are `tfp.distributions.MultivariateNormalDiag`
(`tfp.layers` does not work with Keras 3).

How the two terms reach Keras: `call(x)` samples z from the posterior, decodes it and
registers the clipped KL with `self.add_loss`; `get_loss_fn()` is the reconstruction term
`fn(frames, reconstruction)`. Keras 3's `Model.compute_loss` adds `model.losses` to the
compiled loss, so `model.fit(ds_of_(frames, frames))` optimizes the full objective, and a
custom loop writes the same thing (see `total_loss`):

    with tf.GradientTape() as tape:
        recon = vae(frames, training=True)
        loss = vae.get_loss_fn()(frames, recon) + tf.add_n(vae.losses)
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import tensorflow as tf
import tensorflow_probability as tfp

from rl755.models.common.encoder import ObservationEncoder

tfd = tfp.distributions


class ConvVae(ObservationEncoder):
    """Convolutional VAE on raw uint8 frames; see the module docstring.

    Args:
      frame_shape: shape of one raw frame (H, W, C) as the environment produces it.
      representation_size: Z, the latent size.
      crop_rows: (start, stop) rows kept before resizing, or None for all.
      image_size: side of the square image the network sees, or None to keep the
        (cropped) frame size (it must be square then).
      encoder_filters, encoder_kernel: the stride-2 convolutions.
      decoder_dense_size, decoder_filters, decoder_kernels: the stride-2 transposed
        convolutions; `decoder_kernels` has one more entry than `decoder_filters` (the
        last layer maps to the frame's channels).
      kl_tolerance: free bits per latent dimension (0.5 in the paper).
    """

    def __init__(
        self,
        frame_shape: Sequence[int],
        representation_size: int,
        crop_rows: tuple[int, int] | None = None,
        image_size: int | None = None,
        encoder_filters: Sequence[int] = (32, 64, 128, 256),
        encoder_kernel: int = 4,
        decoder_dense_size: int = 1024,
        decoder_filters: Sequence[int] = (128, 64, 32),
        decoder_kernels: Sequence[int] = (5, 5, 6, 6),
        kl_tolerance: float = 0.5,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(representation_size) <= 0:
            raise ValueError(f"representation_size must be positive, got {representation_size}.")
        if len(decoder_kernels) != len(decoder_filters) + 1:
            raise ValueError(
                f"decoder_kernels needs {len(decoder_filters) + 1} entries (one per "
                f"decoder_filters entry plus the output layer), got {len(decoder_kernels)}."
            )
        self.frame_shape = tuple(int(s) for s in frame_shape)
        self._representation_size = int(representation_size)
        self.crop_rows = None if crop_rows is None else (int(crop_rows[0]), int(crop_rows[1]))
        height = self.frame_shape[0] if crop_rows is None else crop_rows[1] - crop_rows[0]
        if image_size is None and height != self.frame_shape[1]:
            raise ValueError(
                f"Frames of {height}x{self.frame_shape[1]} after cropping are not square; "
                "pass image_size= to resize them."
            )
        self.image_size = int(image_size) if image_size is not None else height
        self.kl_tolerance = float(kl_tolerance)
        channels = self.frame_shape[-1]

        self.encoder_convs = [
            keras.layers.Conv2D(
                f, encoder_kernel, strides=2, activation="relu", name=f"enc_conv{i}"
            )
            for i, f in enumerate(encoder_filters)
        ]
        self.flatten = keras.layers.Flatten(name="enc_flatten")
        self.mean_head = keras.layers.Dense(self._representation_size, name="enc_mean")
        self.log_var_head = keras.layers.Dense(self._representation_size, name="enc_log_var")
        self.decoder_dense = keras.layers.Dense(decoder_dense_size, name="dec_dense")
        self.decoder_reshape = keras.layers.Reshape((1, 1, decoder_dense_size), name="dec_reshape")
        self.decoder_deconvs = [
            keras.layers.Conv2DTranspose(f, k, strides=2, activation="relu", name=f"dec_deconv{i}")
            for i, (f, k) in enumerate(zip(decoder_filters, decoder_kernels[:-1]))
        ]
        self.decoder_out = keras.layers.Conv2DTranspose(
            channels, decoder_kernels[-1], strides=2, activation="sigmoid", name="dec_out"
        )
        # Check the decoder really produces image_size x image_size.
        side = 1
        for k in decoder_kernels:
            side = (side - 1) * 2 + k
        if side != self.image_size:
            raise ValueError(
                f"The decoder (kernels {tuple(decoder_kernels)}, stride 2) outputs {side}x{side} "
                f"images but the encoder sees {self.image_size}x{self.image_size}; change "
                "decoder_kernels or image_size."
            )

    # ---- ObservationEncoder -------------------------------------------------------------------
    @property
    def representation_size(self) -> int:
        return self._representation_size

    def preprocess(self, x: tf.Tensor) -> tf.Tensor:
        """Raw frames [B, H, W, C] (uint8, or float holding 0..255) -> float32 [B, s, s, C] in [0, 1]."""
        x = tf.cast(x, tf.float32) / 255.0
        if self.crop_rows is not None:
            x = x[:, self.crop_rows[0] : self.crop_rows[1]]
        if tuple(x.shape[1:3]) != (self.image_size, self.image_size):
            x = tf.image.resize(x, (self.image_size, self.image_size))
        return x

    def encode_posterior(
        self, x: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Raw frames [B, H, W, C] -> (mean [B, Z], std [B, Z]) of q(z | x)."""
        h = self.preprocess(x)
        for conv in self.encoder_convs:
            h = conv(h, training=training)
        h = self.flatten(h)
        mean = self.mean_head(h)
        log_var = self.log_var_head(h)
        return mean, tf.exp(0.5 * log_var)

    def compute_full_representation(
        self, x: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """uint8 [B, H, W, C] -> (posterior mean [B, Z], {"std_devs": [B, Z]})."""
        mean, std = self.encode_posterior(x, training=training)
        return mean, {"std_devs": std}

    def decode(self, z: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """[B, Z] -> reconstructed frames [B, s, s, C] in [0, 1]."""
        h = self.decoder_reshape(self.decoder_dense(z, training=training))
        for deconv in self.decoder_deconvs:
            h = deconv(h, training=training)
        return self.decoder_out(h, training=training)

    def reconstruct(self, x: tf.Tensor) -> tf.Tensor:
        """Raw frames [B, H, W, C] -> decode(posterior mean) [B, s, s, C] (deterministic)."""
        return self.decode(self.compute_representation(x))

    def kl_loss(self, mean: tf.Tensor, std: tf.Tensor) -> tf.Tensor:
        """Batch mean of max(KL(q || N(0, I)), kl_tolerance * Z); scalar."""
        posterior = tfd.MultivariateNormalDiag(loc=mean, scale_diag=std)
        prior = tfd.MultivariateNormalDiag(loc=tf.zeros_like(mean), scale_diag=tf.ones_like(std))
        kl = tfd.kl_divergence(posterior, prior)  # [B]
        kl = tf.maximum(kl, self.kl_tolerance * self._representation_size)
        return tf.reduce_mean(kl)

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """Raw frames [B, H, W, C] -> reconstruction [B, s, s, C] of a posterior sample.

        Registers the clipped KL term with `add_loss` (see the module docstring)."""
        mean, std = self.encode_posterior(x, training=training)
        z = tfd.MultivariateNormalDiag(loc=mean, scale_diag=std).sample()
        self.add_loss(self.kl_loss(mean, std))
        return self.decode(z, training=training)

    def get_loss_fn(self):
        """fn(frames [B, H, W, C] raw 0..255, reconstruction [B, s, s, C]) -> [B] squared error.

        Keras averages it over the batch; the KL term comes from `model.losses`."""
        preprocess = self.preprocess

        def reconstruction_loss(y_true, y_pred):
            target = preprocess(y_true)
            return tf.reduce_sum(tf.square(target - tf.cast(y_pred, tf.float32)), axis=[1, 2, 3])

        return reconstruction_loss

    def total_loss(self, x: tf.Tensor, training: bool = True) -> tf.Tensor:
        """The full objective for a custom loop: reconstruction + clipped KL, scalar."""
        recon = self(x, training=training)
        rec = tf.reduce_mean(self.get_loss_fn()(x, recon))
        return rec + tf.add_n(self.losses)

    def build(self, input_shape=None) -> None:
        """Creates every weight by running the layers on one dummy frame (cheap, eager)."""
        mean, _ = self.encode_posterior(tf.zeros((1, *self.frame_shape), tf.uint8))
        self.decode(mean)
        self.built = True

    def build_for_frames(self) -> ConvVae:
        """Builds the model for raw frames of `frame_shape` if needed; returns self."""
        if not self.built:
            self.build((None, *self.frame_shape))
        return self
