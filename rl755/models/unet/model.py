"""An infilling U-Net over frames and its patch discriminator (an observation-level world model).

    unet = catalogue.build("DOOM_TAKE_COVER", "unet.infilling_unet", context_frames=2,
                           noise_size=8)
    frame = unet(inputs)          # dict below -> float32 [B, H, W, C] in [0, 1]
    disc = PatchDiscriminator.like(unet, filters=(32, 64, 128))
    logits = disc(inputs, frame)  # float32 [B, H / 2**L, W / 2**L] (L = len(filters))

`inputs` (rl755.models.infilling.data.model_inputs builds them from rollout windows):

    "context": float32 [B, K, H, W, C] in [0, 1]   frames t-K .. t-1
    "target":  float32 [B, H, W, C] in [0, 1]      frame t; the model reads only the pixels
                                                   outside the mask (the rest is zeroed here)
    "mask":    float32 [B, H, W, 1]                1 where the model fills in: everywhere for
                                                   next-frame prediction, a rectangle for
                                                   region infilling
    "actions": float32 [B, K, A]                   a_{t-K} .. a_{t-1} (ignored without
                                                   use_actions)
    "noise":   float32 [B, N]                      N = noise_size; 0 = a deterministic model

The output copies the known pixels and fills the masked ones: out = mask * G + (1 - mask) *
target. The generator is a U-Net (Ronneberger et al. 2015): per resolution two 3x3
convolutions (LeakyReLU 0.2) whose output is kept as a skip connection, then a stride-2 4x4
convolution; at the bottom two 3x3 convolutions of twice the last width; up again by
nearest-neighbour upsampling, a 3x3 convolution, the skip concatenated, two 3x3 convolutions;
a 1x1 convolution and a sigmoid. The noise is broadcast to planes and concatenated at the
input, the bottleneck and every decoder resolution, so the generator can use it at every
scale. The discriminator is pix2pix's conditional PatchGAN (Isola et al. 2017): it sees the
same conditioning as the generator plus a candidate frame and scores each patch as real or
generated (logits).
"""

from __future__ import annotations

import keras
import tensorflow as tf

INPUT_KEYS = ("context", "target", "mask", "actions", "noise")


def _planes(vectors: tf.Tensor, height: int, width: int) -> tf.Tensor:
    """[B, D] -> [B, height, width, D] (each vector repeated over the positions)."""
    return tf.tile(vectors[:, None, None, :], [1, height, width, 1])


def conditioning(inputs: dict, use_actions: bool) -> tf.Tensor:
    """What both networks see: [B, H, W, K*C + C + 1 (+ K*A)], frames scaled to [-1, 1]."""
    context, target, mask = inputs["context"], inputs["target"], inputs["mask"]
    b, k, h, w, c = (tf.shape(context)[i] for i in range(5))
    frames = tf.reshape(tf.transpose(context, [0, 2, 3, 1, 4]), [b, h, w, k * c])
    parts = [frames * 2.0 - 1.0, (target * 2.0 - 1.0) * (1.0 - mask), mask]
    if use_actions:
        actions = inputs["actions"]
        parts.append(_planes(tf.reshape(actions, [b, -1]), h, w))
    out = tf.concat(parts, axis=-1)
    channels = context.shape[1] * context.shape[-1] + context.shape[-1] + 1
    if use_actions:
        channels += inputs["actions"].shape[1] * inputs["actions"].shape[2]
    return tf.ensure_shape(out, [None, context.shape[2], context.shape[3], channels])


def _leaky_relu(x: tf.Tensor) -> tf.Tensor:
    """LeakyReLU with slope 0.2, written without the LeakyRelu op (TF's graph optimizer fails
    to fuse that op's gradient after a convolution and logs an error at every run)."""
    return tf.maximum(x, 0.2 * x)


def _conv(filters: int, kernel: int = 3, strides: int = 1, name: str | None = None):
    return keras.layers.Conv2D(
        filters, kernel, strides=strides, padding="same", activation=None, name=name
    )


class InfillingUNet(keras.Model):
    """The generator; see the module docstring for inputs and outputs.

    Args:
      frame_shape: (H, W, C) of one frame; H and W must divide by 2 ** len(filters).
      action_size: A.
      context_frames: K >= 1.
      noise_size: N >= 0 (0: the output is a function of the conditioning alone).
      use_actions: whether the actions are an input (False: they are ignored, which makes
        the next frame uncertain wherever the action matters).
      filters: widths of the resolutions, finest first.
    """

    def __init__(
        self,
        frame_shape,
        action_size: int,
        context_frames: int = 2,
        noise_size: int = 8,
        use_actions: bool = True,
        filters=(32, 64, 128),
        name: str = "infilling_unet",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        _take_sizes(
            self, frame_shape, action_size, context_frames, use_actions, filters, "unet_filters"
        )
        self.noise_size = int(noise_size)
        if self.noise_size < 0:
            raise ValueError(f"noise_size must be >= 0, got {noise_size}.")
        self.down = [
            (_conv(f, name=f"down{i}_a"), _conv(f, name=f"down{i}_b"), _conv(f, 4, 2, f"pool{i}"))
            for i, f in enumerate(self.filters)
        ]
        bottom = 2 * self.filters[-1]
        self.bottleneck = (_conv(bottom, name="bottom_a"), _conv(bottom, name="bottom_b"))
        self.up = [
            (_conv(f, name=f"up{i}"), _conv(f, name=f"up{i}_a"), _conv(f, name=f"up{i}_b"))
            for i, f in reversed(list(enumerate(self.filters)))
        ]
        self.to_frame = keras.layers.Conv2D(self.frame_shape[-1], 1, name="to_frame")

    def _with_noise(self, x: tf.Tensor, noise: tf.Tensor | None) -> tf.Tensor:
        if noise is None:
            return x
        return tf.concat([x, _planes(noise, tf.shape(x)[1], tf.shape(x)[2])], axis=-1)

    def call(self, inputs: dict, training: bool | None = None) -> tf.Tensor:
        h, w, c = self.frame_shape
        tf.debugging.assert_shapes(
            [
                (inputs["context"], ("B", self.context_frames, h, w, c)),
                (inputs["target"], ("B", h, w, c)),
                (inputs["mask"], ("B", h, w, 1)),
                (inputs["actions"], ("B", self.context_frames, self.action_size)),
                (inputs["noise"], ("B", self.noise_size)),
            ]
        )
        act = _leaky_relu
        noise = inputs["noise"] if self.noise_size else None
        x = self._with_noise(conditioning(inputs, self.use_actions), noise)
        skips = []
        for conv_a, conv_b, pool in self.down:
            x = act(conv_b(act(conv_a(x))))
            skips.append(x)
            x = act(pool(x))
        x = self._with_noise(x, noise)
        x = act(self.bottleneck[1](act(self.bottleneck[0](x))))
        for (conv_up, conv_a, conv_b), skip in zip(self.up, reversed(skips)):
            x = act(conv_up(tf.repeat(tf.repeat(x, 2, axis=1), 2, axis=2)))
            x = self._with_noise(tf.concat([x, skip], axis=-1), noise)
            x = act(conv_b(act(conv_a(x))))
        filled = tf.sigmoid(self.to_frame(x))
        mask = inputs["mask"]
        return mask * filled + (1.0 - mask) * inputs["target"]

    def build_for_frames(self) -> InfillingUNet:
        """Creates the weights by running one all-zero input."""
        self(zero_inputs(self), training=False)
        return self


class PatchDiscriminator(keras.Model):
    """Conditional PatchGAN: (inputs, candidate frame [B, H, W, C]) -> logits [B, h, w].

    Each stride-2 4x4 convolution halves the resolution; a 3x3 convolution gives one logit
    per patch. It sees what the generator sees (without the noise) and the candidate."""

    def __init__(
        self,
        frame_shape,
        action_size: int,
        context_frames: int,
        use_actions: bool = True,
        filters=(32, 64, 128),
        name: str = "patch_discriminator",
        **kwargs,
    ):
        super().__init__(name=name, **kwargs)
        what = "patch_discriminator_filters"
        _take_sizes(self, frame_shape, action_size, context_frames, use_actions, filters, what)
        self.convs = [_conv(f, 4, 2, f"d{i}") for i, f in enumerate(self.filters)]
        self.to_logits = _conv(1, 3, name="logits")

    @classmethod
    def like(cls, generator: InfillingUNet, filters) -> PatchDiscriminator:
        """A discriminator for the generator's frames, context and actions."""
        return cls(
            generator.frame_shape,
            generator.action_size,
            generator.context_frames,
            generator.use_actions,
            filters,
        )

    def call(self, inputs: dict, frame: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        tf.debugging.assert_shapes([(frame, ("B", *self.frame_shape))])
        x = tf.concat([conditioning(inputs, self.use_actions), frame * 2.0 - 1.0], axis=-1)
        for conv in self.convs:
            x = _leaky_relu(conv(x))
        return tf.squeeze(self.to_logits(x), -1)

    def build_for_frames(self) -> PatchDiscriminator:
        inputs = zero_inputs(self)
        self(inputs, inputs["target"], training=False)
        return self


def zero_inputs(model, batch_size: int = 1) -> dict:
    """All-zero inputs (mask all ones) for `model`'s sizes."""
    h, w, c = model.frame_shape
    k = model.context_frames
    return {
        "context": tf.zeros([batch_size, k, h, w, c]),
        "target": tf.zeros([batch_size, h, w, c]),
        "mask": tf.ones([batch_size, h, w, 1]),
        "actions": tf.zeros([batch_size, k, model.action_size]),
        "noise": tf.zeros([batch_size, getattr(model, "noise_size", 0)]),
    }


def _take_sizes(model, frame_shape, action_size, context_frames, use_actions, filters, what):
    """Sets the sizes both networks share on `model` (as ints, a bool and tuples) and checks
    them; `what` is the flag that gave `filters`."""
    model.frame_shape = frame_shape = tuple(int(s) for s in frame_shape)
    model.action_size = int(action_size)
    model.context_frames = context_frames = int(context_frames)
    model.use_actions = bool(use_actions)
    model.filters = filters = tuple(int(f) for f in filters)
    if context_frames < 1:
        raise ValueError(f"context_frames must be >= 1, got {context_frames}.")
    if not filters:
        raise ValueError(f"{what} must name at least one width.")
    step = 2 ** len(filters)
    if frame_shape[0] % step or frame_shape[1] % step:
        raise ValueError(
            f"Frames of {frame_shape[0]}x{frame_shape[1]} do not divide by 2 ** {len(filters)} = "
            f"{step} ({what}={list(filters)} has {len(filters)} stride-2 steps): use fewer "
            "widths in the environment's presets or the flag."
        )
