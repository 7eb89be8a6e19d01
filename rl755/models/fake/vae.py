"""A tiny ConvVAE for FAKE_PIXELS (`--environment=FAKE_PIXELS --model=vae.Vae`), for tests.

    vae = Vae(representation_size=4)
    z, extras = vae.compute_full_representation(frames)   # uint8 [B, 16, 16, 3] -> [B, 4]

Same design as the CarRacing VAE (rl755.models.common.conv_vae) at toy size: no crop, no
resize; encoder Conv2D 8/16 (kernel 4, stride 2) -> 2x2x16; decoder Dense(64) ->
Conv2DTranspose 16/8/3 (kernels 3, 4, 2, stride 2) -> 16x16x3.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.conv_vae import ConvVae


class Vae(ConvVae):
    """Tiny ConvVAE on 16x16x3 fake frames; `obs_sampled_per_rollout` is recorded, unused."""

    def __init__(
        self,
        representation_size: int = 4,
        obs_sampled_per_rollout: int | None = None,
        kl_tolerance: float = 0.5,
        **kwargs,
    ):
        super().__init__(
            frame_shape=Environments.FAKE_PIXELS.observation_shape,
            representation_size=representation_size,
            crop_rows=None,
            image_size=None,
            encoder_filters=(8, 16),
            encoder_kernel=4,
            decoder_dense_size=64,
            decoder_filters=(16, 8),
            decoder_kernels=(3, 4, 2),
            kl_tolerance=kl_tolerance,
            **kwargs,
        )
        self.obs_sampled_per_rollout = obs_sampled_per_rollout
