"""Train the infilling U-Net on raw rollouts (scripts/models/train_infilling_unet.py), load it back.

    train_infilling_unet(model_dir="runs/unet_gan", environment="DOOM_TAKE_COVER",
                         model="unet.infilling_unet",
                         config=InfillConfig(adversarial_weight=0.05, train_steps=3000))
    generator, info = load_infilling_unet("runs/unet_gan")     # newest checkpoint

Where it sits among the five stages: it reads stage 1's raw rollouts, like the stage-2
encoder, and is trained beside it; what it learns is an observation-level world model (the
next frame, or a masked region, from K frames and the actions). Stages 3-5 do not consume it:
it is compared with other frame predictors by scripts/models/evaluate_infilling_unet.py.

Data: `infill_data.frame_windows` over the environment's `RawRollouts` (rl755.data.registry,
or `rollouts_pattern=`), `windows_per_rollout` windows per rollout read, shuffled. The loop,
its checkpoints and TensorBoard layout: rl755.models.unet.loop.
"""

from __future__ import annotations

import dataclasses
import os

from rl755.common import checkpoints, run_record, tf_setup
from rl755.common.errors import BadInput
from rl755.environments import Environments
from rl755.models import catalogue
from rl755.models.encoders.train import check_raw_rollouts, raw_rollouts_builder
from rl755.models.infilling import data as infill_data
from rl755.models.infilling.config import InfillConfig
from rl755.models.unet import loop
from rl755.models.unet.model import InfillingUNet, PatchDiscriminator

SHUFFLE_BUFFER = 512  # windows (a rollout's windows arrive together)


def resolve_generator_fn(
    environment, model: str, config: InfillConfig, unet_filters=None
) -> catalogue.ModelFn:
    """The constructor `--model` names (kind "infilling", strict), sized by the environment's
    presets (or `unet_filters`) and the config's K, N and use_actions."""
    kwargs = dict(
        context_frames=config.context_frames,
        noise_size=config.noise_size,
        use_actions=config.use_actions,
    )
    if unet_filters:
        kwargs["filters"] = tuple(int(f) for f in unet_filters)
    return catalogue.model_fn(environment, model, kind=catalogue.INFILLING, **kwargs)


def discriminator_fn_for(environment, discriminator_filters=None):
    """generator -> its PatchDiscriminator, widths from the presets (or the argument)."""
    env = Environments.from_name(environment)
    filters = tuple(discriminator_filters or env.presets.patch_discriminator_filters)
    return lambda generator: PatchDiscriminator.like(generator, tuple(int(f) for f in filters))


def train_infilling_unet(
    model_dir: str,
    environment: str,
    model: str,
    config: InfillConfig,
    windows_per_rollout: int = 16,
    rollouts_pattern: str | None = None,
    unet_filters=None,
    discriminator_filters=None,
    num_threads: int | None = None,
    check_numerics: bool = False,
    run_flags: dict | None = None,
) -> dict:
    """What scripts/models/train_infilling_unet.py runs: resolves the names strictly, checks
    the raw rollouts (before any training), records the run in `<model_dir>/runs/` and trains
    (`loop.fit_infilling_unet`; rerun to resume). Returns that function's result."""
    tf_setup.limit_threads(num_threads)
    try:  # names and sizes fail here, before anything is read or written
        env = Environments.from_name(environment)
        generator_fn = resolve_generator_fn(env, model, config, unet_filters)
        probe = generator_fn()  # frame sides divisible by 2 ** levels, K >= 1
        discriminator_fn = discriminator_fn_for(env, discriminator_filters)
        if config.adversarial:
            discriminator_fn(probe)
    except (LookupError, ValueError) as e:
        raise BadInput(str(e)) from e
    if not isinstance(probe, InfillingUNet):
        raise BadInput(f"--model={model} gives {type(probe).__name__}, not an InfillingUNet.")
    del probe
    if int(windows_per_rollout) <= 0:
        raise BadInput(f"--windows_per_rollout must be positive, got {windows_per_rollout}.")
    builder = raw_rollouts_builder(env, rollouts_pattern)
    check_raw_rollouts(builder, "train", env)
    if config.validation_steps:
        try:
            check_raw_rollouts(builder, "validation", env)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{e} Or pass --validation_steps=0.") from e
    model_dir = os.path.abspath(os.path.expanduser(str(model_dir)))

    def dataset_fn(split: str):
        ds = infill_data.frame_windows(builder, split, config.context_frames, windows_per_rollout)
        return ds.shuffle(SHUFFLE_BUFFER) if split == "train" else ds

    info = dict(environment=env.name, model=model, rollouts_pattern=builder.tfrecords_pattern())
    flags = run_flags
    if flags is None:
        flags = dict(info, model_dir=model_dir, windows_per_rollout=windows_per_rollout)
        flags.update(dataclasses.asdict(config))
    with run_record.record_run(model_dir, flags, stage="train_infilling_unet"):
        return loop.fit_infilling_unet(
            generator_fn,
            discriminator_fn,
            dataset_fn,
            model_dir,
            config,
            model_info=info,
            hparams=flags,
            check_numerics=check_numerics,
        )


def load_infilling_unet(model_dir: str, step: int | None = None) -> tuple[InfillingUNet, dict]:
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
