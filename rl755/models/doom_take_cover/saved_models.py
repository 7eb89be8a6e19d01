"""Trained DOOM_TAKE_COVER models (the original interface): one no-argument function per rl755.zoo row
of DOOM_TAKE_COVER; help(<function>) shows how each was trained.

Generated from rl755/zoo/rows.py by `python scripts/dev/zoo_table.py --write`; do not edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl755 import zoo

if TYPE_CHECKING:
    from rl755.models.common.encoder import ObservationEncoder
    from rl755.models.common.sequential import SequentialModel


def raw_rollout_vae_64ld() -> ObservationEncoder:
    r"""World Models' Doom ConvVAE, Z = 64, 4,446,915 params.

    Trained on 3,200 RepeatRandomPolicy raw rollouts (1,027,113 frames,
    `<data_dir>/doom_take_cover/raw_rollouts/rollouts-train*.tfrecord-*`, collect seed 755) and
    stopped at step 3000 of 6000 (model-006, 300k frames seen): validation loss 41.7. The rows
    mdn_rnn_64ld and mdn_rnn_64ld_end_weighted were trained on the encodings of an earlier
    1500-step VAE of this name on 400 rollouts
    (experiments/doom_take_cover/small_scale/README.md).

    Trained with:

        python scripts/models/train_obs_encoder.py --environment=DOOM_TAKE_COVER \
            --model=vae.Vae --model_dir=<models_dir>/doom_take_cover/raw_rollout_vae_64ld \
            --train_steps=6000 --batch_size=100 --representation_size=64 \
            --save_every_n_steps=500 --learning_rate=1e-3 --obs_sampled_per_rollout=32

    Loads the newest complete checkpoint of
    `<models_dir>/doom_take_cover/raw_rollout_vae_64ld/`, or without one the shipped copy
    `rl755/zoo/shipped/doom_take_cover/raw_rollout_vae_64ld/` (float16 weights) if there is one
    (`rl755.zoo.get('DOOM_TAKE_COVER', 'raw_rollout_vae_64ld')()`) and returns an
    ObservationEncoder (rl755.models.common.encoder), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    Rollouts it encodes (scripts/data_gen/encode_raw_rollouts.py --model=raw_rollout_vae_64ld)
    are `--rollouts_dataset=RawRolloutVae64ld`.
    """
    return zoo.get("DOOM_TAKE_COVER", "raw_rollout_vae_64ld").load()


def mdn_rnn_64ld() -> SequentialModel:
    r"""MDN-RNN (LSTM 512, 5 Gaussians per latent dimension) with reward and episode-end heads.

    Its done head (unweighted, presets.mdn_rnn_done_pos_weight = 1) was trained on slices that
    started only where a whole slice fit and predicted 0.0004 per step against a real hazard of
    0.0038; the same command with today's sampler (slices start anywhere; the experiment's
    `mdn_rnn_64ld_sliced`) gives 0.0033. experiments/doom_take_cover/small_scale/README.md has
    what dream-trained controllers do with them.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER \
            --model=mdn_rnn.mdn_rnn_with_heads \
            --model_dir=<models_dir>/doom_take_cover/mdn_rnn_64ld --train_steps=600 \
            --rollouts_dataset=RawRolloutVae64ld --batch_size=32 --sequence_length=100 \
            --learning_rate=1e-3

    Loads the newest complete checkpoint of `<models_dir>/doom_take_cover/mdn_rnn_64ld/`, or
    without one the shipped copy `rl755/zoo/shipped/doom_take_cover/mdn_rnn_64ld/` (float16
    weights) if there is one (`rl755.zoo.get('DOOM_TAKE_COVER', 'mdn_rnn_64ld')()`) and returns
    a SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data
    and git commit of the run are in its runs/*.json. A missing model fails with the command
    above.
    """
    return zoo.get("DOOM_TAKE_COVER", "mdn_rnn_64ld").load()


def mdn_rnn_64ld_end_weighted() -> SequentialModel:
    r"""`mdn_rnn_64ld` trained 200 more steps with episode ends weighted 50x in the loss.

    The workaround for the old slice sampler's rare episode ends: its done head predicts 0.0066
    per step on the validation rollouts (real hazard 0.0038; `mdn_rnn_64ld`: 0.0004).

    Made by copying `mdn_rnn_64ld`'s model dir to
    <models_dir>/doom_take_cover/mdn_rnn_64ld_end_weighted, setting "model":
    "mdn_rnn.mdn_rnn_with_heads_end_weighted" in its newest model-NNN.json checkpoint marker,
    and resuming:

        python scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER \
            --model=mdn_rnn.mdn_rnn_with_heads_end_weighted \
            --model_dir=<models_dir>/doom_take_cover/mdn_rnn_64ld_end_weighted \
            --train_steps=800 --rollouts_dataset=RawRolloutVae64ld --batch_size=32 \
            --sequence_length=100 --learning_rate=1e-3

    Loads the newest complete checkpoint of
    `<models_dir>/doom_take_cover/mdn_rnn_64ld_end_weighted/`, or without one the shipped copy
    `rl755/zoo/shipped/doom_take_cover/mdn_rnn_64ld_end_weighted/` (float16 weights) if there is
    one (`rl755.zoo.get('DOOM_TAKE_COVER', 'mdn_rnn_64ld_end_weighted')()`) and returns a
    SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("DOOM_TAKE_COVER", "mdn_rnn_64ld_end_weighted").load()


def mdn_rnn_64ld_episodes() -> SequentialModel:
    r"""MDN-RNN (LSTM 512, 5 Gaussians per latent dimension, reward and unweighted episode-end
    heads) trained on whole episodes (slices of 500 from each episode's start).

    Trained on the encodings of raw_rollout_vae_64ld (3,200 rollouts) and stopped at step 1000
    of 3000: the shipped checkpoint is step 1000, and rerunning the command resumes toward 3000
    (mdn_rnn_64ld_hold continued it instead). The measures of its checkpoints:
    experiments/doom_take_cover/small_scale/README.md.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER \
            --model=mdn_rnn.mdn_rnn_with_heads \
            --model_dir=<models_dir>/doom_take_cover/mdn_rnn_64ld_episodes \
            --rollouts_dataset=RawRolloutVae64ld --train_steps=3000 --batch_size=32 \
            --sequence_length=500 --learning_rate=1e-3 --sample_observations \
            --slice_start=episode_start --save_every_n_steps=500

    Loads the newest complete checkpoint of
    `<models_dir>/doom_take_cover/mdn_rnn_64ld_episodes/`, or without one the shipped copy
    `rl755/zoo/shipped/doom_take_cover/mdn_rnn_64ld_episodes/` (float16 weights) if there is one
    (`rl755.zoo.get('DOOM_TAKE_COVER', 'mdn_rnn_64ld_episodes')()`) and returns a
    SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("DOOM_TAKE_COVER", "mdn_rnn_64ld_episodes").load()


def mdn_rnn_64ld_hold() -> SequentialModel:
    r"""mdn_rnn_64ld_episodes trained 750 more steps of 32 x 500, the last 500 also on rollouts of a
    controller and of random actions held 20-200 steps.

    Started from the shipped mdn_rnn_64ld_episodes' weights (step 1000) with a new Adam state.
    Steps 1-250 on the 3,200 random rollouts alone (--rollouts_pattern unset), 251-500 also on
    raw_rollout_vae_64ld_iter1 (400 rollouts of dream_controller_episodes with 30% random
    actions, collect seed 756), 501-750 also on raw_rollout_vae_64ld_hold (800 rollouts of
    --policy=RepeatRandomPolicy --policy_kwargs=min_repeat=20,max_repeat=200, collect seed 757);
    the flags are the last phase's. Validation loss 0.9366; dream/real steps survived at tau
    1.15: random 0.81, NOOP 0.92, MOVE_LEFT and MOVE_RIGHT 1.22.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER \
            --model=mdn_rnn.mdn_rnn_with_heads \
            --model_dir=<models_dir>/doom_take_cover/mdn_rnn_64ld_hold \
            --rollouts_dataset=RawRolloutVae64ld \
            --rollouts_pattern="$RL755_DATA_DIR/doom_take_cover/encoded_rollouts/raw_rollout_vae_64ld*/encoded-{split}-*" \
            --train_steps=750 --batch_size=32 --sequence_length=500 --learning_rate=1e-3 \
            --sample_observations --slice_start=episode_start --save_every_n_steps=250 \
            --initial_weights=rl755/zoo/shipped/doom_take_cover/mdn_rnn_64ld_episodes

    Loads the newest complete checkpoint of `<models_dir>/doom_take_cover/mdn_rnn_64ld_hold/`,
    or without one the shipped copy `rl755/zoo/shipped/doom_take_cover/mdn_rnn_64ld_hold/`
    (float16 weights) if there is one (`rl755.zoo.get('DOOM_TAKE_COVER',
    'mdn_rnn_64ld_hold')()`) and returns a SequentialModel (rl755.models.common.sequential),
    weights loaded; the exact flags, data and git commit of the run are in its runs/*.json. A
    missing model fails with the command above.
    """
    return zoo.get("DOOM_TAKE_COVER", "mdn_rnn_64ld_hold").load()


def dream_controller_episodes():
    r"""the first DoomTakeCover agent to beat random: LinearController on [z, h, c] trained only
    inside mdn_rnn_64ld_episodes at temperature 1.15; ships in the repository.

    Reproduce its score with no training: python scripts/models/evaluate_controller.py
    --environment=DOOM_TAKE_COVER --saved_controller=dream_controller_episodes
    --num_episodes=100 --seed=1000 (its shipped encoder and MDN-RNN come with it): 324.1 +- 63.0
    steps survived (random: 213.2 +- 94.4). Shipped as dream_controller until dream_controller
    (on mdn_rnn_64ld_hold) passed 750. Trained on mdn_rnn_64ld_episodes at step 1000 of 3000
    with Bernoulli episode ends (--done_threshold=0);
    experiments/doom_take_cover/small_scale/README.md.

    Trained with:

        python scripts/models/train_controller.py --environment=DOOM_TAKE_COVER \
            --model_dir=<models_dir>/doom_take_cover/dream_controller_episodes \
            --encoder=raw_rollout_vae_64ld --sequential_model=mdn_rnn_64ld_episodes \
            --controller=LinearController --cell_state --mode=dream --temperature=1.15 \
            --done_threshold=0 --cma_population_size=16 --cma_trials_per_member=8 \
            --cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 \
            --eval_every=0 --parallelism=0 --seed=755

    Loads the newest complete checkpoint of
    `<models_dir>/doom_take_cover/dream_controller_episodes/`, or without one the shipped copy
    `rl755/zoo/shipped/doom_take_cover/dream_controller_episodes/` (float16 weights) if there is
    one (`rl755.zoo.get('DOOM_TAKE_COVER', 'dream_controller_episodes')()`) and returns an
    rl755.controller.saved.TrainedController (controller, params [N], meta); the exact flags,
    data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("DOOM_TAKE_COVER", "dream_controller_episodes").load()


def dream_controller():
    r"""the DoomTakeCover agent: LinearController on [z, h, c] trained and chosen only inside the
    MDN-RNN at temperature 1.15, as in the paper; ships in the repository.

    Reproduce its score with no training: python scripts/models/evaluate_controller.py
    --environment=DOOM_TAKE_COVER --saved_controller=dream_controller --num_episodes=100
    --seed=1000 (its shipped encoder and MDN-RNN come with it): 824.5 +- 459.6 steps survived
    (random: 213.2 +- 94.4; the task's goal: 750). Trained on mdn_rnn_64ld_hold, whose data
    shows staying at both walls; every evaluation and the final choice (the 4 best-evaluated
    candidates on 256 new dreams) played dreams, no real episode
    (experiments/doom_take_cover/small_scale/README.md).

    Trained with:

        python scripts/models/train_controller.py --environment=DOOM_TAKE_COVER \
            --model_dir=<models_dir>/doom_take_cover/dream_controller \
            --encoder=raw_rollout_vae_64ld --sequential_model=mdn_rnn_64ld_hold \
            --controller=LinearController --cell_state --mode=dream --temperature=1.15 \
            --done_threshold=0 --cma_population_size=16 --cma_trials_per_member=8 \
            --cma_generations=40 --rollout_max_steps=2100 --dream_initial_states=64 \
            --eval_every=5 --eval_episodes=64 --eval_in=dream --select_episodes=256 \
            --select_top=4 --parallelism=0 --seed=755

    Loads the newest complete checkpoint of `<models_dir>/doom_take_cover/dream_controller/`, or
    without one the shipped copy `rl755/zoo/shipped/doom_take_cover/dream_controller/` (float16
    weights) if there is one (`rl755.zoo.get('DOOM_TAKE_COVER', 'dream_controller')()`) and
    returns an rl755.controller.saved.TrainedController (controller, params [N], meta); the
    exact flags, data and git commit of the run are in its runs/*.json. A missing model fails
    with the command above.
    """
    return zoo.get("DOOM_TAKE_COVER", "dream_controller").load()
