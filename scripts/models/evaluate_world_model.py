"""Compares trained world models (sequential models) on held-out encoded rollouts.

    python scripts/models/evaluate_world_model.py --environment=CAR_RACING \
        --encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_32ld \
        --sequential_model_dir=$HOME/rl755_models/car_racing/transformer \
        --rollouts_dataset=VaeEncodedRollouts --split=validation \
        --horizons=1,5,15,50 --num_starts=256 --dream_gap_episodes=20 --out_dir=/tmp/wm_bench

Per model: next-step latent MSE (NLL for mixture models), open-loop error after each
horizon from a real context (latent, and decoded frames with the encoder's decoder),
episode-end calibration and reward error where the heads exist, and the dream-versus-real
gap of fixed policies. Prints a side-by-side table and writes
<out_dir>/world_model_benchmark.json, table.txt and pictures. Library: rl755.evaluation.
"""

from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_multi_string(
    "sequential_model", [], "A sequential model of the zoo (rl755.zoo; repeatable)."
)
flags.DEFINE_multi_string(
    "sequential_model_dir", [], "A train_sequential_model.py --model_dir (repeatable)."
)
flags.DEFINE_string(
    "encoder", None, "A saved_models encoder (its decoder draws frames; needed for the dream gap)."
)
flags.DEFINE_string(
    "rollouts_dataset", None, "rl755.data.<env>.encoded_rollouts.<name>, e.g. VaeEncodedRollouts."
)
flags.DEFINE_string(
    "rollouts_pattern", None, "A glob with '{split}': read these shards (alone or overriding)."
)
flags.DEFINE_string("split", "validation", "train or validation (held out: validation).")
flags.DEFINE_integer("max_rollouts", 100, "Rollouts read from the split (the first ones).")
flags.DEFINE_list("horizons", ["1", "5", "15", "50"], "Open-loop horizons k.")
flags.DEFINE_integer("context_length", 16, "Real steps fed before the model runs free.")
flags.DEFINE_integer("num_starts", 256, "Open-loop windows (start points), seeded.")
flags.DEFINE_integer("chunk_length", 32, "Teacher-forced piece length (the training length).")
flags.DEFINE_float("temperature", 0.0, "Open loop: 0 feeds point predictions, > 0 samples.")
flags.DEFINE_integer("seed", 0, "Seeds windows, samples and the dream-gap episodes.")
flags.DEFINE_integer("num_examples", 3, "Windows drawn as frames per model.")
flags.DEFINE_integer("hazard_bin_width", None, "Episode steps per hazard bin (default T/10).")
flags.DEFINE_integer("dream_gap_episodes", 0, "Episodes per reference policy (0: no dream gap).")
flags.DEFINE_float("dream_temperature", 1.0, "Dream temperature of the dream gap.")
flags.DEFINE_integer("dream_max_steps", None, "Dream-gap step limit (default: the environment's).")
flags.DEFINE_string("out_dir", None, "Where the JSON, table and pictures go.")
flags.DEFINE_integer("num_threads", None, "TensorFlow thread pool size (default: TF's own).")
flags.mark_flag_as_required("environment")
flags.mark_flag_as_required("out_dir")


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import BadInput
    from rl755.evaluation.benchmark import Settings
    from rl755.evaluation.run import run_benchmark

    tf_setup.limit_threads(FLAGS.num_threads)
    try:
        horizons = tuple(int(k) for k in FLAGS.horizons)
    except ValueError:
        raise app.UsageError(f"--horizons takes integers, got {FLAGS.horizons}.") from None
    settings = Settings(
        horizons=horizons,
        context_length=FLAGS.context_length,
        num_starts=FLAGS.num_starts,
        chunk_length=FLAGS.chunk_length,
        temperature=FLAGS.temperature,
        seed=FLAGS.seed,
        num_examples=FLAGS.num_examples,
        hazard_bin_width=FLAGS.hazard_bin_width,
    )
    try:
        out = run_benchmark(
            environment=FLAGS.environment,
            out_dir=FLAGS.out_dir,
            sequential_models=FLAGS.sequential_model,
            sequential_model_dirs=FLAGS.sequential_model_dir,
            encoder=FLAGS.encoder,
            rollouts_dataset=FLAGS.rollouts_dataset,
            rollouts_pattern=FLAGS.rollouts_pattern,
            split=FLAGS.split,
            max_rollouts=FLAGS.max_rollouts,
            settings=settings,
            dream_gap_episodes=FLAGS.dream_gap_episodes,
            dream_temperature=FLAGS.dream_temperature,
            dream_max_steps=FLAGS.dream_max_steps,
            run_flags=run_record.flags_dict(),
        )
    except BadInput as e:
        raise app.UsageError(str(e)) from e
    r = out["rollouts"]
    print(
        f"{out['environment']}: {r['num_rollouts']} {r['split']} rollouts ({r['num_steps']} steps), "
        f"context {settings.context_length}, {out['models'][0]['open_loop']['num_windows']} "
        "open-loop windows:"
    )
    print(out["table"])
    print(f"Wrote {out['out_dir']}/world_model_benchmark.json and pictures there.")


if __name__ == "__main__":
    app.run(main)
