"""Trains the infilling U-Net on raw rollouts, with a reconstruction loss alone or with a GAN loss.

    # L2 alone, then L2 + a patch discriminator (rerun the same command to resume)
    python scripts/models/train_infilling_unet.py --environment=DOOM_TAKE_COVER \
        --model_dir=$HOME/rl755_models/doom_take_cover/unet_l2 --task=next_frame \
        --context_frames=2 --noise_size=8 --train_steps=3000 --batch_size=16
    python scripts/models/train_infilling_unet.py --environment=DOOM_TAKE_COVER \
        --model_dir=$HOME/rl755_models/doom_take_cover/unet_gan --task=next_frame \
        --context_frames=2 --noise_size=8 --train_steps=3000 --batch_size=16 \
        --adversarial_weight=0.05

Compare them: scripts/models/evaluate_infilling_unet.py. Docs: docs/research/unet.md.
Library: rl755.models.unet.train.train_infilling_unet.
"""

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints, pictures, TensorBoard logs go.")
flags.DEFINE_string("environment", None, "Environments name, e.g. DOOM_TAKE_COVER.")
flags.DEFINE_string(
    "model", "unet.infilling_unet", "Catalogue name of an infilling model (rl755.models.catalogue)."
)
flags.DEFINE_enum("task", "next_frame", ["next_frame", "region"], "What is masked in frame t.")
flags.DEFINE_integer("context_frames", 2, "K: frames before frame t that the model sees.")
flags.DEFINE_integer("noise_size", 8, "Size of the generator's noise vector (0: deterministic).")
flags.DEFINE_bool("use_actions", True, "Feed the actions a_{t-K} .. a_{t-1}.")
flags.DEFINE_float("adversarial_weight", 0.0, "Weight of the GAN loss (0: reconstruction alone).")
flags.DEFINE_float("reconstruction_weight", 1.0, "Weight of the reconstruction loss.")
flags.DEFINE_enum("reconstruction_loss", "l2", ["l2", "l1"], "Per masked pixel.")
flags.DEFINE_float("mode_seeking_weight", 0.0, "Weight of MSGAN's mode-seeking term (0: off).")
flags.DEFINE_integer("batch_size", 32, "Windows per step.")
flags.DEFINE_float("learning_rate", 2e-4, "Adam (beta_1 0.5) learning rate of the generator.")
flags.DEFINE_float(
    "discriminator_learning_rate", None, "Of the discriminator (default: --learning_rate)."
)
flags.DEFINE_integer("train_steps", None, "Total training steps (including earlier runs).")
flags.DEFINE_integer(
    "save_every_n_steps", 500, "Checkpoint, validate and draw pictures this often."
)
flags.DEFINE_integer("validation_steps", 4, "Validation batches per save (0: none).")
flags.DEFINE_integer("log_every_n_steps", None, "Progress lines (default: min(100, save every)).")
flags.DEFINE_integer("num_draws", 4, "Draws per validation window for the diversity measure.")
flags.DEFINE_integer("seed", 0, "Initialization; with the step, the masks and noise.")
flags.DEFINE_integer("windows_per_rollout", 16, "Training windows taken from each rollout read.")
flags.DEFINE_list("unet_filters", None, "Widths per resolution (default: the env's presets).")
flags.DEFINE_list("discriminator_filters", None, "Patch discriminator widths (default: presets).")
flags.DEFINE_string(
    "rollouts_pattern", None, "Glob with '{split}' overriding where RawRollouts are read."
)
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size (default: TF's own).")
flags.DEFINE_bool("check_numerics", False, "Stop at the first op that produces a NaN/Inf.")
for _name in ("model_dir", "environment", "train_steps"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import BadInput
    from rl755.models.infilling.config import InfillConfig
    from rl755.models.unet.train import train_infilling_unet

    try:
        config = InfillConfig(
            task=FLAGS.task,
            context_frames=FLAGS.context_frames,
            noise_size=FLAGS.noise_size,
            use_actions=FLAGS.use_actions,
            adversarial_weight=FLAGS.adversarial_weight,
            reconstruction_weight=FLAGS.reconstruction_weight,
            reconstruction_loss=FLAGS.reconstruction_loss,
            mode_seeking_weight=FLAGS.mode_seeking_weight,
            batch_size=FLAGS.batch_size,
            learning_rate=FLAGS.learning_rate,
            discriminator_learning_rate=FLAGS.discriminator_learning_rate,
            train_steps=FLAGS.train_steps,
            save_every_n_steps=FLAGS.save_every_n_steps,
            validation_steps=FLAGS.validation_steps,
            log_every_n_steps=FLAGS.log_every_n_steps,
            num_draws=FLAGS.num_draws,
            seed=FLAGS.seed,
        )
        result = train_infilling_unet(
            model_dir=FLAGS.model_dir,
            environment=FLAGS.environment,
            model=FLAGS.model,
            config=config,
            windows_per_rollout=FLAGS.windows_per_rollout,
            rollouts_pattern=FLAGS.rollouts_pattern,
            unet_filters=[int(f) for f in FLAGS.unet_filters or ()],
            discriminator_filters=[int(f) for f in FLAGS.discriminator_filters or ()],
            num_threads=FLAGS.num_threads,
            check_numerics=FLAGS.check_numerics,
            run_flags=run_record.flags_dict(),
        )
    except BadInput as e:
        raise app.UsageError(str(e)) from e
    print(f"Trained to step {result['step']}; newest checkpoint {result['checkpoint']}.")


if __name__ == "__main__":
    app.run(main)
