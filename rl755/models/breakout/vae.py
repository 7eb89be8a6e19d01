"""The World Models ConvVAE for BREAKOUT (`--environment=BREAKOUT --model=vae.Vae`).

    vae = Vae()                                            # representation_size=32
    z, extras = vae.compute_full_representation(frames)   # uint8 [B, 64, 64, 3] -> [B, 32]
    # extras["std_devs"]: [B, 32]

The CarRacing architecture with Z = 32 (Breakout's frames carry little besides
the paddle, ball and bricks).
Preprocessing: `Environments.BREAKOUT.make()` already resizes the game's frames to 64x64 (the
encoder's input size), so the model only scales them to [0, 1]: no crop, no resize. Encoder
Conv2D 32/64/128/256 (kernel 4, stride 2, relu) -> 2x2x256 -> mean and log-variance heads;
decoder Dense(1024) -> Conv2DTranspose 128/64/32/3 (kernels 5, 5, 6, 6, stride 2; sigmoid)
-> 64x64x3; KL tolerance 0.5 per latent dimension. Loss and training: see
rl755.models.common.conv_vae.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.conv_vae import ConvVae


class Vae(ConvVae):
    """The paper's ConvVAE on 64x64x3 BREAKOUT frames.

    Args:
      representation_size: Z (32).
      obs_sampled_per_rollout: accepted for the training script's interface (the number
        of frames its input pipeline samples per rollout); recorded, not used by the model.
      kl_tolerance: free bits per latent dimension.
    """

    def __init__(
        self,
        representation_size: int = 32,
        obs_sampled_per_rollout: int | None = None,
        kl_tolerance: float = 0.5,
        **kwargs,
    ):
        super().__init__(
            frame_shape=Environments.BREAKOUT.observation_shape,
            representation_size=representation_size,
            crop_rows=None,
            image_size=64,
            encoder_filters=(32, 64, 128, 256),
            encoder_kernel=4,
            decoder_dense_size=1024,
            decoder_filters=(128, 64, 32),
            decoder_kernels=(5, 5, 6, 6),
            kl_tolerance=kl_tolerance,
            **kwargs,
        )
        self.obs_sampled_per_rollout = obs_sampled_per_rollout
