"""Stage 5 diagnostic: the same policies scored in the dream and in the real environment.

    # a trained controller (its encoder, sequential model and dream temperature come from its
    # controller.json) and the reference policies:
    python scripts/models/dream_gap.py --environment=DOOM_TAKE_COVER \
        --model_dir=$HOME/rl755_models/doom_take_cover/controller_dream_t115 --num_episodes=100

    # before training a controller: the reference policies only
    python scripts/models/dream_gap.py --environment=DOOM_TAKE_COVER \
        --encoder=raw_rollout_vae_64ld --sequential_model=mdn_rnn_64ld --temperature=1.15 \
        --out_dir=/tmp/doom_gap

    # the dream only (no real episodes): how a controller's dream score moves with the ends
    python scripts/models/dream_gap.py --environment=DOOM_TAKE_COVER --model_dir=$CTRL \
        --noreal --done_prob_scale=1.5 --num_episodes=256 --out_dir=/tmp/gap_15

    # a controller trained in a dream ensemble plays that ensemble's dream (its
    # controller.json); --dream_ensemble_dirs=... replaces it, --dream_ensemble=none drops it
    python scripts/models/dream_gap.py --environment=CAR_RACING --model_dir=$CTRL \
        --num_episodes=10 --seed=1000

Reference policies: uniform random, every discrete action held constant (continuous: the
action box's center and each dimension's ends). A policy the model rates far above its real
score is one a dream-trained controller will find. Prints a table and writes
<out_dir>/dream_gap.json (default <model_dir>/dream_gap). With an ensemble the table adds the
members' per-step reward std for each policy: where they disagree, the dream cannot be
trusted. Library: rl755.controller.dream_gap.dream_gap.
"""

from absl import app, flags

from rl755.common import determinism, tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments enum name, e.g. DOOM_TAKE_COVER.")
flags.DEFINE_string("model_dir", None, "A train_controller --model_dir (also scores it).")
flags.DEFINE_string(
    "encoder", None, "An encoder of the zoo (rl755.zoo), e.g. raw_rollout_vae_64ld."
)
flags.DEFINE_string("sequential_model", None, "A sequential model of the zoo (rl755.zoo).")
flags.DEFINE_string(
    "sequential_model_dir", None, "Instead of --sequential_model: a train_sequential_model dir."
)
flags.DEFINE_float(
    "temperature", None, "Dream temperature (default: the controller's training one, else 1)."
)
flags.DEFINE_float(
    "done_threshold",
    None,
    "Dream episode ends (0: Bernoulli draws; p > 0: when done_prob > p). Default: the "
    "controller's training setting, else 0.",
)
flags.DEFINE_float(
    "done_prob_scale",
    None,
    "Dream episode ends: the end probability times this. Default: the "
    "controller's training setting, else 1.",
)
flags.DEFINE_list(
    "dream_ensemble",
    None,
    "More sequential models of the zoo the dream averages (default: the controller's own "
    "ensemble from its controller.json; 'none': the single-model dream).",
)
flags.DEFINE_list(
    "dream_ensemble_dirs",
    None,
    "As --dream_ensemble: train_sequential_model dirs, comma-separated.",
)
flags.DEFINE_float(
    "dream_disagreement_penalty",
    None,
    "With an ensemble: the dream's reward is the members' mean minus this x their std "
    "(default: the controller's, else 0).",
)
flags.DEFINE_bool(
    "real",
    True,
    "Also play every policy in the real environment. --noreal scores the dream only (a quick "
    "look at a model or at --done_prob_scale; the real columns print '-').",
)
flags.DEFINE_integer("num_episodes", 100, "Episodes per policy and side; episode i: seed + i.")
flags.DEFINE_integer("seed", 0, "Seed of the first episode.")
flags.DEFINE_integer("max_steps", None, "Step limit (default: the environment's).")
flags.DEFINE_string("out_dir", None, "Where dream_gap.json goes (default <model_dir>/dream_gap).")
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
flags.mark_flag_as_required("environment")


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.controller.dream_gap import dream_gap
    from rl755.controller.dream_gap_report import format_table, format_title

    try:
        gap = dream_gap(
            environment=FLAGS.environment,
            controller_dir=FLAGS.model_dir,
            encoder=FLAGS.encoder,
            sequential_model=FLAGS.sequential_model,
            sequential_model_dir=FLAGS.sequential_model_dir,
            temperature=FLAGS.temperature,
            done_threshold=FLAGS.done_threshold,
            done_prob_scale=FLAGS.done_prob_scale,
            dream_ensemble=FLAGS.dream_ensemble,
            dream_ensemble_dirs=FLAGS.dream_ensemble_dirs,
            disagreement_penalty=FLAGS.dream_disagreement_penalty,
            num_episodes=FLAGS.num_episodes,
            seed=FLAGS.seed,
            max_steps=FLAGS.max_steps,
            out_dir=FLAGS.out_dir,
            run_flags=run_record.flags_dict(),
            deterministic=FLAGS.deterministic,
            real=FLAGS.real,
        )
    except (ValueError, LookupError, FileNotFoundError) as e:
        raise app.UsageError(str(e)) from e
    print(format_title(gap))
    print(format_table(gap))
    print(f"Wrote {gap['out_dir']}/dream_gap.json")


if __name__ == "__main__":
    app.run(main)
