"""The MDN-RNN for DOOM_TAKE_COVER: Z = 64, A = 3 (one-hot actions).

World Models' DoomTakeCover model: LSTM 512 and 5 Gaussians per latent dimension, Z = 64,
with an episode-end head (the paper's Doom MDN-RNN predicts `done`, which is what lets a
controller learn to survive entirely inside the model).

`--model=mdn_rnn.mdn_rnn`; `--model=mdn_rnn.mdn_rnn_with_heads` adds the reward and
episode-end heads that dream training (`--mode=dream`) reads. Sampling:
`model.sample_next(h, temperature=tau)` divides the mixture logits by tau and multiplies the
standard deviations by sqrt(tau). Keyword arguments of
`rl755.models.common.sequential_models.mdn_rnn` can be overridden.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import mdn_rnn as _mdn_rnn

REPRESENTATION_SIZE = 64  # rl755.models.doom_take_cover.vae.Vae's default
ACTION_SIZE = Environments.DOOM_TAKE_COVER.action_shape[0]


def mdn_rnn(**kwargs):
    """LSTM 512 + 5 Gaussians per latent dimension."""
    args = dict(
        representation_size=REPRESENTATION_SIZE,
        action_size=ACTION_SIZE,
        units=512,
        num_components=5,
    )
    args.update(kwargs)
    return _mdn_rnn(**args)


def mdn_rnn_with_heads(**kwargs):
    """The MDN-RNN plus reward and episode-end heads (for dream training).

    The episode-end head is trained with unweighted cross-entropy (`done_pos_weight=1`, not
    the library's default 10): dream rollouts end by drawing Bernoulli(done_prob) every
    step, so the probability must be calibrated. With a positive weight w the head predicts
    about w times the true hazard (a random agent dies about once in 300 steps), and
    dreamt episodes would end some w times too early.
    """
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    kwargs.setdefault("done_pos_weight", 1.0)
    return mdn_rnn(**kwargs)


def mdn_rnn_with_heads_end_weighted(**kwargs):
    """`mdn_rnn_with_heads` with episode ends weighted 50x in the loss.

    `get_autoregressive_slices(L)` starts a slice uniformly in [0, n - L], so a rollout's last
    step (the only one with done = 1) is in a slice about L * (n - L + 1) / n times less often
    than an average step: ~70x for L = 100 and Doom's random rollouts (n ~ 320). Weighting
    ends by 50 undoes most of that bias, so the head's probabilities come out near the real
    hazard (the unweighted head, trained on such slices, predicted 0.0004 per step against
    a real 0.0038).
    """
    kwargs.setdefault("done_pos_weight", 50.0)
    return mdn_rnn_with_heads(**kwargs)
