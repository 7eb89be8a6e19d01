"""Trained FAKE_PIXELS models (the original interface): one no-argument function per rl755.zoo row
of FAKE_PIXELS; help(<function>) shows how each was trained.

Generated from rl755/zoo/rows.py by `python scripts/dev/zoo_table.py --write`; do not edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl755 import zoo

if TYPE_CHECKING:
    from rl755.models.common.encoder import ObservationEncoder
    from rl755.models.common.sequential import SequentialModel


def raw_rollout_vae_4ld() -> ObservationEncoder:
    r"""tiny ConvVAE, Z = 4, 14,683 params, for smoke runs.

    Trained on `<data_dir>/fake/raw_rollouts/rollouts-{train,validation}*.tfrecord-*`.

    Trained with:

        python scripts/models/train_obs_encoder.py --environment=FAKE_PIXELS --model=vae.Vae \
            --model_dir=<models_dir>/fake/raw_rollout_vae_4ld --train_steps=300 \
            --batch_size=32 --representation_size=4 --save_every_n_steps=100 \
            --obs_sampled_per_rollout=10 --learning_rate=3e-3

    Loads the newest complete checkpoint of `<models_dir>/fake/raw_rollout_vae_4ld/`, or without
    one the shipped copy `rl755/zoo/shipped/fake/raw_rollout_vae_4ld/` (float16 weights) if
    there is one (`rl755.zoo.get('FAKE_PIXELS', 'raw_rollout_vae_4ld')()`) and returns an
    ObservationEncoder (rl755.models.common.encoder), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    Rollouts it encodes (scripts/data_gen/encode_raw_rollouts.py --model=raw_rollout_vae_4ld)
    are `--rollouts_dataset=RawRolloutVae4ld`.
    """
    return zoo.get("FAKE_PIXELS", "raw_rollout_vae_4ld").load()


def mdn_rnn_vae_4ld() -> SequentialModel:
    r"""tiny MDN-RNN (LSTM 16, 3 Gaussians), z sampled from the VAE posterior; the pipeline's `tiny`
    preset trains it.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=FAKE_PIXELS \
            --model=mdn_rnn.mdn_rnn --model_dir=<models_dir>/fake/mdn_rnn_vae_4ld \
            --rollouts_dataset=RawRolloutVae4ld --train_steps=200 --batch_size=8 \
            --sequence_length=8 --save_every_n_steps=100 --sample_observations

    Loads the newest complete checkpoint of `<models_dir>/fake/mdn_rnn_vae_4ld/`, or without one
    the shipped copy `rl755/zoo/shipped/fake/mdn_rnn_vae_4ld/` (float16 weights) if there is one
    (`rl755.zoo.get('FAKE_PIXELS', 'mdn_rnn_vae_4ld')()`) and returns a SequentialModel
    (rl755.models.common.sequential), weights loaded; the exact flags, data and git commit of
    the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("FAKE_PIXELS", "mdn_rnn_vae_4ld").load()


def mdn_rnn_with_heads_vae_4ld() -> SequentialModel:
    r"""the tiny MDN-RNN with reward and episode-end heads, for dream training.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=FAKE_PIXELS \
            --model=mdn_rnn.mdn_rnn_with_heads \
            --model_dir=<models_dir>/fake/mdn_rnn_with_heads_vae_4ld \
            --rollouts_dataset=RawRolloutVae4ld --train_steps=200 --batch_size=8 \
            --sequence_length=8 --save_every_n_steps=100 --sample_observations

    Loads the newest complete checkpoint of `<models_dir>/fake/mdn_rnn_with_heads_vae_4ld/`, or
    without one the shipped copy `rl755/zoo/shipped/fake/mdn_rnn_with_heads_vae_4ld/` (float16
    weights) if there is one (`rl755.zoo.get('FAKE_PIXELS', 'mdn_rnn_with_heads_vae_4ld')()`)
    and returns a SequentialModel (rl755.models.common.sequential), weights loaded; the exact
    flags, data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("FAKE_PIXELS", "mdn_rnn_with_heads_vae_4ld").load()


def linear_controller_vae():
    r"""a V-only LinearController (4 x 3 + 3 = 15 params), CMA-ES in the fake environment (a smoke
    run of stage 5).

    Trained with:

        python scripts/models/train_controller.py --environment=FAKE_PIXELS \
            --model_dir=<models_dir>/fake/linear_controller_vae --encoder=raw_rollout_vae_4ld \
            --sequential_model=none --cma_population_size=8 --cma_trials_per_member=2 \
            --cma_generations=10 --rollout_max_steps=24 --eval_every=5 --eval_episodes=8 \
            --parallelism=0

    Loads the newest complete checkpoint of `<models_dir>/fake/linear_controller_vae/`, or
    without one the shipped copy `rl755/zoo/shipped/fake/linear_controller_vae/` (float16
    weights) if there is one (`rl755.zoo.get('FAKE_PIXELS', 'linear_controller_vae')()`) and
    returns an rl755.controller.saved.TrainedController (controller, params [N], meta); the
    exact flags, data and git commit of the run are in its runs/*.json. A missing model fails
    with the command above.
    """
    return zoo.get("FAKE_PIXELS", "linear_controller_vae").load()


def linear_controller_vae_mdn_rnn():
    r"""LinearController on [z, h], CMA-ES in the fake environment (the pipeline's `tiny` preset).

    Trained with:

        python scripts/models/train_controller.py --environment=FAKE_PIXELS \
            --model_dir=<models_dir>/fake/linear_controller_vae_mdn_rnn \
            --encoder=raw_rollout_vae_4ld --sequential_model=mdn_rnn_vae_4ld \
            --cma_population_size=4 --cma_trials_per_member=1 --cma_generations=2 \
            --rollout_max_steps=24

    Loads the newest complete checkpoint of `<models_dir>/fake/linear_controller_vae_mdn_rnn/`,
    or without one the shipped copy `rl755/zoo/shipped/fake/linear_controller_vae_mdn_rnn/`
    (float16 weights) if there is one (`rl755.zoo.get('FAKE_PIXELS',
    'linear_controller_vae_mdn_rnn')()`) and returns an rl755.controller.saved.TrainedController
    (controller, params [N], meta); the exact flags, data and git commit of the run are in its
    runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("FAKE_PIXELS", "linear_controller_vae_mdn_rnn").load()
