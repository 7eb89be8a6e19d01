"""A tiny MDN-RNN over FAKE_PIXELS encoded rollouts (Z = 4, A = 3), for tests:
LSTM 16 and 3 Gaussians per latent dimension."""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import mdn_rnn as _mdn_rnn

REPRESENTATION_SIZE = 4  # rl755.models.fake.vae.Vae's default
ACTION_SIZE = Environments.FAKE_PIXELS.action_shape[0]


def mdn_rnn(**kwargs):
    args = dict(
        representation_size=REPRESENTATION_SIZE,
        action_size=ACTION_SIZE,
        units=16,
        num_components=3,
    )
    args.update(kwargs)
    return _mdn_rnn(**args)


def mdn_rnn_with_heads(**kwargs):
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    return mdn_rnn(**kwargs)
