"""DoomTakeCover from the dream as a recipe (`rl755.pipeline.recipe_book`: doom_dream).

Three collection sets (3,200 rollouts of RepeatRandomPolicy; 400 of an earlier dream
controller with 30% random actions; 800 of random actions held 20-200 steps), the VAE, the
encoding of every set, the MDN-RNN in phases on the growing data (1,000 steps on the first
set; then, from those weights with a new optimizer, 250 steps on it, 250 on the first two
sets, 250 on all three), CMA-ES in the dream at tau 1.15 with its evaluations and the choice
in the dream, then 100 episodes in the real game. The flags are the zoo rows'
(raw_rollout_vae_64ld, mdn_rnn_64ld_episodes, dream_controller_episodes, mdn_rnn_64ld_hold,
dream_controller), each step trained as far as the shipped model went.
"""

from __future__ import annotations

from rl755.pipeline.recipes import ENCODED, Recipe, Step, collect_flags, encode_steps

# ---- DoomTakeCover from the dream ----------------------------------------------------------
DOOM_FULL = dict(
    random=dict(rollouts=3200, max_steps=2100, parallelism=2),
    controller=dict(rollouts=400, max_steps=2100, parallelism=2),
    hold=dict(rollouts=800, max_steps=2100, parallelism=2),
    vae=dict(train_steps=3000, batch_size=100, obs_sampled_per_rollout=32, save_every_n_steps=500),
    mdn=dict(batch_size=32, sequence_length=500, save_every_n_steps=500),
    mdn_steps=(1000, 250, 500, 750),
    hold_save_every=250,
    cma=dict(
        cma_population_size=16,
        cma_trials_per_member=8,
        cma_generations=40,
        rollout_max_steps=2100,
        dream_initial_states=64,
    ),
    choice=dict(eval_every=5, eval_episodes=64, select_episodes=256, select_top=4),
    evaluate=dict(num_episodes=100),
)
DOOM_TINY = dict(
    random=dict(rollouts=6, max_steps=30, parallelism=1, per_shard=2),
    controller=dict(rollouts=4, max_steps=20, parallelism=1, per_shard=2),
    hold=dict(rollouts=4, max_steps=20, parallelism=1, per_shard=2),
    vae=dict(
        train_steps=2,
        batch_size=4,
        obs_sampled_per_rollout=4,
        save_every_n_steps=1,
        validation_steps=1,
    ),
    mdn=dict(batch_size=2, sequence_length=8, save_every_n_steps=1, validation_steps=1),
    mdn_steps=(2, 1, 2, 3),
    hold_save_every=1,
    cma=dict(
        cma_population_size=4,  # (diagonal CMA-ES needs more than 2)
        cma_trials_per_member=1,
        cma_generations=2,
        rollout_max_steps=10,
        dream_initial_states=2,
    ),
    choice=dict(eval_every=1, eval_episodes=2, select_episodes=2, select_top=2),
    evaluate=dict(num_episodes=1, max_steps=30),
)


def doom_recipe(size: dict, description: str, wall_time: dict, resources: dict) -> Recipe:
    vae, mdn, mdn_episodes = (
        "<models>/raw_rollout_vae_64ld",
        "<models>/mdn_rnn_64ld_hold",
        ("<models>/mdn_rnn_64ld_episodes"),
    )
    earlier, final = "<models>/dream_controller_episodes", "<models>/dream_controller"
    sets = {
        k: f"{ENCODED}/raw_rollout_vae_64ld_{k}" for k in ("1_random", "2_controller", "3_hold")
    }
    raw = {"random": "<data>/raw_rollouts", "controller": "<data>/raw_rollouts_controller"}
    raw["hold"] = "<data>/raw_rollouts_hold"
    world_model = dict(encoder_dir=vae, encoder_model="vae.Vae", representation_size=64)
    dream = dict(
        controller="LinearController",
        cell_state=True,
        mode="dream",
        temperature=1.15,
        done_threshold=0,
        parallelism=0,
        seed=755,
        **size["cma"],
    )

    def sequential(model_dir: str, steps: int, sets_glob: str, **flags) -> dict:
        return dict(
            model="mdn_rnn.mdn_rnn_with_heads",
            rollouts_dataset="RawRolloutVae64ld",
            rollouts_pattern=f"{ENCODED}/raw_rollout_vae_64ld_[{sets_glob}]_*/encoded-{{split}}*",
            model_dir=model_dir,
            train_steps=steps,
            learning_rate=1e-3,
            sample_observations=True,
            slice_start="episode_start",
            seed=0,
            **{**size["mdn"], **flags},
        )

    s1, s2, s3, s4 = size["mdn_steps"]
    hold_flags = dict(initial_weights=mdn_episodes, save_every_n_steps=size["hold_save_every"])
    steps = [
        Step(
            "collect_random",
            "collect",
            collect_flags(raw["random"], 755, size["random"], policy="RepeatRandomPolicy"),
        ),
        Step(
            "train_encoder",
            "train_encoder",
            dict(
                model="vae.Vae",
                model_dir=vae,
                representation_size=64,
                learning_rate=1e-3,
                rollouts_pattern=raw["random"] + "/rollouts-{split}*.tfrecord-*",
                seed=0,
                **size["vae"],
            ),
        ),
        *encode_steps("encode_random", vae, raw["random"], sets["1_random"], ("train_encoder",)),
        Step(
            "train_sequential_random",
            "train_sequential",
            sequential(mdn_episodes, s1, "1"),
            after=("encode_random_train", "encode_random_validation"),
        ),
        Step(
            "train_controller_earlier",
            "train_controller",
            dict(
                model_dir=earlier,
                sequential_model_dir=mdn_episodes,
                eval_every=0,
                **world_model,
                **dream,
            ),
        ),
        Step(
            "collect_controller",
            "collect",
            collect_flags(
                raw["controller"],
                756,
                size["controller"],
                policy="controller",
                controller_dir=earlier,
                random_action_prob=0.3,
            ),
        ),
        Step(
            "collect_hold",
            "collect",
            collect_flags(
                raw["hold"],
                757,
                size["hold"],
                policy="RepeatRandomPolicy",
                policy_kwargs="min_repeat=20,max_repeat=200",
            ),
            after=(),
        ),
        *encode_steps(
            "encode_controller",
            vae,
            raw["controller"],
            sets["2_controller"],
            ("train_encoder", "collect_controller"),
        ),
        *encode_steps(
            "encode_hold", vae, raw["hold"], sets["3_hold"], ("train_encoder", "collect_hold")
        ),
        Step(
            "train_sequential_hold_1",
            "train_sequential",
            sequential(mdn, s2, "1", **hold_flags),
            after=("train_sequential_random",),
        ),
        Step(
            "train_sequential_hold_2",
            "train_sequential",
            sequential(mdn, s3, "12", **hold_flags),
            after=(
                "train_sequential_hold_1",
                "encode_controller_train",
                "encode_controller_validation",
            ),
        ),
        Step(
            "train_sequential_hold_3",
            "train_sequential",
            sequential(mdn, s4, "123", **hold_flags),
            after=("train_sequential_hold_2", "encode_hold_train", "encode_hold_validation"),
        ),
        Step(
            "train_controller",
            "train_controller",
            dict(
                model_dir=final,
                sequential_model_dir=mdn,
                eval_in="dream",
                **world_model,
                **dream,
                **size["choice"],
            ),
        ),
        Step(
            "evaluate",
            "evaluate",
            dict(
                model_dir=final,
                out_dir="<out>/evaluation/dream_controller",
                seed=1000,
                compare_random=True,
                **size["evaluate"],
            ),
        ),
    ]
    return Recipe(
        environment="DOOM_TAKE_COVER",
        steps=tuple(steps),
        description=description,
        wall_time=wall_time,
        resources=resources,
    )
