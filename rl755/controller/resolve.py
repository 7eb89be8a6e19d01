"""Resolving --encoder / --sequential_model / --controller flags into an `AgentSpec`.

    spec = make_agent_spec("CAR_RACING", "LinearController", encoder="raw_rollout_vae_32ld",
                           sequential_model="mdn_rnn_32ld")

`encoder` and `sequential_model` are names of trained models in the zoo (rl755.zoo; the
functions of `rl755.models.<env folder>.saved_models`), or "none" (no encoder: the
controller reads the frame's pixels; no sequential model: a V-only controller on z). Training
directories can be given instead: `encoder_dir` + `encoder_model` (e.g. "vae.Vae") +
`representation_size`, and `sequential_model_dir` (its checkpoint markers name the model). Unknown names fail at once, listing the valid ones.
Everything returned is picklable, so Ray workers build their own models.
"""

from __future__ import annotations

import dataclasses

from rl755 import zoo
from rl755.controller import networks as controllers_lib
from rl755.controller.agent import AgentSpec
from rl755.controller.saved import saved_controller_kwargs
from rl755.environments import Environments

NONE = "none"


@dataclasses.dataclass(frozen=True)
class EncoderFromDir:
    """Picklable constructor: an encoder trained with scripts/models/train_obs_encoder.py."""

    environment: str
    model_name: str
    model_dir: str
    representation_size: int

    def __call__(self):
        from rl755.models.encoders.saved import load_encoder

        return load_encoder(
            self.environment, self.model_name, self.model_dir, self.representation_size
        )


@dataclasses.dataclass(frozen=True)
class SequentialModelFromDir:
    """Picklable constructor: a model trained with scripts/models/train_sequential_model.py."""

    model_dir: str

    def __call__(self):
        from rl755.models.sequential.train import load_trained_model

        return load_trained_model(self.model_dir)


def saved_model_fn(environment: Environments, name: str, what: str, source: str | None = None):
    """The zoo row `name` (a picklable no-argument loader), or None for "none".

    `what` is the flag ("encoder", "sequential_model", "saved_controller"); the row must be
    of the kind that flag takes (rl755.zoo.FLAG_KINDS). `source` ("trained", "shipped"; None:
    the trained copy if there is one, else the shipped one) picks the copy (`ZooModel.load`)."""
    if name is None or name.strip().lower() == NONE:
        return None
    try:
        row = zoo.get(environment, name, kind=zoo.FLAG_KINDS[what])
    except LookupError as e:
        raise LookupError(f"{e} (--{what} takes one of those, or 'none'.)") from None
    return row.from_source(source)


def make_agent_spec(
    environment: str | Environments,
    controller: str,
    encoder: str = NONE,
    sequential_model: str = NONE,
    encoder_dir: str | None = None,
    encoder_model: str | None = None,
    representation_size: int | None = None,
    hidden_units: int | None = None,
    sequential_model_dir: str | None = None,
    cell_state: bool = False,
) -> AgentSpec:
    """Strictly resolves names (no models are built here); see the module docstring."""
    env = Environments.from_name(environment)
    controllers_lib.get_controller_class(controller)  # fail fast on unknown names
    if controller == "ThresholdController":
        controllers_lib.threshold_levels(env)  # and on environments without its three actions
    if encoder_dir:
        if not (encoder_model and representation_size):
            raise ValueError(
                "--encoder_dir needs --encoder_model (e.g. vae.Vae) and " "--representation_size."
            )
        encoder_fn = EncoderFromDir(env.name, encoder_model, encoder_dir, int(representation_size))
        encoder_name = f"dir:{encoder_model}:{int(representation_size)}:{encoder_dir}"
    else:
        encoder_fn = saved_model_fn(env, encoder, "encoder")
        encoder_name = encoder or NONE
    if sequential_model_dir:
        seq_fn = SequentialModelFromDir(sequential_model_dir)
        sequential_model = f"dir:{sequential_model_dir}"
    else:
        seq_fn = saved_model_fn(env, sequential_model, "sequential_model")
    if seq_fn is not None and encoder_fn is None:
        raise ValueError("--sequential_model needs an encoder (--encoder or --encoder_dir).")
    kwargs = ()
    if controller == "HiddenLayerController" and hidden_units:
        kwargs = (("hidden_units", int(hidden_units)),)
    return AgentSpec(
        environment=env.name,
        controller=controller,
        controller_kwargs=kwargs,
        encoder_fn=encoder_fn,
        sequential_model_fn=seq_fn,
        encoder_name=encoder_name,
        sequential_model_name=sequential_model or NONE,
        cell_state=bool(cell_state),
    )


def ensemble_model_fns(
    environment: str | Environments, names=(), model_dirs=(), source: str | None = None
) -> dict[str, object]:
    """{name: picklable loader} of a dream ensemble's extra sequential models
    (rl755.controller.dream_eval): zoo `names` (strict lookups, as --sequential_model; a name
    "dir:<model dir>", as controller.json records a dir member, is that dir) and training
    `model_dirs` (named "dir:<model dir>", as --sequential_model_dir). `source` picks the
    zoo copies (`saved_model_fn`)."""
    env = Environments.from_name(environment)
    fns = {}
    for name in names:
        if name.startswith("dir:"):
            fns[name] = SequentialModelFromDir(name[4:])
            continue
        fns[name] = saved_model_fn(env, name, "sequential_model", source)
        if fns[name] is None:
            raise ValueError("--dream_ensemble lists sequential models; 'none' is not one.")
    for model_dir in model_dirs:
        fns[f"dir:{model_dir}"] = SequentialModelFromDir(model_dir)
    return fns


def models_source(trained) -> str | None:
    """The zoo copy (`saved_model_fn`'s `source`) a loaded controller's models come from: a
    controller shipped in the repository reads the shipped ones; otherwise None (the user's
    trained copy if there is one)."""
    return "shipped" if getattr(trained, "zoo_source", None) == "shipped" else None


def spec_for_trained(trained, encoder_fn=None, sequential_model_fn=None) -> AgentSpec:
    """The AgentSpec of a loaded `saved.TrainedController`, resolving its saved model names
    unless constructors are given. A controller shipped in the repository
    (`trained.zoo_source == "shipped"`) reads the shipped copies of its models, never a
    user's retrained ones of the same name."""
    meta = trained.meta
    env = Environments.from_name(meta["environment"])
    source = models_source(trained)
    if encoder_fn is None and meta["encoder"] != NONE:
        if meta["encoder"].startswith("dir:"):  # "dir:<model name>:<Z>:<encoder dir>"
            _, model_name, size, model_dir = meta["encoder"].split(":", 3)
            encoder_fn = EncoderFromDir(env.name, model_name, model_dir, int(size))
        else:
            encoder_fn = saved_model_fn(env, meta["encoder"], "encoder", source)
    if sequential_model_fn is None and meta["sequential_model"] != NONE:
        if meta["sequential_model"].startswith("dir:"):  # "dir:<model dir>"
            sequential_model_fn = SequentialModelFromDir(meta["sequential_model"][4:])
        else:
            sequential_model_fn = saved_model_fn(
                env, meta["sequential_model"], "sequential_model", source
            )
    return AgentSpec(
        environment=env.name,
        controller=meta["controller"],
        controller_kwargs=tuple(sorted(saved_controller_kwargs(meta).items())),
        encoder_fn=encoder_fn,
        sequential_model_fn=sequential_model_fn,
        encoder_name=meta["encoder"],
        sequential_model_name=meta["sequential_model"],
        cell_state=bool(meta.get("cell_state", False)),
    )
