"""Trained BREAKOUT models, each a no-argument function returning it with weights loaded.

Weights live under the user's models dir (`$RL755_MODELS_DIR` or ~/.config/rl755/config.json,
see rl755.common.config): `<models_dir>/breakout/<function name>/`; the newest complete
checkpoint is loaded. A function whose weights were never trained fails with the command that
trains them. Use them as `--model=` / `--encoder=` / `--sequential_model=` values, or in code:

    from rl755.models.breakout import saved_models
    vae = saved_models.raw_rollout_vae_32ld()
"""

from __future__ import annotations

from rl755.common import config
from rl755.environments import Environments
from rl755.models.common.saved_encoders import load_encoder

ENV = Environments.BREAKOUT


def _model_dir(name: str) -> str:
    return str(config.env_models_dir(ENV.folder_name) / name)


# ==== Observation encoders (stage 2) ===========================================================
def raw_rollout_vae_32ld():
    """The ConvVAE (rl755.models.breakout.vae.Vae), Z = 32, trained on the RepeatRandomPolicy
    raw rollouts (`<data_dir>/breakout/raw_rollouts/rollouts-train*.tfrecord-*`):

        python scripts/models/train_obs_encoder.py --environment=BREAKOUT --model=vae.Vae \
            --model_dir=<models_dir>/breakout/raw_rollout_vae_32ld --train_steps=3000 \
            --batch_size=100 --representation_size=32 --save_every_n_steps=500 \
            --obs_sampled_per_rollout=100 --learning_rate=1e-3
    """
    name = "raw_rollout_vae_32ld"
    return load_encoder(
        ENV,
        "vae.Vae",
        _model_dir(name),
        representation_size=32,
        how_to_train=(
            "python scripts/models/train_obs_encoder.py --environment=BREAKOUT --model=vae.Vae "
            f"--model_dir={_model_dir(name)} --train_steps=3000 --batch_size=100 "
            "--representation_size=32 --save_every_n_steps=500 --obs_sampled_per_rollout=100 "
            "--learning_rate=1e-3"
        ),
    )


# ==== Sequential models (stage 4) ===============================================================
def mdn_rnn_32ld():
    """The MDN-RNN with reward and episode-end heads (`mdn_rnn.mdn_rnn_with_heads`: LSTM 256,
    5 Gaussians per latent dimension) over `raw_rollout_vae_32ld`'s encoded rollouts:

        python scripts/models/train_sequential_model.py --environment=BREAKOUT \
            --model=mdn_rnn.mdn_rnn_with_heads --rollouts_dataset=VaeEncodedRollouts \
            --model_dir=<models_dir>/breakout/mdn_rnn_32ld --train_steps=2000 \
            --batch_size=32 --sequence_length=100 --learning_rate=1e-3
    """
    from rl755.models.common.train_sequential import load_trained_model

    return load_trained_model(_model_dir("mdn_rnn_32ld"))
