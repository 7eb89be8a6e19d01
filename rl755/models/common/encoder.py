"""The observation encoder interface (stage 2).

    encoder = rl755.models.catalogue.build("CAR_RACING", "vae.Vae", obs_sampled_per_rollout=100)
    z, extras = encoder.compute_full_representation(frames)   # frames: uint8 [B, H, W, C]
    # z: float32 [B, Z]; extras: {"std_devs": float32 [B, Z], ...} (may be empty)
    encoder.compile(optimizer="adam", loss=encoder.get_loss_fn())
    recon = encoder.decode(z)                                 # float32 [B, h, w, C] in [0, 1]

Subclasses take raw uint8 environment frames and do their own preprocessing (cropping,
resizing, scaling), so every caller feeds exactly what the environment produced.
"""

from __future__ import annotations

import abc

import keras
import tensorflow as tf


class ObservationEncoder(keras.Model, abc.ABC):
    """A keras.Model mapping raw frames to a representation; see the module docstring."""

    @property
    @abc.abstractmethod
    def representation_size(self) -> int:
        """Z, the size of the representation."""

    @abc.abstractmethod
    def compute_full_representation(
        self, x: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """x: uint8 [B, H, W, C] -> (representation float32 [B, Z], extras dict).

        For a VAE the representation is the posterior mean and extras holds
        "std_devs" float32 [B, Z]."""

    @abc.abstractmethod
    def get_loss_fn(self):
        """A Keras loss `fn(y_true, y_pred) -> scalar` for `compile(loss=...)`."""

    def compute_representation(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        """x: uint8 [B, H, W, C] -> float32 [B, Z]."""
        return self.compute_full_representation(x, training=training)[0]

    def decode(self, z: tf.Tensor) -> tf.Tensor:
        """float32 [B, Z] -> reconstructed frames float32 [B, h, w, C] in [0, 1] (if supported)."""
        raise NotImplementedError(f"{type(self).__name__} has no decoder.")
