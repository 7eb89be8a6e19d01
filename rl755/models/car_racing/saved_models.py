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
