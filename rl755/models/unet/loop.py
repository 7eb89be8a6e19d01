"""The training loop of the infilling U-Net, with a reconstruction loss alone or with a GAN loss.

    from rl755.models.unet import loop
    loop.fit_infilling_unet(
        generator_fn=catalogue.model_fn("FAKE_PIXELS", "unet.infilling_unet", noise_size=4),
        discriminator_fn=lambda g: PatchDiscriminator.like(g, filters=(8, 16)),
        dataset_fn=lambda split: windows_of(split),   # unbatched frame_windows, repeating
        model_dir="/tmp/unet", config=InfillConfig(adversarial_weight=0.05, train_steps=1000))

Each step draws masks and noise from the seed pair (seed, step) (rl755.models.infilling.data),
runs the generator once, and (GAN) updates the discriminator on the real frame
against that output and the generator on

    reconstruction_weight * reconstruction + adversarial_weight * adversarial
    (+ mode_seeking_weight * mode_seeking)

reconstruction: the squared (l2) or absolute (l1) error per masked pixel; adversarial: the
non-saturating GAN loss -log D(G) averaged over the patches; discriminator: -log D(real) -
log(1 - D(G)); mode_seeking (Mao et al. 2019, MSGAN): 1 / (|G(z1) - G(z2)| / |z1 - z2| + 1e-5)
from a second draw, which punishes a generator that ignores its noise. Both use Adam with
beta_1 = 0.5 (pix2pix's setting), also without the discriminator, so the two runs differ only
in the loss.

`model_dir` (rerunning with the same model_dir resumes exactly: both networks' weights, both
optimizers' states, the step; masks and noise are keyed by step, so only the data order
differs from an uninterrupted run):
    model-001.json                      marker: step, what was trained, losses, measures
    model-001.weights.h5                the generator     (rl755.common.checkpoints roles:
    model-001.optimizer.npz             its Adam state      weights, optimizer,
    model-001.discriminator.weights.h5  the discriminator   discriminator,
    model-001.discriminator_optimizer.npz                   discriminator_optimizer)
    model-001.infills.png               validation examples, a row each: the K context frames,
                                        frame t masked (grey), frame t, the draws
    tensorboard/train/                  losses/{total,reconstruction,adversarial,discriminator,
                                        mode_seeking}, perf/{steps,frames}_per_second, hparams
    tensorboard/validation/             losses/reconstruction, eval/{ssim, sample_diversity,
                                        laplacian_variance_ratio, best_of_draws_mse, mse},
                                        images/infills
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable

import keras
import tensorflow as tf
from absl import logging

from rl755.common import checkpoints, pictures
from rl755.common.errors import NonFiniteLossError
from rl755.common.tensorboard import StepMeans, TrainingLogs
from rl755.models.infilling import data as infill_data
from rl755.models.infilling import metrics as infill_metrics
from rl755.models.infilling import pictures as infill_pictures
from rl755.models.infilling.config import InfillConfig
from rl755.models.unet.model import InfillingUNet, PatchDiscriminator

ADAM_BETA_1 = 0.5
NUM_PICTURE_EXAMPLES = 4
# What a resumed run must share with the run that made the checkpoints.
IDENTITY_KEYS = (
    "environment",
    "model",
    "task",
    "context_frames",
    "noise_size",
    "use_actions",
    "adversarial",
    "unet_filters",
    "discriminator_filters",
)
# The InfillConfig fields every checkpoint marker records.
CONFIG_IN_MARKER = (
    "task",
    "context_frames",
    "noise_size",
    "use_actions",
    "adversarial",
    "adversarial_weight",
    "mode_seeking_weight",
    "reconstruction_loss",
)
NONFINITE_ADVICE = (
    "check the data (NaN actions) and lower --learning_rate / --discriminator_learning_rate"
)


class _Networks:
    """The generator, the discriminator (GAN only) and their optimizers."""

    def __init__(self, generator_fn, discriminator_fn, config: InfillConfig):
        self.generator = generator_fn()
        if not isinstance(self.generator, InfillingUNet):
            raise TypeError(
                f"generator_fn gave {type(self.generator).__name__}, not an InfillingUNet."
            )
        g = self.generator
        built = (g.noise_size, g.context_frames, g.use_actions)
        asked = (config.noise_size, config.context_frames, config.use_actions)
        if built != asked:
            raise ValueError(
                f"The generator has (noise_size, context_frames, use_actions) = {built}; the "
                f"config asks for {asked}."
            )
        self.generator.build_for_frames()
        self.g_opt = keras.optimizers.Adam(config.learning_rate, beta_1=ADAM_BETA_1)
        self.g_opt.build(self.generator.trainable_variables)
        self.discriminator = self.d_opt = None
        if config.adversarial:
            self.discriminator = discriminator_fn(self.generator)
            if not isinstance(self.discriminator, PatchDiscriminator):
                raise TypeError(
                    f"discriminator_fn gave {type(self.discriminator).__name__}, not a "
                    "PatchDiscriminator."
                )
            self.discriminator.build_for_frames()
            lr = config.discriminator_learning_rate or config.learning_rate
            self.d_opt = keras.optimizers.Adam(lr, beta_1=ADAM_BETA_1)
            self.d_opt.build(self.discriminator.trainable_variables)

    def restore(self, ckpt: checkpoints.Checkpoint) -> None:
        checkpoints.load_weights_checked(self.generator, ckpt.weights_path)
        checkpoints.restore_optimizer(self.g_opt, ckpt)
        if self.discriminator is not None:
            checkpoints.load_weights_checked(self.discriminator, ckpt.path("discriminator"))
            checkpoints.restore_optimizer(self.d_opt, ckpt, role="discriminator_optimizer")

    def save(self, model_dir: str, number: int, info: dict) -> checkpoints.Checkpoint:
        files = {
            "weights": (".weights.h5", self.generator.save_weights),
            "optimizer": (".optimizer.npz", checkpoints.optimizer_writer(self.g_opt)),
        }
        if self.discriminator is not None:
            files["discriminator"] = (".discriminator.weights.h5", self.discriminator.save_weights)
            files["discriminator_optimizer"] = (
                ".discriminator_optimizer.npz",
                checkpoints.optimizer_writer(self.d_opt),
            )
        return checkpoints.write_checkpoint(model_dir, number, files, info)


def _losses(nets: _Networks, config: InfillConfig, batch: dict, seed) -> tuple[tf.Tensor, dict]:
    """(generator total, {term: scalar}) of one batch, with masks and noise from `seed`."""
    inputs = infill_data.model_inputs(batch, config.task, config.noise_size, seed)
    fake = nets.generator(inputs, training=True)
    err = fake - inputs["target"]
    err = tf.square(err) if config.reconstruction_loss == "l2" else tf.abs(err)
    mask = tf.broadcast_to(inputs["mask"], tf.shape(err))
    terms = {"reconstruction": tf.reduce_sum(err * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)}
    total = config.reconstruction_weight * terms["reconstruction"]
    if config.adversarial:
        real_logits = nets.discriminator(inputs, inputs["target"], training=True)
        fake_logits = nets.discriminator(inputs, fake, training=True)
        terms["discriminator"] = tf.reduce_mean(tf.nn.softplus(-real_logits)) + tf.reduce_mean(
            tf.nn.softplus(fake_logits)
        )
        terms["adversarial"] = tf.reduce_mean(tf.nn.softplus(-fake_logits))
        total += config.adversarial_weight * terms["adversarial"]
    if config.mode_seeking_weight > 0:
        other = dict(
            inputs,
            noise=infill_data.noise(
                tf.shape(fake)[0], config.noise_size, infill_data.sub_seed(seed, 2)
            ),
        )
        fake2 = nets.generator(other, training=True)
        ratio = tf.reduce_mean(tf.abs(fake - fake2)) / tf.reduce_mean(
            tf.abs(inputs["noise"] - other["noise"])
        )
        terms["mode_seeking"] = 1.0 / (ratio + 1e-5)
        total += config.mode_seeking_weight * terms["mode_seeking"]
    return total, terms


def _validate(nets: _Networks, config: InfillConfig, val_iter) -> tuple[dict, object]:
    """Validation: the mean reconstruction loss over `validation_steps` batches, every
    infill_metrics measure of the first (config.num_draws draws), and a picture of it. The
    masks and noise are the same at every save (seeds (seed, -1 - i))."""
    total = 0.0
    measures, grid = {}, None
    for i in range(config.validation_steps):
        batch = next(val_iter)
        seed = tf.constant([config.seed, -1 - i], tf.int64)
        inputs, draws = infill_data.sample_draws(
            nets.generator, batch, config.task, config.num_draws, seed
        )
        err = draws[0] - inputs["target"]
        err = tf.square(err) if config.reconstruction_loss == "l2" else tf.abs(err)
        total += float(tf.reduce_mean(infill_metrics.masked_mean(err, inputs["mask"])))
        if i == 0:
            measures = infill_metrics.summarize(
                infill_metrics.frame_measures(draws, inputs["target"], inputs["mask"])
            )
            grid = infill_pictures.example_grid(inputs, draws, NUM_PICTURE_EXAMPLES)
            grid = pictures.upscaled(grid, max(1, 256 // grid.shape[0]))
    measures["reconstruction"] = total / config.validation_steps
    return measures, grid


def _validation_scalars(measures: dict) -> dict:
    keys = ("ssim", "sample_diversity", "laplacian_variance_ratio", "best_of_draws_mse", "mse")
    out = {f"eval/{k}": measures[k] for k in keys if k in measures}
    out["losses/reconstruction"] = measures["reconstruction"]
    return out


def fit_infilling_unet(
    generator_fn: Callable[[], InfillingUNet],
    discriminator_fn: Callable[[InfillingUNet], PatchDiscriminator] | None,
    dataset_fn: Callable[[str], tf.data.Dataset],
    model_dir: str,
    config: InfillConfig,
    model_info: dict | None = None,
    hparams: dict | None = None,
    check_numerics: bool = False,
) -> dict:
    """Trains until `config.train_steps` steps in total, resuming from model_dir's newest
    complete checkpoint (module docstring).

    `dataset_fn(split)` gives unbatched windows ({"frames": uint8 [K + 1, H, W, C],
    "actions": [K, A]}, infill_data.frame_windows), repeating and shuffled (the train
    split); they are batched here.
    `model_info` goes into every marker, `hparams` (default: the config) into TensorBoard.
    Returns {"start_step", "step", "train_terms": [per-step {term: value}], "validation":
    {measure: value} (last), "checkpoint": path of the newest generator weights}.
    Raises NonFiniteLossError at the first non-finite loss term, before saving anything."""
    if check_numerics:
        tf.debugging.enable_check_numerics()
    if config.adversarial and discriminator_fn is None:
        raise ValueError("adversarial_weight > 0 needs a discriminator_fn.")
    model_dir = str(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    info = dict(model_info or {})
    info.update({name: getattr(config, name) for name in CONFIG_IN_MARKER})
    last = checkpoints.newest_complete_checkpoint(model_dir)
    keras.utils.set_random_seed(config.seed)
    nets = _Networks(generator_fn, discriminator_fn or (lambda g: None), config)
    info.update(
        frame_shape=list(nets.generator.frame_shape),
        unet_filters=list(nets.generator.filters),
        discriminator_filters=list(nets.discriminator.filters) if nets.discriminator else None,
    )
    checkpoints.check_same_run(last, info, IDENTITY_KEYS, model_dir)
    start_step = 0
    if last is not None:
        nets.restore(last)
        start_step = last.step
        logging.info("Resuming %s from %s (step %d).", model_dir, last.weights_path, start_step)
    result = {
        "start_step": start_step,
        "step": start_step,
        "train_terms": [],
        "validation": {},
        "checkpoint": last.weights_path if last else None,
    }
    if start_step >= config.train_steps:
        logging.info(
            "%s already holds %d >= --train_steps=%d steps; nothing to do.",
            model_dir,
            start_step,
            config.train_steps,
        )
        return result

    tf.random.set_seed(config.seed + start_step)  # a resumed run reads the data anew
    train_ds = dataset_fn("train").batch(config.batch_size, drop_remainder=True)
    train_iter = iter(train_ds.prefetch(2))
    val_iter = None
    if config.validation_steps:
        val_iter = iter(dataset_fn("validation").batch(config.batch_size, drop_remainder=True))
    g_vars = nets.generator.trainable_variables
    d_vars = nets.discriminator.trainable_variables if nets.discriminator else []

    @tf.function
    def train_step(batch, step):
        seed = tf.stack([tf.constant(config.seed, tf.int64), step])
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            total, terms = _losses(nets, config, batch, seed)
        nets.g_opt.apply_gradients(zip(g_tape.gradient(total, g_vars), g_vars))
        if config.adversarial:
            d_grads = d_tape.gradient(terms["discriminator"], d_vars)
            nets.d_opt.apply_gradients(zip(d_grads, d_vars))
        return dict(terms, total=total)

    logs = TrainingLogs(model_dir)
    logs.hparams(hparams if hparams is not None else dataclasses.asdict(config), step=start_step)
    log_every = config.log_every_n_steps or max(1, min(100, config.save_every_n_steps))
    number = last.number if last is not None else 0
    window, step = StepMeans(config.batch_size, "frames"), start_step
    try:
        while step < config.train_steps:
            terms = train_step(next(train_iter), tf.constant(step, tf.int64))
            step += 1
            terms = {k: float(v) for k, v in terms.items()}
            if not all(math.isfinite(v) for v in terms.values()):
                last = checkpoints.newest_complete_checkpoint(model_dir)
                raise NonFiniteLossError.at_step(
                    step, terms, last and last.weights_path, NONFINITE_ADVICE
                )
            result["train_terms"].append(terms)
            window.add(terms)
            if step % log_every == 0 or step == config.train_steps:
                means, perf = window.take()
                logs.scalars(
                    "train", step, {**{f"losses/{k}": v for k, v in means.items()}, **perf}
                )
                logging.info(
                    "step %d/%d  %s  (%.1f frames/s)",
                    step,
                    config.train_steps,
                    "  ".join(f"{k} {v:.5f}" for k, v in sorted(means.items())),
                    perf["perf/frames_per_second"],
                )
            if step % config.save_every_n_steps == 0 or step == config.train_steps:
                grid = None
                if val_iter is not None:
                    result["validation"], grid = _validate(nets, config, val_iter)
                    logs.scalars("validation", step, _validation_scalars(result["validation"]))
                    logs.image("validation", step, "images/infills", grid)
                    logging.info(
                        "step %d  validation: %s",
                        step,
                        "  ".join(f"{k} {v:.4g}" for k, v in sorted(result["validation"].items())),
                    )
                number += 1
                marker = dict(info, step=step, train_terms=terms, validation=result["validation"])
                if grid is not None:
                    marker["infills_png"] = checkpoints.file_name(number, ".infills.png")
                    pictures.image(grid).save(os.path.join(model_dir, marker["infills_png"]))
                ckpt = nets.save(model_dir, number, marker)
                result["checkpoint"] = ckpt.weights_path
                logs.flush()
                logging.info("Saved %s (step %d).", ckpt.weights_path, step)
                window.restart_clock()
    finally:
        logs.close()
    result["step"] = step
    return result
