"""Trains a sequential model on encoded rollouts (stage 4); rerun with the same --model_dir to resume.

    python scripts/models/train_sequential_model.py --environment=CAR_RACING \
        --model=mdn_rnn.mdn_rnn --rollouts_dataset=VaeEncodedRollouts \
        --model_dir=$HOME/rl755_models/car_racing/mdn_rnn --train_steps=20000 \
        --batch_size=100 --sequence_length=32 --learning_rate=1e-3

Infilling (docs/research/infilling.md): --model=transformer.small_infilling_transformer --task=mixed.
Retrieval: --model=transformer.small_retrieval_transformer builds its index of the training
rollouts in <model_dir>/retrieval_index first (resumable).

Uses every visible GPU (MirroredStrategy); under `srun` with several tasks, every task
joins one MultiWorkerMirroredStrategy (TF's SlurmClusterResolver). See
docs/stages/train-sequential.md. Library: rl755.models.sequential.train.train_sequential_model.
"""

from absl import app, flags

from rl755.common import checkpoints, determinism, tf_setup
from rl755.models import catalogue

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints, TensorBoard logs and run records go.")
flags.DEFINE_integer("train_steps", None, "Total number of training steps (batches).")
flags.DEFINE_string("environment", None, "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_string("model", None, catalogue.help_text(catalogue.SEQUENTIAL))
flags.DEFINE_string(
    "rollouts_dataset",
    None,
    "An encoded dataset of rl755.data.registry: VaeEncodedRollouts or the CamelCase name of a "
    "zoo encoder, e.g. RawRolloutVae32ld.",
)
flags.DEFINE_integer("batch_size", None, "Sequences per global batch (split across devices).")
flags.DEFINE_integer("sequence_length", None, "Length of the training slices.")
flags.DEFINE_float(
    "learning_rate", 1e-3, "Adam learning rate (of the first update; constant by default)."
)
flags.DEFINE_float(
    "learning_rate_decay",
    1.0,
    "The rate is multiplied by this every step, down to --min_learning_rate (World Models' "
    "MDN-RNN: 0.99999; 1: constant). A resumed run goes on from its step.",
)
flags.DEFINE_float("min_learning_rate", 0.0, "Floor of the decaying rate (World Models: 1e-5).")
flags.DEFINE_float(
    "clip_norm",
    0.0,
    "Scale the whole gradient down to this global norm when longer (World Models: 1.0; "
    "0: no clipping).",
)
flags.DEFINE_bool(
    "sample_observations",
    False,
    "Sample z_t ~ N(mean, std) from the stored VAE posteriors instead of using the means.",
)
flags.DEFINE_bool("difference_targets", False, "Predict z_{t+1} - z_t instead of z_{t+1}.")
flags.DEFINE_enum(
    "slice_start",
    "uniform",
    ["uniform", "episode_start"],
    "Where training slices start: uniformly over each rollout's steps, or at its first step "
    "(whole episodes when --sequence_length covers them, as World Models' Doom MDN-RNN).",
)
flags.DEFINE_integer("save_every_n_steps", 1000, "Checkpoint (and validate) every this many steps.")
flags.DEFINE_integer(
    "validation_steps", 10, "Validation batches at each checkpoint (0: no validation)."
)
flags.DEFINE_bool(
    "check_numerics", False, "tf.debugging.enable_check_numerics: stop at the first NaN/Inf op."
)
flags.DEFINE_string(
    "rollouts_pattern",
    None,
    "Optional glob with '{split}' overriding where --rollouts_dataset reads its shards.",
)
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size (default: TF's own).")
flags.DEFINE_integer(
    "batch_shards",
    None,
    "Parts of each device's batch whose loss and gradients run as separate compiled calls on "
    "separate CPU cores (same loss; default: one per core with XLA on CPUs and autoregressive "
    "training, else 1; 1: one call).",
)
flags.DEFINE_integer("keep_checkpoints", checkpoints.KEEP_CHECKPOINTS, checkpoints.KEEP_HELP)
flags.DEFINE_enum(
    "task",
    "autoregressive",
    ["autoregressive", "infill", "mixed"],
    "What a batch trains: next-step prediction; hidden spans of z predicted from both sides "
    "(transformer.*_infilling_transformer); or either at random per batch. May change between "
    "runs in one --model_dir (infilling pretraining, then autoregressive).",
)
flags.DEFINE_integer(
    "seed", 0, "Seed of the initial weights, slice starts, sampled z (--sample_observations)."
)
flags.DEFINE_string(
    "initial_weights",
    None,
    "A new run starts from this sequential model's weights (step 0, a new optimizer): a "
    "model_dir of this script or a shipped folder, e.g. rl755/zoo/shipped/<env>/<name>. "
    "Same model, Z and A. A run resuming from its own checkpoint ignores it.",
)
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)

for _name in (
    "model_dir",
    "train_steps",
    "environment",
    "model",
    "rollouts_dataset",
    "batch_size",
    "sequence_length",
):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import exit_on_bad_input
    from rl755.models.sequential.train import train_sequential_model

    with exit_on_bad_input():
        train_sequential_model(
            model_dir=FLAGS.model_dir,
            train_steps=FLAGS.train_steps,
            environment=FLAGS.environment,
            model=FLAGS.model,
            rollouts_dataset=FLAGS.rollouts_dataset,
            batch_size=FLAGS.batch_size,
            sequence_length=FLAGS.sequence_length,
            learning_rate=FLAGS.learning_rate,
            learning_rate_decay=FLAGS.learning_rate_decay,
            min_learning_rate=FLAGS.min_learning_rate,
            clip_norm=FLAGS.clip_norm,
            sample_observations=FLAGS.sample_observations,
            difference_targets=FLAGS.difference_targets,
            slice_start=FLAGS.slice_start,
            save_every_n_steps=FLAGS.save_every_n_steps,
            validation_steps=FLAGS.validation_steps,
            check_numerics=FLAGS.check_numerics,
            rollouts_pattern=FLAGS.rollouts_pattern,
            num_threads=FLAGS.num_threads,
            run_flags=run_record.flags_dict(),
            seed=FLAGS.seed,
            deterministic=FLAGS.deterministic,
            task=FLAGS.task,
            initial_weights=FLAGS.initial_weights,
            batch_shards=FLAGS.batch_shards,
            keep_checkpoints=FLAGS.keep_checkpoints,
        )


if __name__ == "__main__":
    app.run(main)
