"""Trained CAR_RACING models, each a no-argument function returning it with weights loaded.

Weights live under the user's models dir (`$RL755_MODELS_DIR` or ~/.config/rl755/config.json,
see rl755.common.config): `<models_dir>/car_racing/<function name>/model-XXX.weights.h5`; the
newest complete checkpoint is loaded. Use them as `--model=<function name>` in
scripts/data_gen/encode_raw_rollouts.py, or in code:

    from rl755.models.car_racing import saved_models
    vae = saved_models.raw_rollout_vae_32ld()
"""

from __future__ import annotations

from rl755.common import config
from rl755.environments import Environments
from rl755.models.common.saved_encoders import load_encoder

ENV = Environments.CAR_RACING


def _model_dir(name: str) -> str:
    return str(config.env_models_dir(ENV.folder_name) / name)


# ==== Observation encoders (stage 2) ===========================================================
def raw_rollout_vae_32ld():
    """The World Models ConvVAE (rl755.models.car_racing.vae.Vae), Z = 32, 4,348,547 params.

    Trained on the random-policy raw rollouts
    (`<data_dir>/car_racing/raw_rollouts/rollouts-train*.tfrecord-*`, the paper's 10,000
    rollouts of up to 1000 frames) with the paper's settings:

        python scripts/models/train_obs_encoder.py --environment=CAR_RACING --model=vae.Vae \
            --model_dir=<models_dir>/car_racing/raw_rollout_vae_32ld --train_steps=100000 \
            --batch_size=100 --representation_size=32 --save_every_n_steps=5000 \
            --obs_sampled_per_rollout=100 --learning_rate=1e-4

    (100,000 steps x 100 frames = 1 pass over 10M frames). The exact flags, data pattern and
    git commit of the run that produced the weights are in the model dir's `runs/*.json`.
    """
    name = "raw_rollout_vae_32ld"
    return load_encoder(
        ENV,
        "vae.Vae",
        _model_dir(name),
        representation_size=32,
        how_to_train=(
            "python scripts/models/train_obs_encoder.py --environment=CAR_RACING --model=vae.Vae "
            f"--model_dir={_model_dir(name)} --train_steps=100000 --batch_size=100 "
            "--representation_size=32 --save_every_n_steps=5000 --obs_sampled_per_rollout=100 "
            "--learning_rate=1e-4"
        ),
    )


# ==== Sequential models (stage 4) ==============================================================
# Trained with scripts/models/train_sequential_model.py on the VAE-encoded rollouts
# of saved_models.raw_rollout_vae_32ld (--rollouts_dataset=RawRolloutVae32ld); each loads the newest complete checkpoint of
# `<models_dir>/car_racing/<function name>/` and its `difference_targets` setting.
def _sequential_command(name: str, model: str, extra: str = "") -> str:
    return (
        "python scripts/models/train_sequential_model.py --environment=CAR_RACING "
        f"--model={model} --rollouts_dataset=RawRolloutVae32ld "
        f"--model_dir={_model_dir(name)} --train_steps=20000 --batch_size=100 "
        f"--sequence_length=32 --learning_rate=1e-3 --save_every_n_steps=1000{extra}"
    )


def _load_sequential(name: str, model: str, model_fn, extra: str = ""):
    from rl755.models.common.train_sequential import load_trained_model

    try:
        return load_trained_model(_model_dir(name), model_fn)
    except FileNotFoundError as e:
        raise FileNotFoundError(
            f"{e} Train it first: {_sequential_command(name, model, extra)}"
        ) from e


def mdn_rnn_vae_32ld():
    """The World Models MDN-RNN (mdn_rnn.mdn_rnn: LSTM 256, 5 Gaussians per latent dim,
    422,368 params) on rollouts encoded by `raw_rollout_vae_32ld`, with z sampled from the
    VAE posterior as in the paper (batch 100; sequences of 32 steps instead of the paper's
    whole episodes, to fit CPU memory):

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \\
            --model=mdn_rnn.mdn_rnn --rollouts_dataset=RawRolloutVae32ld \\
            --model_dir=<models_dir>/car_racing/mdn_rnn_vae_32ld --train_steps=20000 \\
            --batch_size=100 --sequence_length=32 --learning_rate=1e-3 --sample_observations

    The exact flags and git commit are in the model dir's `runs/*.json`."""
    from rl755.models.car_racing import mdn_rnn

    return _load_sequential(
        "mdn_rnn_vae_32ld", "mdn_rnn.mdn_rnn", mdn_rnn.mdn_rnn, extra=" --sample_observations"
    )


def mdn_rnn_with_heads_vae_32ld():
    """The MDN-RNN plus reward and episode-end heads (mdn_rnn.mdn_rnn_with_heads), for
    training controllers inside the model; same command as `mdn_rnn_vae_32ld` with
    --model=mdn_rnn.mdn_rnn_with_heads --model_dir=<models_dir>/car_racing/
    mdn_rnn_with_heads_vae_32ld."""
    from rl755.models.car_racing import mdn_rnn

    return _load_sequential(
        "mdn_rnn_with_heads_vae_32ld",
        "mdn_rnn.mdn_rnn_with_heads",
        mdn_rnn.mdn_rnn_with_heads,
        extra=" --sample_observations",
    )


def base_transformer_vae_32ld():
    """transformer.base_deterministic_transformer (6 layers x 256, 8 heads, window 128)
    on `raw_rollout_vae_32ld` encodings, predicting differences z_{t+1} - z_t:

        python scripts/models/train_sequential_model.py --environment=CAR_RACING \\
            --model=transformer.base_deterministic_transformer \\
            --rollouts_dataset=RawRolloutVae32ld \\
            --model_dir=<models_dir>/car_racing/base_transformer_vae_32ld --train_steps=20000 \\
            --batch_size=100 --sequence_length=32 --learning_rate=1e-3 --difference_targets"""
    from rl755.models.car_racing import transformer

    return _load_sequential(
        "base_transformer_vae_32ld",
        "transformer.base_deterministic_transformer",
        transformer.base_deterministic_transformer,
        extra=" --difference_targets",
    )


def lstm_vae_32ld():
    """lstm.deterministic_lstm (LSTM 256, regression of z_{t+1}) on `raw_rollout_vae_32ld`
    encodings; same command as `mdn_rnn_vae_32ld` with --model=lstm.deterministic_lstm
    --model_dir=<models_dir>/car_racing/lstm_vae_32ld."""
    from rl755.models.car_racing import lstm

    return _load_sequential("lstm_vae_32ld", "lstm.deterministic_lstm", lstm.deterministic_lstm)


# ==== Controllers (stage 5) ====================================================================
# Each returns an rl755.controller.saved.TrainedController (controller, params [N], meta naming
# the encoder and sequential model it was trained with). Use as
# `scripts/models/evaluate_controller.py --saved_controller=<function name>`.
def _load_controller(name: str, train_flags: str):
    from rl755.controller.saved import load_trained_controller

    return load_trained_controller(
        _model_dir(name),
        how_to_train=(
            "python scripts/models/train_controller.py --environment=CAR_RACING "
            f"--model_dir={_model_dir(name)} {train_flags}"
        ),
    )


def linear_controller_vae_mdn_rnn():
    """World Models' full agent: LinearController on [z, h] ((32 + 256) x 3 + 3 = 867
    parameters) over raw_rollout_vae_32ld + mdn_rnn_vae_32ld, CMA-ES in the real environment
    with the paper's settings (population 64, 16 trials per member, best member tested every
    25 generations)."""
    return _load_controller(
        "linear_controller_vae_mdn_rnn",
        "--encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_vae_32ld "
        "--controller=LinearController --mode=real --cma_population_size=64 "
        "--cma_trials_per_member=16 --cma_generations=1800 --eval_every=25 --eval_episodes=100 "
        "--parallelism=64",
    )


def dream_linear_controller_vae_mdn_rnn():
    """The same controller trained inside mdn_rnn_with_heads_vae_32ld ("dream", temperature
    1.15 as in the paper's Doom experiment), evaluated in the real environment every 25
    generations."""
    return _load_controller(
        "dream_linear_controller_vae_mdn_rnn",
        "--encoder=raw_rollout_vae_32ld --sequential_model=mdn_rnn_with_heads_vae_32ld "
        "--controller=LinearController --mode=dream --temperature=1.15 "
        "--cma_population_size=64 --cma_trials_per_member=16 --cma_generations=1800 "
        "--eval_every=25 --eval_episodes=100 --parallelism=8",
    )


def hidden_layer_controller_vae():
    """The paper's "V only, z + 40 hidden units" controller (1,443 parameters) on
    raw_rollout_vae_32ld, no sequential model."""
    return _load_controller(
        "hidden_layer_controller_vae",
        "--encoder=raw_rollout_vae_32ld --sequential_model=none "
        "--controller=HiddenLayerController --hidden_units=40 --mode=real "
        "--cma_population_size=64 --cma_trials_per_member=16 --cma_generations=1800 "
        "--eval_every=25 --eval_episodes=100 --parallelism=64",
    )
