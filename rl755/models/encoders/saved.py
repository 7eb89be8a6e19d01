"""Loading trained encoders: `load_encoder`, the zoo's encoder loader, also used by stage 3.

    encoder = load_encoder("CAR_RACING", "vae.Vae", model_dir, representation_size=32)
    encoder.checkpoint_path     # the weights file that was loaded

The newest complete checkpoint of `model_dir` is loaded (see rl755.common.checkpoints)
unless `checkpoint=` names a weights file. Missing weights fail with the command that trains
them; weights of another architecture or size fail naming the expected and found shapes.
"""

from __future__ import annotations

import os

from rl755.common import checkpoints
from rl755.environments import Environments
from rl755.models.common.encoder import ObservationEncoder


def train_command(
    environment: Environments | str, model_name: str, model_dir: str, representation_size: int
) -> str:
    """The scripts/models/train_obs_encoder.py command that trains such an encoder."""
    env = Environments.from_name(environment)
    return (
        "python scripts/models/train_obs_encoder.py "
        f"--environment={env.name} --model={model_name} --model_dir={model_dir} "
        f"--representation_size={representation_size} --train_steps=... "
        "(docs/stages/train-encoder.md)"
    )


def load_encoder(
    environment: Environments | str,
    model_name: str,
    model_dir: str,
    representation_size: int,
    checkpoint: str | None = None,
    how_to_train: str | None = None,
    **model_kwargs,
) -> ObservationEncoder:
    """Builds the catalogue's `model_name` (rl755.models.catalogue) for the environment and
    loads its weights.

    Args:
      environment: an `Environments` name or member.
      model_name: an encoder name of rl755.models.catalogue, e.g. "vae.Vae".
      model_dir: the training run's --model_dir.
      representation_size: Z the weights were trained with.
      checkpoint: a weights file (absolute, or relative to model_dir); default: the newest
        complete checkpoint of model_dir.
      how_to_train: the command to show when weights are missing (default: a generic one).
    Returns the encoder (built, weights loaded) with `.checkpoint_path` set.
    """
    from rl755.models.encoders.train import build_encoder, make_encoder

    env = Environments.from_name(environment)
    model_dir = os.path.expanduser(str(model_dir))
    if checkpoint:
        path = checkpoint if os.path.isabs(checkpoint) else os.path.join(model_dir, checkpoint)
        if not os.path.exists(path):
            raise FileNotFoundError(f"Checkpoint file {path} does not exist.")
    else:
        path = checkpoints.newest_weights_file(model_dir)
        if path is None:
            raise FileNotFoundError(
                f"No trained weights for {env.name} {model_name} (Z={representation_size}) in "
                f"{model_dir} (no model-XXX.weights.h5). Train them with: "
                + (how_to_train or train_command(env, model_name, model_dir, representation_size))
                + ". Model locations come from $RL755_MODELS_DIR or ~/.config/rl755/config.json."
            )
    encoder = make_encoder(env, model_name, representation_size, **model_kwargs)
    build_encoder(encoder, env.observation_shape)
    info = _checkpoint_info(path)
    for key, want in (("model", model_name), ("representation_size", int(representation_size))):
        if info and key in info and info[key] != want:
            raise ValueError(
                f"Checkpoint {path} was trained with {key}={info[key]!r} but is being loaded "
                f"into {key}={want!r}. Use the settings it was trained with."
            )
    checkpoints.load_weights_checked(
        encoder,
        path,
        description=f"{env.name} {model_name}(representation_size={representation_size})",
    )
    encoder.checkpoint_path = path
    return encoder


def _checkpoint_info(weights_path: str) -> dict | None:
    import json

    base = os.path.basename(weights_path)
    if not base.endswith(".weights.h5"):
        return None
    info_path = os.path.join(os.path.dirname(weights_path), base[: -len(".weights.h5")] + ".json")
    if not os.path.exists(info_path):
        return None
    with open(info_path) as f:
        return json.load(f)
