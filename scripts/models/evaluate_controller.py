"""Stage 5: evaluate a trained controller on fixed-seed real episodes (JSON + a GIF).

    python scripts/models/evaluate_controller.py --environment=CAR_RACING \
        --model_dir=$HOME/rl755_models/car_racing/controller_vae_mdnrnn \
        --num_episodes=100 --seed=0 --out_dir=/tmp/eval_controller --compare_random

Writes <out_dir>/evaluation.json (mean, std, per-episode returns; the random policy's on the
same seeds with --compare_random) and <out_dir>/episode.gif. The encoder and sequential
model are the ones the controller was trained with (its controller.json) unless
--encoder/--sequential_model name others. With no training at all, a shipped controller:

    python scripts/models/evaluate_controller.py --environment=DOOM_TAKE_COVER \
        --saved_controller=dream_controller --num_episodes=100 --seed=1000

Library: rl755.controller.evaluate.evaluate_controller.
"""

from absl import app, flags

from rl755.common import determinism, tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments enum name; must match the controller's.")
flags.DEFINE_string("model_dir", None, "The controller's train_controller --model_dir.")
flags.DEFINE_string(
    "saved_controller",
    None,
    "Instead of --model_dir: a controller of the zoo (rl755.zoo): your trained copy, else the "
    "one shipped in the repository (with its shipped encoder and sequential model).",
)
flags.DEFINE_string("encoder", None, "Override: an encoder of the zoo (rl755.zoo).")
flags.DEFINE_string("sequential_model", None, "Override: function in saved_models, or none.")
flags.DEFINE_integer("num_episodes", 100, "Episodes; episode i uses reset seed seed + i.")
flags.DEFINE_integer("seed", 0, "Seed of the first episode.")
flags.DEFINE_string(
    "out_dir",
    None,
    "Where evaluation.json and episode.gif go (default <controller dir>/evaluation).",
)
flags.DEFINE_integer("max_steps", None, "Step limit (default: the environment's).")
flags.DEFINE_integer("envs_at_once", 4, "Episodes stepped together with batched networks.")
flags.DEFINE_bool("compare_random", False, "Also score a uniform random policy on the seeds.")
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
flags.mark_flag_as_required("environment")


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.controller.evaluate import evaluate_controller

    result = evaluate_controller(
        controller_dir=FLAGS.model_dir,
        saved_controller=FLAGS.saved_controller,
        environment=FLAGS.environment,
        encoder=FLAGS.encoder,
        sequential_model=FLAGS.sequential_model,
        num_episodes=FLAGS.num_episodes,
        seed=FLAGS.seed,
        out_dir=FLAGS.out_dir,
        max_steps=FLAGS.max_steps,
        envs_at_once=FLAGS.envs_at_once,
        compare_random=FLAGS.compare_random,
        run_flags=run_record.flags_dict(),
        deterministic=FLAGS.deterministic,
    )
    line = f"{result.mean:.2f} +- {result.std:.2f} over {result.num_episodes} episodes"
    if result.random_policy is not None:
        rnd = result.random_policy
        line += f" (random policy: {rnd.mean:.2f} +- {rnd.std:.2f})"
    print(line)
    print(f"Wrote {result.out_dir}/evaluation.json and episode.gif")


if __name__ == "__main__":
    app.run(main)
