"""What one environment entry holds: `EnvironmentSpec` and its model sizes, `ModelPresets`.

Both are frozen dataclasses of plain values, so an entry is data: it pickles, compares and
prints, and a new environment states only what differs from the defaults.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any


@dataclasses.dataclass(frozen=True)
class TransformerSize:
    """One size of `transformer.<preset>_deterministic_transformer` (see rl755.models.catalogue).

    Attributes:
      num_layers: transformer blocks.
      model_dim: width of the residual stream.
      num_heads: attention heads per block.
      window: sliding attention window, in steps (ALiBi; a key/value cache when acting).
    """

    num_layers: int
    model_dim: int
    num_heads: int
    window: int


#: The tiny/small/base sizes (params for Z = 32, A = 3: ~0.1M, ~0.8M, ~4.8M).
TRANSFORMER_SIZES: tuple[tuple[str, TransformerSize], ...] = (
    ("tiny", TransformerSize(num_layers=2, model_dim=64, num_heads=4, window=32)),
    ("small", TransformerSize(num_layers=4, model_dim=128, num_heads=4, window=64)),
    ("base", TransformerSize(num_layers=6, model_dim=256, num_heads=8, window=128)),
)


@dataclasses.dataclass(frozen=True)
class ModelPresets:
    """Model sizes for one environment, read by the generic constructors of rl755.models.catalogue.

    The defaults are World Models' CarRacing sizes (Ha & Schmidhuber 2018) on 64x64 frames:
    Z = 32, the paper's ConvVAE (4,348,547 params at Z = 32), LSTM 256 with 5 Gaussians per
    latent dimension (422,368 params for A = 3). An environment sets only what differs, e.g.
    Doom: `ModelPresets(representation_size=64, rnn_units=512, mdn_rnn_done_pos_weight=1.0)`.
    Every value can still be overridden per model by a constructor keyword argument.

    Attributes:
      representation_size: Z, the default latent size of `vae.Vae` and the size the
        sequential models expect (the same Z everywhere, so their datasets fit).
      crop_rows: (start, stop) frame rows the VAE keeps, or None for all (CarRacing: (0, 84)
        drops the indicator bar).
      image_size: side of the square image the VAE sees (frames are resized inside the
        model), or None to keep the (cropped) frame size.
      encoder_filters, encoder_kernel: the VAE's stride-2 convolutions.
      decoder_dense_size, decoder_filters, decoder_kernels: its stride-2 transposed
        convolutions (`decoder_kernels` has one more entry: the last maps to RGB).
      kl_tolerance: free bits per latent dimension (0.5 in the paper).
      rnn_units: LSTM units of `mdn_rnn.*` and `lstm.*`.
      num_components: Gaussians per latent dimension of `mdn_rnn.*`.
      mdn_rnn_done_pos_weight: the episode-end loss weight of positives in
        `mdn_rnn.mdn_rnn_with_heads`; None keeps the library's 10. Doom uses 1 (unweighted).
        Dreams draw their ends from `done_probability`, which divides the weight back out
        of the head's odds, so either weight gives calibrated ends; before that correction
        a weight w ended dreams about w times too often.
      end_weighted_done_pos_weight: that weight in `mdn_rnn.mdn_rnn_with_heads_end_weighted`
        (50: undoes most of the ~70x under-representation of episode ends that a slice
        sampler starting only where a whole slice fits had, for L = 100 and Doom's ~320-step
        random rollouts; today's sampler starts slices anywhere).
      transformer_sizes: (preset name, size) for tiny, small and base.
      unet_filters: filters per resolution of `unet.infilling_unet` (one stride-2 step
        each; frame sides must divide by 2 ** len), rl755/models/unet/model.py.
      patch_discriminator_filters: its patch discriminator's stride-2 convolutions.
    """

    representation_size: int = 32
    crop_rows: tuple[int, int] | None = None
    image_size: int | None = 64
    encoder_filters: tuple[int, ...] = (32, 64, 128, 256)
    encoder_kernel: int = 4
    decoder_dense_size: int = 1024
    decoder_filters: tuple[int, ...] = (128, 64, 32)
    decoder_kernels: tuple[int, ...] = (5, 5, 6, 6)
    kl_tolerance: float = 0.5
    rnn_units: int = 256
    num_components: int = 5
    mdn_rnn_done_pos_weight: float | None = None
    end_weighted_done_pos_weight: float = 50.0
    transformer_sizes: tuple[tuple[str, TransformerSize], ...] = TRANSFORMER_SIZES
    unet_filters: tuple[int, ...] = (32, 64, 128)
    patch_discriminator_filters: tuple[int, ...] = (32, 64, 128)

    def transformer_size(self, preset: str) -> TransformerSize:
        sizes = dict(self.transformer_sizes)
        if preset not in sizes:
            raise LookupError(f"Unknown transformer preset {preset!r}; valid: {', '.join(sizes)}.")
        return sizes[preset]


@dataclasses.dataclass(frozen=True)
class EnvironmentSpec:
    """One environment: how to make it, what it returns, and its model sizes.

    Give exactly one of `open_ai_name` (a gymnasium id) and `constructor`. Derived when left
    out: `folder_name` (name in lower case), `action_shape` ((num_discrete_actions,) or the
    length of `action_low`), and for discrete environments the [0, 1] action box.

    Attributes:
      name: the `--environment` value, upper case (e.g. "CAR_RACING").
      observation_shape: one observation as `make()` returns it and rollouts store it
        (uint8 frames, after `frame_size`).
      open_ai_name: the gymnasium id passed to `gym.make`.
      constructor: "package.module:Class" of an environment class outside gymnasium's
        registry, imported only when the environment is made. Classes with the old gym API
        (reset() -> obs, 4-tuple step, `seed()`, old-style spaces) are adapted by
        `rl755.environments.wrappers.OldGymApi`; `make_kwargs` go to the constructor and
        `max_episode_steps` becomes a `TimeLimit`.
      num_discrete_actions: for discrete environments, the number of actions; actions are
        then stored as a one-hot float vector of that length.
      action_low, action_high: per-dimension bounds of the action box (continuous envs).
      action_shape: shape of one stored action (float32).
      action_meanings: for discrete environments, the name of each action index.
      controller_squash: how a controller maps its unbounded outputs y into the action box,
        per dimension (`rl755.controller.networks.SQUASHES`): "scaled" (low + (tanh(y) + 1)
        / 2 * (high - low)) or "clipped" (clip(tanh(y), low, high)); None: all "scaled".
        World Models' CarRacing controller clips its brake, so a zero output means no brake.
      max_episode_steps: the environment's own time limit.
      make_kwargs: extra keyword arguments for `gym.make` or the constructor.
      register_module: module imported before `gym.make` (it registers the id), or None.
      observation_key: for dict observations, the key holding the frame, or None.
      frame_size: (height, width) that `make()` resizes frames to (bilinear, antialiased),
        or None to keep the environment's own frames.
      description: one line shown in listings.
      reproducible_reset: whether `reset(seed=s)` followed by the same actions replays the
        same episode, frame for frame. False for a simulator that ignores the seed or honours
        it only in part; the tests that replay episodes bit-exactly then skip it, saying so
        (`rl755.testing.replay`), instead of failing on the first differing pixel.
      folder_name: the environment's directory under the data and models dirs.
      presets: model sizes (`ModelPresets`) for rl755.models.catalogue.
    """

    name: str
    observation_shape: tuple[int, ...]
    open_ai_name: str | None = None
    constructor: str | None = None
    num_discrete_actions: int | None = None
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    action_shape: tuple[int, ...] | None = None
    action_meanings: tuple[str, ...] | None = None
    controller_squash: tuple[str, ...] | None = None
    max_episode_steps: int | None = None
    make_kwargs: tuple[tuple[str, Any], ...] = ()
    register_module: str | None = None
    observation_key: str | None = None
    frame_size: tuple[int, int] | None = None
    description: str = ""
    reproducible_reset: bool = True
    folder_name: str | None = None
    presets: ModelPresets = dataclasses.field(default_factory=ModelPresets)

    def __post_init__(self):
        def derive(field: str, value) -> None:
            if getattr(self, field) is None:
                object.__setattr__(self, field, value)

        if not self.name.isidentifier() or self.name != self.name.upper():
            raise ValueError(f"Environment name {self.name!r}: use an upper-case identifier.")
        if (self.open_ai_name is None) == (self.constructor is None):
            raise ValueError(
                f"{self.name}: give exactly one of open_ai_name (a gymnasium id) and "
                "constructor ('package.module:Class')."
            )
        derive("folder_name", self.name.lower())
        n = self.num_discrete_actions
        if n is not None:
            derive("action_low", (0.0,) * n)
            derive("action_high", (1.0,) * n)
            derive("action_shape", (n,))
        elif self.action_low is not None:
            derive("action_shape", (len(self.action_low),))
        if self.action_shape is None:
            raise ValueError(
                f"{self.name}: give num_discrete_actions, or action_low/action_high (or "
                "action_shape) for a continuous environment."
            )
        action_dims = int(math.prod(self.action_shape))
        derive("controller_squash", ("scaled",) * action_dims)
        if len(self.controller_squash) != action_dims:
            raise ValueError(
                f"{self.name}: controller_squash {self.controller_squash} needs one entry per "
                f"action dimension ({action_dims})."
            )
        object.__setattr__(self, "controller_squash", tuple(self.controller_squash))
        object.__setattr__(self, "observation_shape", tuple(self.observation_shape))
        object.__setattr__(self, "action_shape", tuple(self.action_shape))
