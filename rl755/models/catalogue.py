"""Every `--model=` name, built for ANY environment from its presets (`EnvironmentSpec.presets`).

    vae = build("CAR_RACING", "vae.Vae")                       # Z = 32, 4,348,547 params
    z, extras = vae.compute_full_representation(frames)        # uint8 [B, 96, 96, 3] -> [B, 32]
    fn = model_fn("DOOM_TAKE_COVER", "mdn_rnn.mdn_rnn_with_heads")   # picklable, no arguments
    mdn = fn()                                                 # inputs [B, T, 64 + 3]

Names (an unknown one raises LookupError listing these):

    vae.Vae                          World Models' ConvVAE (Ha & Schmidhuber 2018). Frames are
                                     cropped to `crop_rows`, resized to `image_size` and scaled
                                     to [0, 1] inside the model; encoder Conv2D 32/64/128/256
                                     (kernel 4, stride 2, relu) -> mean and log-variance heads;
                                     decoder Dense(1024) -> Conv2DTranspose 128/64/32/3 (kernels
                                     5, 5, 6, 6; sigmoid); KL tolerance 0.5 per latent dimension.
                                     CarRacing (crop 0:84): 4,348,547 params; Doom (Z = 64):
                                     4,446,915. `obs_sampled_per_rollout` is recorded, unused.
    mdn_rnn.mdn_rnn                  LSTM + a Gaussian mixture per latent dimension (LSTM 256,
                                     5 Gaussians: 422,368 params for CarRacing). Sampling:
                                     `sample_next(h, temperature=tau)` divides the mixture logits
                                     by tau and multiplies the standard deviations by sqrt(tau).
    mdn_rnn.mdn_rnn_with_heads       + reward and episode-end heads (what dream training reads;
                                     the paper's Doom model predicted "done");
                                     done_pos_weight = presets.mdn_rnn_done_pos_weight
    mdn_rnn.mdn_rnn_with_heads_end_weighted   the same, episode ends weighted
                                     presets.end_weighted_done_pos_weight (50) in the loss
    lstm.deterministic_lstm          LSTM regression of z_{t+1} (squared error)
    lstm.deterministic_lstm_with_heads        + reward and episode-end heads
    transformer.{tiny,small,base}_deterministic_transformer[_with_heads]
                                     causal sliding-window transformers (ALiBi, key/value cache
                                     when acting; rl755/models/sequential/transformer.py):

        preset   layers  model_dim  heads  window  params (Z=32, A=3)
        tiny        2        64       4      32     ~0.1M
        small       4       128       4      64     ~0.8M
        base        6       256       8     128     ~4.8M

    transformer.{tiny,small,base}_infilling_transformer[_with_heads]
                                     the same causal transformer (one more input: the
                                     "z hidden" flag, 0 when acting) with an infilling head
                                     (one bidirectional block + Dense(Z), used in training
                                     only): trains on --task=autoregressive, infill or mixed
                                     (rl755/models/infilling/model.py)
    transformer.{tiny,small,base}_retrieval_transformer[_with_heads]
                                     the same causal transformer, then cross-attention to the
                                     k nearest windows of the training rollouts (a faiss
                                     index stage 4 builds in the model dir); the preset's
                                     retrieval settings: retrieval.RETRIEVAL_PRESETS
                                     (rl755/models/retrieval/model.py)
    unet.infilling_unet              a U-Net that fills the masked pixels of frame t from the K
                                     frames before it, the actions between them and a noise
                                     vector (rl755/models/unet/model.py; widths
                                     presets.unet_filters); trained with or without a patch
                                     discriminator by scripts/models/train_infilling_unet.py.
                                     Takes `context_frames=`, `noise_size=`, `use_actions=`.

Sizes come from the environment's `ModelPresets` (Z, crop, image size, LSTM units, mixture
count, transformer sizes, done weights); keyword arguments override them, e.g.
`build(env, "mdn_rnn.mdn_rnn", units=64)` or any argument of
rl755.models.sequential.models / conv_vae.ConvVae. Sequential models take inputs
[B, T, Z + A] with Z = presets.representation_size and A = the environment's action size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rl755.environments import Environment, Environments

ENCODER = "encoder"
SEQUENTIAL = "sequential"
INFILLING = "infilling"  # frame models: context frames + actions -> an infilled frame
_TRANSFORMER_PRESETS = ("tiny", "small", "base")
_TRANSFORMER_FAMILIES = ("deterministic", "infilling", "retrieval")
#: ModelPresets fields that are ConvVae arguments of the same name.
_VAE_PRESETS = (
    "representation_size",
    "crop_rows",
    "image_size",
    "encoder_filters",
    "encoder_kernel",
    "decoder_dense_size",
    "decoder_filters",
    "decoder_kernels",
    "kl_tolerance",
)


def _vae(env: Environment, kwargs: dict):
    from rl755.models.encoders.conv_vae import ConvVae

    obs_sampled_per_rollout = kwargs.pop("obs_sampled_per_rollout", None)
    args = {name: getattr(env.presets, name) for name in _VAE_PRESETS}
    vae = ConvVae(frame_shape=env.observation_shape, **{**args, **kwargs})
    vae.obs_sampled_per_rollout = obs_sampled_per_rollout
    return vae


def _unet(env: Environment, kwargs: dict):
    from rl755.models.unet.model import InfillingUNet

    args = dict(
        frame_shape=env.observation_shape,
        action_size=env.action_size,
        filters=env.presets.unet_filters,
    )
    return InfillingUNet(**{**args, **kwargs})


def _sequential(family: str, preset: str | None, heads: bool, end_weighted: bool = False):
    """A builder (env, kwargs) -> model for one sequential model name."""

    def build_model(env: Environment, kwargs: dict):
        from rl755.models.sequential import models as sequential_models

        p = env.presets
        args: dict[str, Any] = dict(
            representation_size=p.representation_size, action_size=env.action_size
        )
        if family in _TRANSFORMER_FAMILIES:
            args.update(dataclasses.asdict(p.transformer_size(preset)))
            args["name"] = f"{preset}_{family}_transformer"
            fn = _transformer_constructor(family, preset, args)
        elif family == "lstm":
            args["units"] = p.rnn_units
            fn = sequential_models.deterministic_lstm
        else:
            args.update(units=p.rnn_units, num_components=p.num_components)
            fn = sequential_models.mdn_rnn
            if heads and p.mdn_rnn_done_pos_weight is not None:
                args["done_pos_weight"] = p.mdn_rnn_done_pos_weight
            if end_weighted:
                args["done_pos_weight"] = p.end_weighted_done_pos_weight
        if heads:
            args.update(predict_reward=True, predict_done=True)
        return fn(**{**args, **kwargs})

    return build_model


def _transformer_constructor(family: str, preset: str, args: dict):
    """The constructor of one transformer family (deterministic, infilling, retrieval)."""
    if family == "infilling":
        from rl755.models.infilling.model import infilling_transformer

        return infilling_transformer
    if family == "retrieval":
        from rl755.models.retrieval import model as retrieval

        args["retrieval"] = retrieval.RETRIEVAL_PRESETS[preset]
        return retrieval.retrieval_transformer
    from rl755.models.sequential.models import deterministic_transformer

    return deterministic_transformer


_BUILDERS: dict[str, tuple[str, Any]] = {
    "vae.Vae": (ENCODER, _vae),
    "mdn_rnn.mdn_rnn": (SEQUENTIAL, _sequential("mdn_rnn", None, heads=False)),
    "mdn_rnn.mdn_rnn_with_heads": (SEQUENTIAL, _sequential("mdn_rnn", None, heads=True)),
    "mdn_rnn.mdn_rnn_with_heads_end_weighted": (
        SEQUENTIAL,
        _sequential("mdn_rnn", None, heads=True, end_weighted=True),
    ),
    "lstm.deterministic_lstm": (SEQUENTIAL, _sequential("lstm", None, heads=False)),
    "lstm.deterministic_lstm_with_heads": (SEQUENTIAL, _sequential("lstm", None, heads=True)),
}
for _family in _TRANSFORMER_FAMILIES:
    for _preset in _TRANSFORMER_PRESETS:
        for _suffix, _heads in (("", False), ("_with_heads", True)):
            _BUILDERS[f"transformer.{_preset}_{_family}_transformer{_suffix}"] = (
                SEQUENTIAL,
                _sequential(_family, _preset, heads=_heads),
            )
_BUILDERS["unet.infilling_unet"] = (INFILLING, _unet)


def names(kind: str | None = None) -> list[str]:
    """The model names, all or of one kind ("encoder", "sequential" or "infilling")."""
    return [n for n, (k, _) in _BUILDERS.items() if kind is None or k == kind]


def kind_of(name: str) -> str:
    """ "encoder", "sequential" or "infilling"; an unknown name raises LookupError listing
    the valid ones."""
    return _entry(name)[0]


def _entry(name: str, kind: str | None = None) -> tuple[str, Any]:
    entry = _BUILDERS.get(name)
    if entry is None or (kind is not None and entry[0] != kind):
        what = f"{kind} model" if kind else "model"
        article = "an" if entry and entry[0][0] in "aeiou" else "a"
        found = f" ({name} is {article} {entry[0]} model)" if entry else ""
        raise LookupError(
            f"Unknown {what} {name!r}{found}. Valid --model values: {', '.join(names(kind))} "
            "(rl755.models.catalogue)."
        )
    return entry


def build(environment: Environment | str, name: str, kind: str | None = None, **kwargs):
    """The model `name` sized for `environment` (kwargs override its presets)."""
    env = Environments.from_name(environment)
    return _entry(name, kind)[1](env, dict(kwargs))


@dataclasses.dataclass(frozen=True)
class ModelFn:
    """A picklable constructor of one catalogue model: `fn()` builds it, `fn(units=8)` overrides.

    What trainers, saved models and Ray workers hold instead of a function per environment.
    """

    environment: Environment
    name: str
    kwargs: tuple[tuple[str, Any], ...] = ()

    def __call__(self, **kwargs):
        return build(self.environment, self.name, **{**dict(self.kwargs), **kwargs})


def model_fn(environment: Environment | str, name: str, kind: str | None = None, **kwargs):
    """A `ModelFn` for `name` (checked now: an unknown name fails before anything is built)."""
    _entry(name, kind)
    return ModelFn(Environments.from_name(environment), name, tuple(sorted(kwargs.items())))
