"""Each round's controllers in each round's dream: does a model rate its own controller above
the others' rating of it, and does the ensemble's disagreement flag what fails in the real game?

    RL755_MODELS_DIR=... python experiments/car_racing/dream_iterations/cross_dreams.py \
        --rounds=3,5,6,7 --dreams=64

For every MDN-RNN of `--rounds` (`$RL755_MODELS_DIR/car_racing/mdn_rnn_with_heads_750_iterR`,
or `roundR/mdn_rnn` here where committed), and each of `--more_model_dirs`, it dreams
`--dreams` episodes of 1,000 steps (τ 1, from encoded real reset frames, the same dream seed
for every controller) with each controller of `CONTROLLERS`, and prints the mean return; then
the ensemble of the rounds' models (rl755.controller.dream_eval, the last round first) at each
of `--penalties`: the return, and the members' per-step reward std. Rounds whose model is not
on this machine are skipped with a message.
"""

import os

import numpy as np
from absl import app, flags

from rl755.common import tf_setup

tf_setup.quiet()

HERE = os.path.dirname(os.path.abspath(__file__))
FLAGS = flags.FLAGS
flags.DEFINE_list("rounds", ["3", "5", "6", "7"], "Rounds whose MDN-RNNs dream.")
flags.DEFINE_integer("dreams", 64, "Dreams per controller and model.")
flags.DEFINE_integer("seed", 123, "Dream seed.")
flags.DEFINE_list(
    "more_model_dirs", [], "More MDN-RNN training dirs to dream in alone (rows, not members)."
)
flags.DEFINE_multi_float("penalties", [0.0, 1.0], "The ensemble's disagreement penalties.")

# name (its real score on seeds 1000-1019) -> its controller dir (all committed here).
CONTROLLERS = {
    "round 3, real choice (200.2)": f"{HERE}/round3_realsel",
    "round 4 (-84.2)": f"{HERE}/round4",
    "round 5 (-27.9)": f"{HERE}/round5",
    "round 6 (311.3)": f"{HERE}/round6",
    "round 7 (176.8)": f"{HERE}/round7",
}


def model_dir(r: str) -> str:
    here = os.path.join(HERE, f"round{r}", "mdn_rnn")
    if os.path.isdir(here):
        return here
    return os.path.join(
        os.environ["RL755_MODELS_DIR"], "car_racing", f"mdn_rnn_with_heads_750_iter{r}"
    )


def main(argv):
    del argv
    import tensorflow as tf

    from rl755.controller.cma_config import derived_seeds
    from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
    from rl755.controller.resolve import SequentialModelFromDir, make_agent_spec

    dirs = {r: model_dir(r) for r in FLAGS.rounds}
    for r, d in list(dirs.items()):
        if not os.path.isdir(d):
            print(f"round {r}: no MDN-RNN at {d}; skipped")
            del dirs[r]
    last = list(dirs)[-1]
    spec = make_agent_spec(
        "CAR_RACING",
        "LinearController",
        encoder="raw_rollout_vae_32ld_750",
        sequential_model_dir=dirs[last],
    )
    encoder, first = spec.build_models()
    controller = spec.build_controller(encoder, first)

    def encode(frames):
        return encoder.compute_full_representation(tf.constant(frames))[0].numpy()

    z0 = encoded_initial_states(spec.env.make_fn(), encode, derived_seeds(755, 3, n=FLAGS.dreams))
    params = np.stack(
        [np.load(os.path.join(d, "controller_params.npy")) for d in CONTROLLERS.values()]
    ).astype(np.float32)
    trials = np.arange(FLAGS.dreams)
    models = {r: SequentialModelFromDir(d)() for r, d in dirs.items()}
    rows = {}
    for r, model in models.items():
        dream = DreamEvaluator(model, controller, z0, 1000, 1.0, spec.action_fn)
        rows[f"round {r}'s model"] = dream.evaluate(params, trials, seed=FLAGS.seed)["returns"]
    for d in FLAGS.more_model_dirs:
        dream = DreamEvaluator(
            SequentialModelFromDir(d)(), controller, z0, 1000, 1.0, spec.action_fn
        )
        rows[os.path.basename(d.rstrip("/"))] = dream.evaluate(params, trials, seed=FLAGS.seed)[
            "returns"
        ]
    others = tuple(m for r, m in models.items() if r != last)
    outs = {}
    for penalty in FLAGS.penalties:
        ensemble = DreamEvaluator(
            models[last],
            controller,
            z0,
            1000,
            1.0,
            spec.action_fn,
            ensemble=others,
            disagreement_penalty=penalty,
        )
        outs[penalty] = ensemble.evaluate(params, trials, seed=FLAGS.seed)
    print("| dream | " + " | ".join(CONTROLLERS) + " |")
    print("|---" * (len(CONTROLLERS) + 1) + "|")
    for name, returns in rows.items():
        print(f"| {name} | " + " | ".join(f"{x:.1f}" for x in returns.mean(1)) + " |")
    for penalty, out in outs.items():
        print(
            f"| ensemble of rounds {', '.join(dirs)}, λ {penalty:g} | "
            + " | ".join(f"{x:.1f}" for x in out["returns"].mean(1))
            + " |"
        )
    print(
        "| its members' reward std a step | "
        + " | ".join(f"{x:.3f}" for x in outs[FLAGS.penalties[0]]["reward_std"].mean(1))
        + " |"
    )


if __name__ == "__main__":
    app.run(main)
