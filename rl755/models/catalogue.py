"""Every `--model=` name, built for ANY environment from its presets (`EnvironmentSpec.presets`).

    vae = build("CAR_RACING", "vae.Vae")                       # Z = 32
    z, extras = vae.compute_full_representation(frames)        # uint8 [B, 96, 96, 3] -> [B, 32]
    fn = model_fn("DOOM_TAKE_COVER", "mdn_rnn.mdn_rnn_with_heads")   # picklable, no arguments
    mdn = fn()                                                 # inputs [B, T, 64 + 3]

A sequential model is one row of `SEQUENTIAL_MODELS` below (or a `register` call in the file
that defines it, rl755/models/registry.py): its name, its builder, its presets and whether it
has heads. Its sizes come from the row's presets, which may read the environment's
`ModelPresets` (Z, LSTM units, mixture count, transformer sizes, done weights); keyword
arguments override them, e.g. `build(env, "mdn_rnn.mdn_rnn", units=64)`. Sequential models
take inputs [B, T, Z + A], Z = presets.representation_size, A = the environment's action size.
Modules named in $RL755_MODEL_MODULES (comma-separated) are imported with this one, so the
models they register are `--model` names of every script. An unknown name raises LookupError
listing the valid ones. docs/models.md explains each family; the names (generated from the
registrations):

"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from rl755.environments import Environment, Environments
from rl755.models import registry
from rl755.models.registry import Preset, Sequential, register

ENCODER = "encoder"
SEQUENTIAL = "sequential"
INFILLING = "infilling"  # frame models: context frames + actions -> an infilled frame
#: The environment variable naming modules that register more models.
MODULES_VARIABLE = "RL755_MODEL_MODULES"

_MODELS = "rl755.models.sequential.models"
_RNN = {"units": Preset("rnn_units")}
_MDN = {**_RNN, "num_components": Preset("num_components")}
_TRANSFORMER_BUILDERS = {
    "deterministic": "rl755.models.sequential.models:deterministic_transformer",
    "infilling": "rl755.models.infilling.model:infilling_transformer",
    "retrieval": "rl755.models.retrieval.model:retrieval_transformer",
}
_TRANSFORMER_WHAT = {
    "deterministic": "causal sliding-window transformer, regression of z_(t+1)",
    "infilling": "the transformer + an infilling head (--task=infill or mixed)",
    "retrieval": "the transformer + attention to retrieved windows of the training rollouts",
}
_HEADS = " + reward and episode-end heads"

#: The repository's sequential models, one row each (rl755.models.registry.Sequential).
SEQUENTIAL_MODELS = [
    Sequential(
        "mdn_rnn.mdn_rnn",
        f"{_MODELS}:mdn_rnn",
        _MDN,
        description="World Models' MDN-RNN: LSTM + a Gaussian mixture per latent dimension",
    ),
    Sequential(
        "mdn_rnn.mdn_rnn_with_heads",
        f"{_MODELS}:mdn_rnn",
        {**_MDN, "done_pos_weight": Preset("mdn_rnn_done_pos_weight")},
        heads=True,
        description="the MDN-RNN" + _HEADS + " (what dream training reads)",
    ),
    Sequential(
        "mdn_rnn.mdn_rnn_with_heads_end_weighted",
        f"{_MODELS}:mdn_rnn",
        {**_MDN, "done_pos_weight": Preset("end_weighted_done_pos_weight")},
        heads=True,
        description="the same, episode ends weighted more in the loss",
    ),
    Sequential(
        "lstm.deterministic_lstm",
        f"{_MODELS}:deterministic_lstm",
        _RNN,
        description="LSTM regression of z_(t+1) (squared error)",
    ),
    Sequential(
        "lstm.deterministic_lstm_with_heads",
        f"{_MODELS}:deterministic_lstm",
        _RNN,
        heads=True,
        description="the deterministic LSTM" + _HEADS,
    ),
]
for _family, _builder in _TRANSFORMER_BUILDERS.items():
    for _size in ("tiny", "small", "base"):
        _presets: dict[str, Any] = {
            key: Preset("transformer_sizes", _size, key)
            for key in ("num_layers", "model_dim", "num_heads", "window")
        }
        _presets["name"] = f"{_size}_{_family}_transformer"
        if _family == "retrieval":
            _presets["retrieval"] = _size  # retrieval.RETRIEVAL_PRESETS
        for _suffix, _heads in (("", False), ("_with_heads", True)):
            SEQUENTIAL_MODELS.append(
                Sequential(
                    f"transformer.{_size}_{_family}_transformer{_suffix}",
                    _builder,
                    _presets,
                    heads=_heads,
                    description=f"{_size} {_TRANSFORMER_WHAT[_family]}" + _HEADS * _heads,
                )
            )
for _row in SEQUENTIAL_MODELS:
    register(_row)

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


#: Frame models: name -> (kind, builder(env, kwargs), description).
_FRAME_MODELS: dict[str, tuple[str, Any, str]] = {
    "vae.Vae": (ENCODER, _vae, "World Models' ConvVAE (Ha & Schmidhuber 2018)"),
    "unet.infilling_unet": (
        INFILLING,
        _unet,
        "a U-Net filling the masked pixels of a frame from the frames before it",
    ),
}


def _kinds() -> dict[str, str]:
    """{name: kind}: the encoders, the sequential models (in registration order), the rest."""
    out = {n: k for n, (k, _, _) in _FRAME_MODELS.items() if k == ENCODER}
    out.update((e.name, SEQUENTIAL) for e in registry.registered())
    out.update((n, k) for n, (k, _, _) in _FRAME_MODELS.items() if k != ENCODER)
    return out


def names(kind: str | None = None) -> list[str]:
    """The model names, all or of one kind ("encoder", "sequential" or "infilling")."""
    return [n for n, k in _kinds().items() if kind is None or k == kind]


def kind_of(name: str) -> str:
    """ "encoder", "sequential" or "infilling"; an unknown name raises LookupError listing
    the valid ones."""
    return _kind(name)


def describe(name: str) -> str:
    """The one-line description of a model name."""
    entry = registry.get(name)
    return entry.description if entry else _FRAME_MODELS[name][2]


def help_text(kind: str | None = None) -> str:
    """The `--model` flag's help: the valid names of `kind`."""
    what = f"a {kind} model" if kind else "a model"
    return f"{what} of rl755.models.catalogue (docs/models.md), one of: {', '.join(names(kind))}."


def _kind(name: str, kind: str | None = None) -> str:
    found = _kinds().get(name)
    if found is None or (kind is not None and found != kind):
        what = f"{kind} model" if kind else "model"
        article = "an" if found and found[0] in "aeiou" else "a"
        is_kind = f" ({name} is {article} {found} model)" if found else ""
        raise LookupError(
            f"Unknown {what} {name!r}{is_kind}. Valid --model values: {', '.join(names(kind))} "
            f"(rl755.models.catalogue; a model registered by a module of your own: name the "
            f"module in {MODULES_VARIABLE})."
        )
    return found


def _build(env: Environment, name: str, kwargs: dict, entry: Sequential | None = None):
    entry = entry or registry.get(name)
    if entry is None:
        return _FRAME_MODELS[name][1](env, kwargs)
    args: dict[str, Any] = dict(
        representation_size=env.presets.representation_size, action_size=env.action_size
    )
    args.update(entry.arguments(env.presets))
    return entry.resolve_builder()(**{**args, **kwargs})


def build(environment: Environment | str, name: str, kind: str | None = None, **kwargs):
    """The model `name` sized for `environment` (kwargs override its presets)."""
    env = Environments.from_name(environment)
    _kind(name, kind)
    return _build(env, name, dict(kwargs))


@dataclasses.dataclass(frozen=True)
class ModelFn:
    """A picklable constructor of one catalogue model: `fn()` builds it, `fn(units=8)` overrides.

    What trainers, saved models and Ray workers hold instead of a function per environment. It
    carries a sequential model's registration, so a process that never imported the
    registering module builds it too."""

    environment: Environment
    name: str
    kwargs: tuple[tuple[str, Any], ...] = ()
    registration: Sequential | None = dataclasses.field(default=None, compare=False, repr=False)

    def __call__(self, **kwargs):
        entry = self.registration
        if entry is None:
            _kind(self.name)
        env = Environments.from_name(self.environment)
        return _build(env, self.name, {**dict(self.kwargs), **kwargs}, entry)


def model_fn(environment: Environment | str, name: str, kind: str | None = None, **kwargs):
    """A `ModelFn` for `name` (checked now: an unknown name fails before anything is built)."""
    _kind(name, kind)
    env = Environments.from_name(environment)
    return ModelFn(env, name, tuple(sorted(kwargs.items())), registry.get(name))


def _docstring_names() -> str:
    width = max(len(n) for n in names()) + 2
    return "\n".join(f"    {n:<{width}} {describe(n)}" for n in names()) + "\n"


registry.import_modules(os.environ.get(MODULES_VARIABLE, ""), MODULES_VARIABLE)
if __doc__ is not None:  # (None under python -OO)
    __doc__ += _docstring_names()
