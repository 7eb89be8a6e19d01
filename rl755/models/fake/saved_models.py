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
