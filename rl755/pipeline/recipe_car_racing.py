"""CarRacing's real-environment controller as a recipe (`rl755.pipeline.recipe_book`:
car_racing_real).

The demo's stages (40 HastingsRandomPolicy rollouts of 300 steps, the VAE, encoding, the
MDN-RNN, CMA-ES 12 x 1 x 32 generations in the real game with its choice), then CMA-ES in the
real game from that controller at population 4 x 4 episodes of 1,000 steps for 100 generations
(real_controller_p4), then from there at 8 x 4 with sigma 0.03 for 26 generations
(real_controller), each with its choice on 16 new episodes, and both scored on 100 episodes.
The flags are the zoo rows'.
"""

from __future__ import annotations

from rl755.pipeline.recipes import ENCODED, Recipe, Step, collect_flags, encode_steps

# ---- CarRacing in the real environment -----------------------------------------------------
CAR_FULL = dict(
    environment="CAR_RACING",
    vae_name="raw_rollout_vae_32ld_demo",
    sequential_name="mdn_rnn_vae_32ld_demo",
    dataset="RawRolloutVae32ld",
    representation_size=32,
    collect=dict(rollouts=40, max_steps=300, parallelism=2, per_shard=4),
    vae=dict(train_steps=2000, batch_size=32, obs_sampled_per_rollout=50, save_every_n_steps=500),
    mdn=dict(train_steps=1500, batch_size=16, sequence_length=32, save_every_n_steps=500),
    demo=dict(
        cma_population_size=12,
        cma_trials_per_member=1,
        cma_generations=32,
        rollout_max_steps=300,
        eval_every=8,
        eval_episodes=4,
        select_episodes=8,
        envs_per_worker=6,
        parallelism=2,
    ),
    p4=dict(cma_population_size=4, cma_trials_per_member=4, cma_generations=100),
    p8=dict(cma_population_size=8, cma_trials_per_member=4, cma_generations=26),
    real=dict(
        rollout_max_steps=1000,
        eval_every=5,
        eval_episodes=8,
        select_episodes=16,
        select_top=4,
        parallelism=2,
    ),
    evaluate=dict(num_episodes=100),
)
CAR_TINY = dict(
    CAR_FULL,
    environment="FAKE_PIXELS",
    vae_name="raw_rollout_vae_4ld_demo",
    sequential_name="mdn_rnn_vae_4ld_demo",
    dataset="RawRolloutVae4ld",
    representation_size=4,
    collect=dict(rollouts=8, max_steps=24, parallelism=1, per_shard=2),
    vae=dict(
        train_steps=4,
        batch_size=8,
        obs_sampled_per_rollout=8,
        save_every_n_steps=2,
        validation_steps=1,
    ),
    mdn=dict(
        train_steps=4, batch_size=2, sequence_length=8, save_every_n_steps=2, validation_steps=1
    ),
    demo=dict(
        cma_population_size=2,
        cma_trials_per_member=1,
        cma_generations=2,
        rollout_max_steps=20,
        eval_every=1,
        eval_episodes=1,
        select_episodes=2,
        envs_per_worker=4,
        parallelism=0,
    ),
    p4=dict(cma_population_size=2, cma_trials_per_member=2, cma_generations=3),
    p8=dict(cma_population_size=4, cma_trials_per_member=1, cma_generations=2),
    real=dict(
        rollout_max_steps=24,
        eval_every=1,
        eval_episodes=1,
        select_episodes=2,
        select_top=2,
        parallelism=0,
    ),
    evaluate=dict(num_episodes=2),
)


def car_racing_recipe(size: dict, description: str, wall_time: dict, resources: dict) -> Recipe:
    vae, mdn = f"<models>/{size['vae_name']}", f"<models>/{size['sequential_name']}"
    demo, p4, p8 = (
        "<models>/linear_controller_demo",
        "<models>/real_controller_p4",
        ("<models>/real_controller"),
    )
    raw, encoded = "<data>/raw_rollouts", f"{ENCODED}/{size['vae_name']}"
    world_model = dict(
        encoder_dir=vae,
        encoder_model="vae.Vae",
        representation_size=size["representation_size"],
        sequential_model_dir=mdn,
        controller="LinearController",
        mode="real",
        seed=0,
    )

    def evaluate(name: str, controller_dir: str) -> Step:
        return Step(
            name,
            "evaluate",
            dict(
                model_dir=controller_dir,
                out_dir=f"<out>/evaluation/{controller_dir.rsplit('/', 1)[1]}",
                seed=1000,
                compare_random=True,
                **size["evaluate"],
            ),
            after=(name.replace("evaluate", "train_controller"),),
        )

    steps = [
        Step(
            "collect",
            "collect",
            collect_flags(raw, 0, size["collect"], policy="HastingsRandomPolicy"),
        ),
        Step(
            "train_encoder",
            "train_encoder",
            dict(
                model="vae.Vae",
                model_dir=vae,
                representation_size=size["representation_size"],
                learning_rate=1e-3,
                rollouts_pattern=raw + "/rollouts-{split}*.tfrecord-*",
                seed=0,
                **size["vae"],
            ),
        ),
        *encode_steps("encode", vae, raw, encoded, ("train_encoder",)),
        Step(
            "train_sequential",
            "train_sequential",
            dict(
                model="mdn_rnn.mdn_rnn",
                rollouts_dataset=size["dataset"],
                rollouts_pattern=encoded + "/encoded-{split}*",
                model_dir=mdn,
                learning_rate=1e-3,
                sample_observations=True,
                seed=0,
                **size["mdn"],
            ),
            after=("encode_train", "encode_validation"),
        ),
        Step(
            "train_controller_demo",
            "train_controller",
            dict(model_dir=demo, temperature=1.0, sigma=0.1, **world_model, **size["demo"]),
        ),
        Step(
            "train_controller_p4",
            "train_controller",
            dict(
                model_dir=p4,
                initial_params=demo,
                sigma=0.1,
                **world_model,
                **size["real"],
                **size["p4"],
            ),
        ),
        Step(
            "train_controller_p8",
            "train_controller",
            dict(
                model_dir=p8,
                initial_params=p4,
                sigma=0.03,
                **world_model,
                **size["real"],
                **size["p8"],
            ),
        ),
        evaluate("evaluate_p4", p4),
        evaluate("evaluate_p8", p8),
    ]
    return Recipe(
        environment=size["environment"],
        steps=tuple(steps),
        description=description,
        wall_time=wall_time,
        resources=resources,
    )
