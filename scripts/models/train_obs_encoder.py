"""Stage 2: train an observation encoder (e.g. the World Models VAE) on raw rollouts.

    python scripts/models/train_obs_encoder.py --environment=CAR_RACING --model=vae.Vae \
        --model_dir=$HOME/rl755_models/car_racing/raw_rollout_vae_32ld --train_steps=100000 \
        --batch_size=100 --representation_size=32 --save_every_n_steps=5000 \
        --obs_sampled_per_rollout=100 --learning_rate=1e-4

Rerun the same command to resume from the newest complete checkpoint. Library:
rl755.models.encoders.train.train_obs_encoder.
"""

from absl import app, flags

from rl755.common import checkpoints, determinism, tf_setup
from rl755.models import catalogue

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints, PNGs and TensorBoard logs go.")
flags.DEFINE_integer("train_steps", None, "Total number of batches to train for (incl. resumed).")
flags.DEFINE_string("environment", None, "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_string("model", None, catalogue.help_text(catalogue.ENCODER))
flags.DEFINE_integer("batch_size", 100, "Raw observations per mini batch.")
flags.DEFINE_integer("representation_size", 32, "Size of the representation (VAE latent).")
flags.DEFINE_integer("save_every_n_steps", 1000, "Checkpoint (and log losses) this often.")
flags.DEFINE_integer("obs_sampled_per_rollout", 100, "Observations sampled per rollout read.")
flags.DEFINE_float("learning_rate", 1e-4, "Adam learning rate.")
flags.DEFINE_integer("validation_steps", 10, "Validation batches per save (0: no validation).")
flags.DEFINE_integer("num_threads", None, "TF intra-op threads (default: TF decides).")
flags.DEFINE_string(
    "rollouts_pattern",
    None,
    "Glob with '{split}' overriding RawRollouts' location, e.g. /d/rollouts-{split}*.tfrecord-*.",
)
flags.DEFINE_integer("seed", 0, "Seed of the initial weights, frame sampling and shuffling.")
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
flags.DEFINE_integer("keep_checkpoints", checkpoints.KEEP_CHECKPOINTS, checkpoints.KEEP_HELP)
flags.DEFINE_string(
    "initial_weights",
    None,
    "Warm start: another run's --model_dir or a shipped folder (rl755/zoo/shipped/<env>/<name>) "
    "holding the same model; step 0 and a new optimizer. Ignored when --model_dir resumes.",
)
for _name in ("model_dir", "train_steps", "environment", "model"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import exit_on_bad_input
    from rl755.models.encoders.train import train_obs_encoder

    with exit_on_bad_input():
        train_obs_encoder(
            model_dir=FLAGS.model_dir,
            train_steps=FLAGS.train_steps,
            environment=FLAGS.environment,
            model=FLAGS.model,
            batch_size=FLAGS.batch_size,
            representation_size=FLAGS.representation_size,
            save_every_n_steps=FLAGS.save_every_n_steps,
            obs_sampled_per_rollout=FLAGS.obs_sampled_per_rollout,
            learning_rate=FLAGS.learning_rate,
            validation_steps=FLAGS.validation_steps,
            rollouts_pattern=FLAGS.rollouts_pattern,
            num_threads=FLAGS.num_threads,
            run_flags=run_record.flags_dict(),
            seed=FLAGS.seed,
            deterministic=FLAGS.deterministic,
            keep_checkpoints=FLAGS.keep_checkpoints,
            initial_weights=FLAGS.initial_weights,
        )


if __name__ == "__main__":
    app.run(main)
