"""Trained FAKE_PIXELS models (tests and smoke runs), each a no-argument function.

Weights: `<models_dir>/fake/<function name>/model-XXX.weights.h5` (see rl755.common.config);
the newest complete checkpoint is loaded.
"""

from __future__ import annotations

from rl755.common import config
from rl755.environments import Environments
from rl755.models.common.saved_encoders import load_encoder

ENV = Environments.FAKE_PIXELS


def _model_dir(name: str) -> str:
    return str(config.env_models_dir(ENV.folder_name) / name)


# ==== Observation encoders (stage 2) ===========================================================
def raw_rollout_vae_4ld():
    """The tiny ConvVAE (rl755.models.fake.vae.Vae), Z = 4, trained on fake raw rollouts:

        python scripts/models/train_obs_encoder.py --environment=FAKE_PIXELS --model=vae.Vae \
            --model_dir=<models_dir>/fake/raw_rollout_vae_4ld --train_steps=300 \
            --batch_size=32 --representation_size=4 --save_every_n_steps=100 \
            --obs_sampled_per_rollout=10 --learning_rate=3e-3

    on `<data_dir>/fake/raw_rollouts/rollouts-{train,validation}*.tfrecord-*`.
    """
    name = "raw_rollout_vae_4ld"
    return load_encoder(
        ENV,
        "vae.Vae",
        _model_dir(name),
        representation_size=4,
        how_to_train=(
            "python scripts/models/train_obs_encoder.py --environment=FAKE_PIXELS --model=vae.Vae "
            f"--model_dir={_model_dir(name)} --train_steps=300 --batch_size=32 "
            "--representation_size=4 --save_every_n_steps=100 --obs_sampled_per_rollout=10 "
            "--learning_rate=3e-3"
        ),
    )


# ==== Sequential models (stage 4) ==============================================================
# Trained with scripts/models/train_sequential_model.py on rollouts encoded by
# raw_rollout_vae_4ld (--rollouts_dataset=RawRolloutVae4ld); each loads the newest complete
# checkpoint of `<models_dir>/fake/<function name>/`.
def _load_sequential(name: str, model: str, model_fn, extra: str = ""):
    from rl755.models.common.train_sequential import load_trained_model

    try:
        return load_trained_model(_model_dir(name), model_fn)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{e} Train it first: python scripts/models/train_sequential_model.py "
            f"--environment=FAKE_PIXELS --model={model} --rollouts_dataset=RawRolloutVae4ld "
            f"--model_dir={_model_dir(name)} --train_steps=200 --batch_size=8 "
            f"--sequence_length=8 --save_every_n_steps=100{extra}"
        ) from e


def mdn_rnn_vae_4ld():
    """The tiny MDN-RNN (mdn_rnn.mdn_rnn) on raw_rollout_vae_4ld encodings, z sampled from
    the VAE posterior (--sample_observations); the pipeline's `tiny` preset trains it."""
    from rl755.models.fake import mdn_rnn

    return _load_sequential(
        "mdn_rnn_vae_4ld", "mdn_rnn.mdn_rnn", mdn_rnn.mdn_rnn, extra=" --sample_observations"
    )


def mdn_rnn_with_heads_vae_4ld():
    """The tiny MDN-RNN with reward and episode-end heads, for dream training."""
    from rl755.models.fake import mdn_rnn

    return _load_sequential(
        "mdn_rnn_with_heads_vae_4ld",
        "mdn_rnn.mdn_rnn_with_heads",
        mdn_rnn.mdn_rnn_with_heads,
        extra=" --sample_observations",
    )


# ==== Controllers (stage 5) ====================================================================
# Each returns an rl755.controller.saved.TrainedController; see the car_racing file.
def linear_controller_vae():
    """A V-only LinearController (4 x 3 + 3 = 15 parameters) on raw_rollout_vae_4ld, trained
    with CMA-ES in the fake environment (a smoke run of stage 5)."""
    from rl755.controller.saved import load_trained_controller

    name = "linear_controller_vae"
    return load_trained_controller(
        _model_dir(name),
        how_to_train=(
            "python scripts/models/train_controller.py --environment=FAKE_PIXELS "
            f"--model_dir={_model_dir(name)} --encoder=raw_rollout_vae_4ld "
            "--sequential_model=none --cma_population_size=8 --cma_trials_per_member=2 "
            "--cma_generations=10 --rollout_max_steps=24 --eval_every=5 --eval_episodes=8 "
            "--parallelism=0"
        ),
    )


def linear_controller_vae_mdn_rnn():
    """LinearController on [z, h] over raw_rollout_vae_4ld + mdn_rnn_vae_4ld, CMA-ES in the
    fake environment (the pipeline's `tiny` preset)."""
    from rl755.controller.saved import load_trained_controller

    name = "linear_controller_vae_mdn_rnn"
    return load_trained_controller(
        _model_dir(name),
        how_to_train=(
            "python scripts/models/train_controller.py --environment=FAKE_PIXELS "
            f"--model_dir={_model_dir(name)} --encoder=raw_rollout_vae_4ld "
            "--sequential_model=mdn_rnn_vae_4ld --cma_population_size=4 "
            "--cma_trials_per_member=1 --cma_generations=2 --rollout_max_steps=24"
        ),
    )
