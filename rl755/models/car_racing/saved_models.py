"""Trained CAR_RACING models (the original interface): one no-argument function per rl755.zoo row
of CAR_RACING; help(<function>) shows how each was trained.

Generated from rl755/zoo/rows.py by `python scripts/dev/zoo_table.py --write`; do not edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl755 import zoo

if TYPE_CHECKING:
    from rl755.models.common.encoder import ObservationEncoder
    from rl755.models.common.sequential import SequentialModel


def raw_rollout_vae_32ld() -> ObservationEncoder:
    r"""World Models ConvVAE, Z = 32, 4,348,547 params, with the paper's settings.

    Trained on the random-policy raw rollouts
    (`<data_dir>/car_racing/raw_rollouts/rollouts-train*.tfrecord-*`, the paper's 10,000
    rollouts of up to 1000 frames): 100,000 steps x 100 frames = 1 pass over 10M frames.

    Trained with:

        python scripts/models/train_obs_encoder.py --environment=CAR_RACING --model=vae.Vae \
            --model_dir=<models_dir>/car_racing/raw_rollout_vae_32ld --train_steps=100000 \
            --batch_size=100 --representation_size=32 --save_every_n_steps=5000 \
            --obs_sampled_per_rollout=100 --learning_rate=1e-4

    Loads the newest complete checkpoint of `<models_dir>/car_racing/raw_rollout_vae_32ld/`, or
    without one the shipped copy `rl755/zoo/shipped/car_racing/raw_rollout_vae_32ld/` (float16
    weights) if there is one (`rl755.zoo.get('CAR_RACING', 'raw_rollout_vae_32ld')()`) and
    returns an ObservationEncoder (rl755.models.common.encoder), weights loaded; the exact
    flags, data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above. Rollouts it encodes (scripts/data_gen/encode_raw_rollouts.py
    --model=raw_rollout_vae_32ld) are `--rollouts_dataset=RawRolloutVae32ld`.
    """
    return zoo.get("CAR_RACING", "raw_rollout_vae_32ld").load()


def mdn_rnn_vae_32ld() -> SequentialModel:
    r"""World Models MDN-RNN (LSTM 256, 5 Gaussians per latent dimension, 422,368 params), z sampled
    from the VAE posterior as in the paper.

    Batch 100 as in the paper; sequences of 32 steps instead of whole episodes, to fit CPU
    memory.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \
            --model=mdn_rnn.mdn_rnn --model_dir=<models_dir>/car_racing/mdn_rnn_vae_32ld \
            --rollouts_dataset=RawRolloutVae32ld --train_steps=20000 --batch_size=100 \
            --sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=1000 \
            --sample_observations

    Loads the newest complete checkpoint of `<models_dir>/car_racing/mdn_rnn_vae_32ld/`, or
    without one the shipped copy `rl755/zoo/shipped/car_racing/mdn_rnn_vae_32ld/` (float16
    weights) if there is one (`rl755.zoo.get('CAR_RACING', 'mdn_rnn_vae_32ld')()`) and returns a
    SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("CAR_RACING", "mdn_rnn_vae_32ld").load()


def mdn_rnn_with_heads_vae_32ld() -> SequentialModel:
    r"""the same MDN-RNN plus reward and episode-end heads, for training controllers inside the
    model.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \
            --model=mdn_rnn.mdn_rnn_with_heads \
            --model_dir=<models_dir>/car_racing/mdn_rnn_with_heads_vae_32ld \
            --rollouts_dataset=RawRolloutVae32ld --train_steps=20000 --batch_size=100 \
            --sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=1000 \
            --sample_observations

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/mdn_rnn_with_heads_vae_32ld/`, or without one the shipped copy
    `rl755/zoo/shipped/car_racing/mdn_rnn_with_heads_vae_32ld/` (float16 weights) if there is
    one (`rl755.zoo.get('CAR_RACING', 'mdn_rnn_with_heads_vae_32ld')()`) and returns a
    SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("CAR_RACING", "mdn_rnn_with_heads_vae_32ld").load()


def base_transformer_vae_32ld() -> SequentialModel:
    r"""base transformer (6 layers x 256, 8 heads, window 128; 4.76M params) predicting differences
    z_{t+1} - z_t.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \
            --model=transformer.base_deterministic_transformer \
            --model_dir=<models_dir>/car_racing/base_transformer_vae_32ld \
            --rollouts_dataset=RawRolloutVae32ld --train_steps=20000 --batch_size=100 \
            --sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=1000 \
            --difference_targets

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/base_transformer_vae_32ld/`, or without one the shipped copy
    `rl755/zoo/shipped/car_racing/base_transformer_vae_32ld/` (float16 weights) if there is one
    (`rl755.zoo.get('CAR_RACING', 'base_transformer_vae_32ld')()`) and returns a SequentialModel
    (rl755.models.common.sequential), weights loaded; the exact flags, data and git commit of
    the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("CAR_RACING", "base_transformer_vae_32ld").load()


def lstm_vae_32ld() -> SequentialModel:
    r"""LSTM 256, regression of z_{t+1}.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \
            --model=lstm.deterministic_lstm --model_dir=<models_dir>/car_racing/lstm_vae_32ld \
            --rollouts_dataset=RawRolloutVae32ld --train_steps=20000 --batch_size=100 \
            --sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=1000

    Loads the newest complete checkpoint of `<models_dir>/car_racing/lstm_vae_32ld/`, or without
    one the shipped copy `rl755/zoo/shipped/car_racing/lstm_vae_32ld/` (float16 weights) if
    there is one (`rl755.zoo.get('CAR_RACING', 'lstm_vae_32ld')()`) and returns a
    SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("CAR_RACING", "lstm_vae_32ld").load()


def linear_controller_vae_mdn_rnn():
    r"""World Models' full agent: LinearController on [z, h] ((32 + 256) x 3 + 3 = 867 params),
    CMA-ES in the real environment (population 64 x 16 trials, the best member tested every 25
    generations).

    Trained with:

        python scripts/models/train_controller.py --environment=CAR_RACING \
            --model_dir=<models_dir>/car_racing/linear_controller_vae_mdn_rnn \
            --encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_vae_32ld \
            --controller=LinearController --mode=real --cma_population_size=64 \
            --cma_trials_per_member=16 --cma_generations=1800 --eval_every=25 \
            --eval_episodes=100 --parallelism=64

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/linear_controller_vae_mdn_rnn/`, or without one the shipped copy
    `rl755/zoo/shipped/car_racing/linear_controller_vae_mdn_rnn/` (float16 weights) if there is
    one (`rl755.zoo.get('CAR_RACING', 'linear_controller_vae_mdn_rnn')()`) and returns an
    rl755.controller.saved.TrainedController (controller, params [N], meta); the exact flags,
    data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("CAR_RACING", "linear_controller_vae_mdn_rnn").load()


def dream_linear_controller_vae_mdn_rnn():
    r"""the same controller trained inside `mdn_rnn_with_heads_vae_32ld` ("dream", temperature 1.15
    as in the paper's Doom experiment), evaluated in the real environment every 25 generations.

    Trained with:

        python scripts/models/train_controller.py --environment=CAR_RACING \
            --model_dir=<models_dir>/car_racing/dream_linear_controller_vae_mdn_rnn \
            --encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_with_heads_vae_32ld \
            --controller=LinearController --mode=dream --temperature=1.15 \
            --cma_population_size=64 --cma_trials_per_member=16 --cma_generations=1800 \
            --eval_every=25 --eval_episodes=100 --parallelism=8

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/dream_linear_controller_vae_mdn_rnn/`, or without one the shipped
    copy `rl755/zoo/shipped/car_racing/dream_linear_controller_vae_mdn_rnn/` (float16 weights)
    if there is one (`rl755.zoo.get('CAR_RACING', 'dream_linear_controller_vae_mdn_rnn')()`) and
    returns an rl755.controller.saved.TrainedController (controller, params [N], meta); the
    exact flags, data and git commit of the run are in its runs/*.json. A missing model fails
    with the command above.
    """
    return zoo.get("CAR_RACING", "dream_linear_controller_vae_mdn_rnn").load()


def hidden_layer_controller_vae():
    r"""the paper's V-only controller: HiddenLayerController (40 hidden units, 1,443 params) on z,
    no sequential model.

    Trained with:

        python scripts/models/train_controller.py --environment=CAR_RACING \
            --model_dir=<models_dir>/car_racing/hidden_layer_controller_vae \
            --encoder=raw_rollout_vae_32ld --sequential_model=none \
            --controller=HiddenLayerController --hidden_units=40 --mode=real \
            --cma_population_size=64 --cma_trials_per_member=16 --cma_generations=1800 \
            --eval_every=25 --eval_episodes=100 --parallelism=64

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/hidden_layer_controller_vae/`, or without one the shipped copy
    `rl755/zoo/shipped/car_racing/hidden_layer_controller_vae/` (float16 weights) if there is
    one (`rl755.zoo.get('CAR_RACING', 'hidden_layer_controller_vae')()`) and returns an
    rl755.controller.saved.TrainedController (controller, params [N], meta); the exact flags,
    data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("CAR_RACING", "hidden_layer_controller_vae").load()


def raw_rollout_vae_32ld_demo() -> ObservationEncoder:
    r"""the `make demo` ConvVAE (Z = 32) of seed 0: 2,000 steps of 32 frames sampled from 40 random
    rollouts of 300 steps; ships in the repository.

    Trained by `python scripts/pipeline.py --preset=demo --seed=0` (its stage 2); that run's
    stage 3 encodes the rollouts with it as `RawRolloutVae32ld`.

    Trained with:

        python scripts/models/train_obs_encoder.py --environment=CAR_RACING --model=vae.Vae \
            --model_dir=<models_dir>/car_racing/raw_rollout_vae_32ld_demo --train_steps=2000 \
            --batch_size=32 --representation_size=32 --save_every_n_steps=500 \
            --obs_sampled_per_rollout=50 --learning_rate=1e-3

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/raw_rollout_vae_32ld_demo/`, or without one the shipped copy
    `rl755/zoo/shipped/car_racing/raw_rollout_vae_32ld_demo/` (float16 weights) if there is one
    (`rl755.zoo.get('CAR_RACING', 'raw_rollout_vae_32ld_demo')()`) and returns an
    ObservationEncoder (rl755.models.common.encoder), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    Rollouts it encodes (scripts/data_gen/encode_raw_rollouts.py
    --model=raw_rollout_vae_32ld_demo) are `--rollouts_dataset=RawRolloutVae32ldDemo`.
    """
    return zoo.get("CAR_RACING", "raw_rollout_vae_32ld_demo").load()


def mdn_rnn_vae_32ld_demo() -> SequentialModel:
    r"""the `make demo` MDN-RNN (LSTM 256, 5 Gaussians) of seed 0: 1,500 steps of 16 x 32 on the
    demo's rollouts encoded by its VAE (raw_rollout_vae_32ld_demo, which the demo's run
    directory names raw_rollout_vae_32ld, hence the dataset RawRolloutVae32ld); ships in the
    repository.

    Trained by `python scripts/pipeline.py --preset=demo --seed=0` (its stage 4), inside that
    run's directory, where the encoded dataset is RawRolloutVae32ld.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \
            --model=mdn_rnn.mdn_rnn --model_dir=<models_dir>/car_racing/mdn_rnn_vae_32ld_demo \
            --rollouts_dataset=RawRolloutVae32ld --train_steps=1500 --batch_size=16 \
            --sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=500 \
            --sample_observations

    Loads the newest complete checkpoint of `<models_dir>/car_racing/mdn_rnn_vae_32ld_demo/`, or
    without one the shipped copy `rl755/zoo/shipped/car_racing/mdn_rnn_vae_32ld_demo/` (float16
    weights) if there is one (`rl755.zoo.get('CAR_RACING', 'mdn_rnn_vae_32ld_demo')()`) and
    returns a SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags,
    data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("CAR_RACING", "mdn_rnn_vae_32ld_demo").load()


def raw_rollout_vae_32ld_750() -> ObservationEncoder:
    r"""ConvVAE (Z = 32) on 750 HastingsRandomPolicy rollouts of 1,000 steps: a second CarRacing
    world model, 19x the demo's frames.

    Collected by collect_rollouts.py --environment=CAR_RACING --policy=HastingsRandomPolicy
    --max_steps=1000 --out_format=tfrecord, 500 rollouts at --seed=755 and 250 at --seed=756
    into the default raw_rollouts dir. Ships in the repository, so the real-environment run on
    it resumes anywhere (experiments/car_racing/real_controller_750/README.md has where it
    stands).

    Trained with:

        python scripts/models/train_obs_encoder.py --environment=CAR_RACING --model=vae.Vae \
            --model_dir=<models_dir>/car_racing/raw_rollout_vae_32ld_750 --train_steps=4000 \
            --batch_size=100 --representation_size=32 --save_every_n_steps=500 \
            --obs_sampled_per_rollout=100 --learning_rate=1e-3

    Loads the newest complete checkpoint of `<models_dir>/car_racing/raw_rollout_vae_32ld_750/`,
    or without one the shipped copy `rl755/zoo/shipped/car_racing/raw_rollout_vae_32ld_750/`
    (float16 weights) if there is one (`rl755.zoo.get('CAR_RACING',
    'raw_rollout_vae_32ld_750')()`) and returns an ObservationEncoder
    (rl755.models.common.encoder), weights loaded; the exact flags, data and git commit of the
    run are in its runs/*.json. A missing model fails with the command above. Rollouts it
    encodes (scripts/data_gen/encode_raw_rollouts.py --model=raw_rollout_vae_32ld_750) are
    `--rollouts_dataset=RawRolloutVae32ld750`.
    """
    return zoo.get("CAR_RACING", "raw_rollout_vae_32ld_750").load()


def mdn_rnn_with_heads_vae_32ld_750() -> SequentialModel:
    r"""MDN-RNN (LSTM 256, 5 Gaussians, reward and episode-end heads) on the 750 rollouts encoded by
    raw_rollout_vae_32ld_750, for real and dream controllers; ships in the repository.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \
            --model=mdn_rnn.mdn_rnn_with_heads \
            --model_dir=<models_dir>/car_racing/mdn_rnn_with_heads_vae_32ld_750 \
            --rollouts_dataset=RawRolloutVae32ld750 --train_steps=4000 --batch_size=32 \
            --sequence_length=200 --learning_rate=1e-3 --save_every_n_steps=500 \
            --sample_observations

    Loads the newest complete checkpoint of
    `<models_dir>/car_racing/mdn_rnn_with_heads_vae_32ld_750/`, or without one the shipped copy
    `rl755/zoo/shipped/car_racing/mdn_rnn_with_heads_vae_32ld_750/` (float16 weights) if there
    is one (`rl755.zoo.get('CAR_RACING', 'mdn_rnn_with_heads_vae_32ld_750')()`) and returns a
    SequentialModel (rl755.models.common.sequential), weights loaded; the exact flags, data and
    git commit of the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("CAR_RACING", "mdn_rnn_with_heads_vae_32ld_750").load()


def real_controller_p4():
    r"""the first CarRacing agent, shipped as real_controller before it: LinearController on [z, h]
    of the demo's models, CMA-ES in the real environment, 4 x 4 episodes of 1,000 steps x 100
    generations, from `make demo`'s controller; real_controller starts from it; ships in the
    repository.

    Reproduce its score with no training: python scripts/models/evaluate_controller.py
    --environment=CAR_RACING --saved_controller=real_controller_p4 --num_episodes=100
    --seed=1000: 774.0 +- 161.2 (650.3 +- 252.3 after 40 generations). --initial_params is make
    demo's seed-0 controller (run make demo first; on another kind of CPU it trains another
    one). Its last checkpoint: experiments/car_racing/real_controller/ (its CMA-ES state is in
    commit e84268c); copy it to the row's dir and rerun with more generations to resume exactly.

    Trained with:

        python scripts/models/train_controller.py --environment=CAR_RACING \
            --model_dir=<models_dir>/car_racing/real_controller_p4 \
            --encoder=raw_rollout_vae_32ld_demo --sequential_model=mdn_rnn_vae_32ld_demo \
            --controller=LinearController --mode=real --cma_population_size=4 \
            --cma_trials_per_member=4 --cma_generations=100 --rollout_max_steps=1000 \
            --sigma=0.1 --eval_every=5 --eval_episodes=8 --parallelism=2 --select_episodes=16 \
            --select_top=4 \
            --initial_params=runs/demo/models/car_racing/linear_controller_vae_mdn_rnn

    Loads the newest complete checkpoint of `<models_dir>/car_racing/real_controller_p4/`, or
    without one the shipped copy `rl755/zoo/shipped/car_racing/real_controller_p4/` (float16
    weights) if there is one (`rl755.zoo.get('CAR_RACING', 'real_controller_p4')()`) and returns
    an rl755.controller.saved.TrainedController (controller, params [N], meta); the exact flags,
    data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("CAR_RACING", "real_controller_p4").load()


def real_controller():
    r"""the CarRacing agent: real_controller_p4 trained on by CMA-ES in the real environment with
    population 8 x 4 episodes of 1,000 steps and sigma0 0.03 (26 generations), the demo's
    encoder and MDN-RNN; ships in the repository.

    Reproduce its score with no training: python scripts/models/evaluate_controller.py
    --environment=CAR_RACING --saved_controller=real_controller --num_episodes=100 --seed=1000
    (its shipped encoder and MDN-RNN come with it): 800.8 +- 123.9 (real_controller_p4 on the
    same seeds: 774.0 +- 161.2). The run started from the controller then shipped under this
    name, now real_controller_p4 (the same parameters), so its run record names this row's own
    shipped folder. Its last checkpoint: experiments/car_racing/real_controller_p8/ (README: the
    CMA-ES state is in commit e84268c); copy it to the row's dir and rerun with more generations
    to resume exactly.

    Trained with:

        python scripts/models/train_controller.py --environment=CAR_RACING \
            --model_dir=<models_dir>/car_racing/real_controller \
            --encoder=raw_rollout_vae_32ld_demo --sequential_model=mdn_rnn_vae_32ld_demo \
            --controller=LinearController --mode=real --cma_population_size=8 \
            --cma_trials_per_member=4 --cma_generations=26 --rollout_max_steps=1000 \
            --sigma=0.03 --eval_every=5 --eval_episodes=8 --parallelism=2 --select_episodes=16 \
            --select_top=4 --initial_params=rl755/zoo/shipped/car_racing/real_controller_p4

    Loads the newest complete checkpoint of `<models_dir>/car_racing/real_controller/`, or
    without one the shipped copy `rl755/zoo/shipped/car_racing/real_controller/` (float16
    weights) if there is one (`rl755.zoo.get('CAR_RACING', 'real_controller')()`) and returns an
    rl755.controller.saved.TrainedController (controller, params [N], meta); the exact flags,
    data and git commit of the run are in its runs/*.json. A missing model fails with the
    command above.
    """
    return zoo.get("CAR_RACING", "real_controller").load()
