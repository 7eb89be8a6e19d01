"""Loading a trained frame-infilling model (the U-Net of rl755.models.unet) from its model dir.

    generator, info = load_infilling_unet("runs/unet_gan")     # newest checkpoint
    generator, info = load_infilling_unet("runs/unet_gan", step=1000)

The model is rebuilt through the catalogue from what its checkpoint's marker says
(environment, model, context_frames, noise_size, use_actions, unet_filters). A model dir
without such a checkpoint fails with FileNotFoundError or ValueError naming it.
"""

from __future__ import annotations

from rl755.common import checkpoints
from rl755.models import catalogue


def load_infilling_unet(model_dir: str, step: int | None = None) -> tuple:
    """(generator with the weights of the newest checkpoint, or the one at `step`; its
    marker: environment, model, task, context_frames, noise_size, use_actions, ...)."""
    ckpt = checkpoints.checkpoint_at(
        str(model_dir),
        step,
        "train one with scripts/models/train_infilling_unet.py --model_dir=...",
    )
    info = dict(ckpt.info)
    if "task" not in info or "noise_size" not in info:
        raise ValueError(f"{model_dir} holds no infilling U-Net ({ckpt.weights_path}).")
    generator = catalogue.build(
        info["environment"],
        info["model"],
        kind=catalogue.INFILLING,
        context_frames=info["context_frames"],
        noise_size=info["noise_size"],
        use_actions=info["use_actions"],
        filters=tuple(info["unet_filters"]),
    ).build_for_frames()
    checkpoints.load_weights_checked(generator, ckpt.weights_path)
    return generator, info
