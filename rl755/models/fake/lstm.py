"""A tiny deterministic LSTM over FAKE_PIXELS encoded rollouts (Z = 4, A = 3), for tests."""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import deterministic_lstm as _deterministic_lstm

REPRESENTATION_SIZE = 4  # rl755.models.fake.vae.Vae's default
ACTION_SIZE = Environments.FAKE_PIXELS.action_shape[0]


def deterministic_lstm(**kwargs):
    """LSTM 16 predicting z_{t+1}."""
    args = dict(representation_size=REPRESENTATION_SIZE, action_size=ACTION_SIZE, units=16)
    args.update(kwargs)
    return _deterministic_lstm(**args)


def deterministic_lstm_with_heads(**kwargs):
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    return deterministic_lstm(**kwargs)
