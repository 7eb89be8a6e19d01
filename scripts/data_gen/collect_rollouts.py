"""Stage 1: collect rollouts of a policy, in parallel, as pickles or straight into TFRecord shards.

    # The original flow: one .pickle per rollout (then convert_pickles_to_tfrecords.py)
    python scripts/data_gen/collect_rollouts.py --environment=CAR_RACING \
        --policy=HastingsRandomPolicy --num_rollouts=10000 --parallelism=16 --max_steps=1000 \
        --out_dir=$HOME/rl755_data/car_racing/rollout_pickles

    # Direct: workers write GZIP TFRecord shards where RawRollouts reads them (no pickle pass)
    python scripts/data_gen/collect_rollouts.py --environment=CAR_RACING \
        --policy=HastingsRandomPolicy --num_rollouts=10000 --parallelism=16 --max_steps=1000 \
        --out_format=tfrecord

    # Iterative World Models: rollouts of a trained controller, 20% random actions
    python scripts/data_gen/collect_rollouts.py --environment=DOOM_TAKE_COVER \
        --policy=controller --controller_dir=$HOME/rl755_models/doom_take_cover/controller_dream \
        --random_action_prob=0.2 --num_rollouts=200 --parallelism=2 --max_steps=2100 \
        --out_format=tfrecord --out_dir=$HOME/rl755_data/doom_take_cover/raw_rollouts_iter1

Several instances may share one --out_dir (each draws its own --seed unless given; instances
given a --seed need distinct ones); rerunning a command with the same --seed makes only the
files that are missing. Works for every environment (--environment=FAKE_PIXELS, ...);
--policy names: rl755.policies.policy_names(environment). The original path
scripts/data_gen/car_racing/parallel_rollout_main.py runs this script with the same flags.
Library: rl755.data_gen.collect.collect_rollouts.
"""

from absl import app, flags, logging

from rl755.common import determinism, tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_rollouts", None, "Number of rollouts to collect (exactly this many).")
flags.DEFINE_integer(
    "parallelism",
    1,
    "Rollouts run at once (Ray workers); 1 runs in-process, and so does a run of at most "
    "5,000 frames (num_rollouts x max_steps) unless --ray_address or --use_ray is given.",
)
flags.DEFINE_bool(
    "use_ray",
    None,
    "Run on --parallelism Ray workers (true) or in this process (false); default: "
    "see --parallelism.",
)
flags.DEFINE_integer("max_steps", 1000, "Step limit per rollout (episodes may end earlier).")
flags.DEFINE_string(
    "out_dir",
    None,
    "Output directory. Default: <data_dir>/<env folder>/raw_rollouts for --out_format=tfrecord "
    "(where the dataset builders read), <data_dir>/<env folder>/rollout_pickles for pickle.",
)
flags.DEFINE_string("environment", "CAR_RACING", "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_string(
    "policy",
    None,
    "A policy of the environment (rl755.policies.policy_names), e.g. RandomPolicy, "
    "HastingsRandomPolicy (CAR_RACING), RepeatRandomPolicy (discrete environments), or "
    "'controller' (a trained controller, see --controller_dir). An unknown name lists the valid "
    "ones.",
)
flags.DEFINE_integer(
    "seed", None, "Base seed (rollout i gets a seed derived from it); default random."
)
flags.DEFINE_string(
    "ray_address", None, "Join this Ray cluster ('auto', host:port) instead of a local one."
)
flags.DEFINE_enum(
    "out_format", "pickle", ["pickle", "tfrecord"], "One pickle per rollout, or shards."
)
flags.DEFINE_enum(
    "compression", None, ["none", "GZIP", "ZLIB"], "TFRecord compression (tfrecord; default GZIP)."
)
flags.DEFINE_integer(
    "rollouts_per_shard",
    None,
    "Rollouts per TFRecord shard (tfrecord; default ceil(num_rollouts / 64), at most 16).",
)
flags.DEFINE_float(
    "validation_fraction", 0.05, "Share of rollouts in the validation split (tfrecord)."
)
flags.DEFINE_string("out_name", "rollouts", "Shard name prefix (tfrecord): <out_name>-<split>-...")
flags.DEFINE_integer(
    "max_retries", 3, "Ray retries of a task whose worker process died or ran past its time limit."
)
flags.DEFINE_string(
    "controller_dir",
    None,
    "With --policy=controller: a train_controller --model_dir whose controller (with its "
    "encoder and sequential model) acts, e.g. for iterative World Models training.",
)
flags.DEFINE_float(
    "random_action_prob",
    0.0,
    "With --policy=controller: probability of a uniform random action at each step.",
)
flags.DEFINE_float(
    "rollout_timeout",
    0,
    "Seconds per rollout after which a Ray task (one pickle, or one shard of "
    "--rollouts_per_shard rollouts) counts as hung: its worker is killed and the task "
    "retried. 0: no limit. A 1000-step CarRacing rollout takes ~5 s on a free core.",
)
flags.DEFINE_list(
    "policy_kwargs",
    [],
    "Constructor arguments of the --policy as name=value pairs (numbers, true/false, or "
    "text), e.g. --policy=RepeatRandomPolicy --policy_kwargs=min_repeat=20,max_repeat=200.",
)
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
for _name in ("num_rollouts", "policy"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import BadInput
    from rl755.data_gen.collect import collect_rollouts, parse_policy_kwargs, timing_line

    try:
        summary = collect_rollouts(
            environment=FLAGS.environment,
            policy=FLAGS.policy,
            num_rollouts=FLAGS.num_rollouts,
            parallelism=FLAGS.parallelism,
            max_steps=FLAGS.max_steps,
            out_dir=FLAGS.out_dir,
            out_format=FLAGS.out_format,
            seed=FLAGS.seed,
            ray_address=FLAGS.ray_address,
            compression=FLAGS.compression,
            rollouts_per_shard=FLAGS.rollouts_per_shard,
            validation_fraction=FLAGS.validation_fraction,
            out_name=FLAGS.out_name,
            max_retries=FLAGS.max_retries,
            rollout_timeout=FLAGS.rollout_timeout,
            controller_dir=FLAGS.controller_dir,
            random_action_prob=FLAGS.random_action_prob,
            policy_kwargs=parse_policy_kwargs(FLAGS.policy_kwargs),
            run_flags=run_record.flags_dict(),
            deterministic=FLAGS.deterministic,
            use_ray=FLAGS.use_ray,
        )
    except BadInput as e:
        raise app.UsageError(str(e)) from e
    logging.info(
        "Wrote %d files (%d rollouts, %d frames, %.1f MB) to %s; skipped %d existing; seed %d. %s",
        summary.written,
        summary.rollouts,
        summary.frames,
        summary.bytes / 1e6,
        summary.out_dir,
        summary.skipped,
        summary.seed,
        timing_line(summary),
    )


if __name__ == "__main__":
    app.run(main)
