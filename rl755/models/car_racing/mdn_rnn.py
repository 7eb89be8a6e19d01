"""The World Models MDN-RNN for CarRacing (Ha & Schmidhuber 2018): Z = 32, A = 3.

`--model=mdn_rnn.mdn_rnn`: LSTM 256 and a 5-component Gaussian mixture per latent
dimension (422,368 parameters, as in the paper). Sampling: `model.sample_next(h,
temperature=tau)` divides the mixture logits by tau and multiplies the standard deviations
by sqrt(tau). `mdn_rnn_with_heads` also predicts reward and episode end (as the paper's
Doom model did for "done"), which training a controller inside the model needs.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import mdn_rnn as _mdn_rnn

REPRESENTATION_SIZE = 32
ACTION_SIZE = Environments.CAR_RACING.action_shape[0]


def mdn_rnn(**kwargs):
    """LSTM 256 + 5 Gaussians per latent dimension."""
    args = dict(
        representation_size=REPRESENTATION_SIZE,
        action_size=ACTION_SIZE,
        units=256,
        num_components=5,
    )
    args.update(kwargs)
    return _mdn_rnn(**args)


def mdn_rnn_with_heads(**kwargs):
    """The MDN-RNN plus reward and episode-end heads (for dream training)."""
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    return mdn_rnn(**kwargs)
