"""The MDN-RNN for BREAKOUT: Z = 32, A = 4 (one-hot actions).

LSTM 256 and 5 Gaussians per latent dimension over Z = 32 (World Models' CarRacing size).

`--model=mdn_rnn.mdn_rnn`; `--model=mdn_rnn.mdn_rnn_with_heads` adds the reward and
episode-end heads that dream training (`--mode=dream`) reads. Sampling:
`model.sample_next(h, temperature=tau)` divides the mixture logits by tau and multiplies the
standard deviations by sqrt(tau). Keyword arguments of
`rl755.models.common.sequential_models.mdn_rnn` can be overridden.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import mdn_rnn as _mdn_rnn

REPRESENTATION_SIZE = 32  # rl755.models.breakout.vae.Vae's default
ACTION_SIZE = Environments.BREAKOUT.action_shape[0]


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
