"""Stage 5: train a controller with CMA-ES, in the real environment or inside the model.

World Models CarRacing (paper settings; 64 workers):

    python scripts/models/train_controller.py --environment=CAR_RACING \
        --model_dir=$HOME/rl755_models/car_racing/controller_vae_mdnrnn \
        --encoder=raw_rollout_vae_32ld --sequential_model=<saved_models name> \
        --controller=LinearController --mode=real --cma_population_size=64 \
        --cma_trials_per_member=16 --cma_generations=1800 --parallelism=64 \
        --eval_every=25 --eval_episodes=1024

`--mode=dream` evaluates the population inside the sequential model (needs reward/done
heads) at `--temperature`. Rerun the same command to resume. Library:
rl755.controller.cma_train.train_controller.
"""

from absl import app, flags

from rl755.common import checkpoints, determinism, tf_setup

tf_setup.quiet()

FLAGS = flags.FLAGS
flags.DEFINE_string("environment", None, "Environments enum name, e.g. CAR_RACING.")
flags.DEFINE_string("model_dir", None, "Output dir: checkpoint, controller, TensorBoard, PNG.")
flags.DEFINE_string("encoder", "none", "An encoder of the zoo (rl755.zoo), or none.")
flags.DEFINE_string("encoder_dir", None, "Instead of --encoder: a train_obs_encoder model_dir.")
flags.DEFINE_string("encoder_model", None, "With --encoder_dir: the model name, e.g. vae.Vae.")
flags.DEFINE_integer("representation_size", None, "With --encoder_dir: its Z.")
flags.DEFINE_string(
    "sequential_model", "none", "A sequential model of the zoo (rl755.zoo), or none (V only)."
)
flags.DEFINE_string(
    "sequential_model_dir", None, "Instead of --sequential_model: a train_sequential_model dir."
)
flags.DEFINE_string(
    "controller",
    "LinearController",
    "LinearController | HiddenLayerController | ThresholdController (one output played as"
    " left/no-op/right; environments with those actions).",
)
flags.DEFINE_integer("hidden_units", 40, "HiddenLayerController's hidden units.")
flags.DEFINE_enum("mode", "real", ["real", "dream"], "Where the population is evaluated.")
flags.DEFINE_integer("cma_population_size", 64, "CMA-ES population size P.")
flags.DEFINE_integer("cma_trials_per_member", 16, "Episodes per member per generation T.")
flags.DEFINE_integer("cma_generations", 100, "Total generations (a resumed run continues).")
flags.DEFINE_float("sigma", 0.1, "CMA-ES initial step size.")
flags.DEFINE_integer("seed", 0, "Base seed (trial seeds, CMA-ES sampling, eval seeds).")
flags.DEFINE_integer("rollout_max_steps", 1000, "Step limit per episode (real and dream).")
flags.DEFINE_float("temperature", 1.0, "Dream sampling temperature.")
flags.DEFINE_float(
    "done_threshold",
    0.0,
    "Dream episode ends: 0 = a Bernoulli(done_prob) draw each step; p > 0 = as soon as "
    "done_prob > p (World Models' Doom dream: about 0.09 with an unweighted done head).",
)
flags.DEFINE_float(
    "done_prob_scale",
    1.0,
    "Dream episode ends: the episode-end probability is multiplied by this (--mode=dream) "
    "before either rule; > 1 for a dream that rates controllers above their real scores.",
)
flags.DEFINE_list(
    "dream_ensemble",
    [],
    "--mode=dream: more sequential models of the zoo (comma-separated) that the dream averages "
    "with --sequential_model: mean reward minus --dream_disagreement_penalty x their std, mean "
    "episode-end probability, and each step's next z from one member drawn at random.",
)
flags.DEFINE_list(
    "dream_ensemble_dirs", [], "As --dream_ensemble: train_sequential_model dirs, comma-separated."
)
flags.DEFINE_float(
    "dream_disagreement_penalty",
    0.0,
    "With a dream ensemble: the dream's reward is the members' mean minus this x their std.",
)
flags.DEFINE_bool(
    "cell_state",
    False,
    "The controller also reads the LSTM's memory cell c: [z, h, c] (World Models' Doom agent).",
)
flags.DEFINE_integer("dream_initial_states", 256, "Encoded real reset frames to start dreams.")
flags.DEFINE_integer(
    "eval_every",
    25,
    "Evaluation of the best member and the CMA-ES mean every N gens (0=off; where: --eval_in); "
    "the best evaluated is saved.",
)
flags.DEFINE_integer("eval_episodes", 16, "Episodes of that evaluation.")
flags.DEFINE_enum(
    "eval_in",
    "real",
    ["real", "dream"],
    "Where the evaluations and the selection play: real episodes, or (--mode=dream) dreams "
    "from the training's initial states, so no real episode chooses the saved controller.",
)
flags.DEFINE_integer(
    "select_episodes",
    0,
    "At the end, the --select_top best-evaluated candidates play this many more episodes "
    "(--eval_in; seeds no evaluation used) and the best of them on those is saved (0: off; "
    "needs --eval_every). Rerunning a finished run with it adds the selection.",
)
flags.DEFINE_integer("select_top", 4, "How many evaluated candidates the selection replays.")
flags.DEFINE_integer("parallelism", 2, "Ray workers for real episodes (0: in-process, no Ray).")
flags.DEFINE_integer("envs_per_worker", 4, "Environments per worker stepped with batched nets.")
flags.DEFINE_integer("threads_per_worker", 1, "TF threads (and Ray CPUs) per worker.")
flags.DEFINE_string("ray_address", None, "Join this Ray cluster ('auto', host:port).")
flags.DEFINE_float("trial_timeout_s", 600.0, "A batch of episodes slower than this is re-run.")
flags.DEFINE_integer("max_worker_failures", 3, "Failures of one batch before the run stops.")
flags.DEFINE_string(
    "initial_params",
    None,
    "Start CMA-ES's mean at this controller's parameters (its model_dir or "
    "controller_params.npy) instead of 0, e.g. to go on from a shipped controller on a new "
    "machine. A resumed run ignores it.",
)
flags.DEFINE_bool("deterministic", None, determinism.FLAG_HELP)
flags.DEFINE_integer("keep_checkpoints", checkpoints.KEEP_CHECKPOINTS, checkpoints.KEEP_HELP)
for _name in ("environment", "model_dir"):
    flags.mark_flag_as_required(_name)


def main(argv):
    del argv
    from rl755.common import run_record
    from rl755.common.errors import exit_on_bad_input
    from rl755.controller.cma_train import CmaConfig, PoolConfig, train_controller

    with exit_on_bad_input():
        train_controller(
            environment=FLAGS.environment,
            model_dir=FLAGS.model_dir,
            encoder=FLAGS.encoder,
            sequential_model=FLAGS.sequential_model,
            controller=FLAGS.controller,
            hidden_units=FLAGS.hidden_units,
            encoder_dir=FLAGS.encoder_dir,
            encoder_model=FLAGS.encoder_model,
            representation_size=FLAGS.representation_size,
            sequential_model_dir=FLAGS.sequential_model_dir,
            cell_state=FLAGS.cell_state,
            dream_ensemble=tuple(FLAGS.dream_ensemble),
            dream_ensemble_dirs=tuple(FLAGS.dream_ensemble_dirs),
            cma_config=CmaConfig(
                mode=FLAGS.mode,
                population_size=FLAGS.cma_population_size,
                trials_per_member=FLAGS.cma_trials_per_member,
                generations=FLAGS.cma_generations,
                rollout_max_steps=FLAGS.rollout_max_steps,
                sigma=FLAGS.sigma,
                seed=FLAGS.seed,
                temperature=FLAGS.temperature,
                done_threshold=FLAGS.done_threshold,
                done_prob_scale=FLAGS.done_prob_scale,
                dream_disagreement_penalty=FLAGS.dream_disagreement_penalty,
                eval_every=FLAGS.eval_every,
                eval_episodes=FLAGS.eval_episodes,
                eval_in=FLAGS.eval_in,
                dream_initial_states=FLAGS.dream_initial_states,
                initial_params=FLAGS.initial_params,
                select_episodes=FLAGS.select_episodes,
                select_top=FLAGS.select_top,
                keep_checkpoints=FLAGS.keep_checkpoints,
            ),
            pool=PoolConfig(
                parallelism=FLAGS.parallelism,
                envs_per_worker=FLAGS.envs_per_worker,
                ray_address=FLAGS.ray_address,
                trial_timeout_s=FLAGS.trial_timeout_s,
                max_worker_failures=FLAGS.max_worker_failures,
                threads_per_worker=FLAGS.threads_per_worker,
            ),
            run_flags=run_record.flags_dict(),
            deterministic=FLAGS.deterministic,
        )


if __name__ == "__main__":
    app.run(main)
