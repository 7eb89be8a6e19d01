"""A deterministic LSTM over DOOM_TAKE_COVER's encoded rollouts (Z = 64, A = 3 one-hot).

`--model=lstm.deterministic_lstm`: LSTM 512, regression of z_{t+1} (squared error).
`deterministic_lstm_with_heads` also predicts reward and episode end. Keyword arguments of
`rl755.models.common.sequential_models.deterministic_lstm` can be overridden.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import deterministic_lstm as _deterministic_lstm

REPRESENTATION_SIZE = 64  # rl755.models.doom_take_cover.vae.Vae's default
ACTION_SIZE = Environments.DOOM_TAKE_COVER.action_shape[0]


def deterministic_lstm(**kwargs):
    """LSTM 512 predicting z_{t+1}."""
    args = dict(representation_size=REPRESENTATION_SIZE, action_size=ACTION_SIZE, units=512)
    args.update(kwargs)
    return _deterministic_lstm(**args)


def deterministic_lstm_with_heads(**kwargs):
    """LSTM 512 predicting z_{t+1}, reward and episode end."""
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    return deterministic_lstm(**kwargs)
