"""Trained DOOM_TAKE_COVER models, each a no-argument function returning it with weights loaded.

Weights live under the user's models dir (`$RL755_MODELS_DIR` or ~/.config/rl755/config.json,
see rl755.common.config): `<models_dir>/doom_take_cover/<function name>/`; the newest complete
checkpoint is loaded. Use them as `--model=` / `--encoder=` / `--sequential_model=` values, or
in code:

    from rl755.models.doom_take_cover import saved_models
    vae = saved_models.raw_rollout_vae_64ld()
    mdn_rnn = saved_models.mdn_rnn_64ld()

The exact flags, data and git commit of the run that produced the weights are in the model
dir's `runs/*.json`.
"""

from __future__ import annotations

from rl755.common import config
from rl755.environments import Environments
from rl755.models.common.saved_encoders import load_encoder

ENV = Environments.DOOM_TAKE_COVER


def _model_dir(name: str) -> str:
    return str(config.env_models_dir(ENV.folder_name) / name)


# ==== Observation encoders (stage 2) ===========================================================
def raw_rollout_vae_64ld():
    """World Models' Doom ConvVAE (rl755.models.doom_take_cover.vae.Vae), Z = 64.

    Trained on 400 RepeatRandomPolicy raw rollouts (128k frames, README 'Adding an
    environment'), `<data_dir>/doom_take_cover/raw_rollouts/rollouts-train*.tfrecord-*`
    (validation loss 43.1 after 1500 steps, ~96k frames seen):

        python scripts/models/train_obs_encoder.py --environment=DOOM_TAKE_COVER \
            --model=vae.Vae --model_dir=<models_dir>/doom_take_cover/raw_rollout_vae_64ld \
            --train_steps=1500 --batch_size=64 --representation_size=64 \
            --save_every_n_steps=250 --obs_sampled_per_rollout=100 --learning_rate=1e-3
    """
    name = "raw_rollout_vae_64ld"
    return load_encoder(
        ENV,
        "vae.Vae",
        _model_dir(name),
        representation_size=64,
        how_to_train=(
            "python scripts/models/train_obs_encoder.py --environment=DOOM_TAKE_COVER "
            f"--model=vae.Vae --model_dir={_model_dir(name)} --train_steps=1500 "
            "--batch_size=64 --representation_size=64 --save_every_n_steps=250 "
            "--obs_sampled_per_rollout=100 --learning_rate=1e-3"
        ),
    )


# ==== Sequential models (stage 4) ===============================================================
def mdn_rnn_64ld():
    """The MDN-RNN with reward and episode-end heads (`mdn_rnn.mdn_rnn_with_heads`: LSTM 512,
    5 Gaussians per latent dimension) over `raw_rollout_vae_64ld`'s encoded rollouts:

        python scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER \
            --model=mdn_rnn.mdn_rnn_with_heads --rollouts_dataset=VaeEncodedRollouts \
            --model_dir=<models_dir>/doom_take_cover/mdn_rnn_64ld --train_steps=600 \
            --batch_size=32 --sequence_length=100 --learning_rate=1e-3

    (validation loss -2.38 after 600 steps). Trained with today's slice sampler (slices start
    anywhere in a rollout, so episode ends are seen as often as other steps), its done head
    predicts 0.0033 per step on the validation rollouts against a real hazard of 0.0038. (A
    model trained before that fix predicted 0.0004; `mdn_rnn_64ld_end_weighted` was the
    workaround.) README "Adding an environment" has what a dream-trained controller does with it.
    """
    from rl755.models.common.train_sequential import load_trained_model

    return load_trained_model(_model_dir("mdn_rnn_64ld"))


def mdn_rnn_64ld_end_weighted():
    """`mdn_rnn_64ld` fine-tuned for 200 more steps with episode ends weighted 50x
    (`mdn_rnn.mdn_rnn_with_heads_end_weighted`), so its done probabilities match the real
    hazard (see that function). Made by copying `mdn_rnn_64ld`'s model dir, naming the new
    model function in its sequential_model.json, and resuming:

        python scripts/models/train_sequential_model.py --environment=DOOM_TAKE_COVER \
            --model=mdn_rnn.mdn_rnn_with_heads_end_weighted --rollouts_dataset=RawRolloutVae64ld \
            --model_dir=<models_dir>/doom_take_cover/mdn_rnn_64ld_end_weighted --train_steps=800 \
            --batch_size=32 --sequence_length=100 --learning_rate=1e-3
    """
    from rl755.models.common.train_sequential import load_trained_model

    return load_trained_model(_model_dir("mdn_rnn_64ld_end_weighted"))
