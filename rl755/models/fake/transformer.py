"""Tiny causal transformers over FAKE_PIXELS encoded rollouts (Z = 4, A = 3), for tests.

`--environment=FAKE_PIXELS --model=transformer.base_deterministic_transformer`: the same
functions as rl755/models/car_racing/transformer.py at toy size (window 8).
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import deterministic_transformer

REPRESENTATION_SIZE = 4  # rl755.models.fake.vae.Vae's default
ACTION_SIZE = Environments.FAKE_PIXELS.action_shape[0]


def base_deterministic_transformer(**kwargs):
    """2 layers, 16 wide, 2 heads, window 8."""
    args = dict(
        representation_size=REPRESENTATION_SIZE,
        action_size=ACTION_SIZE,
        num_layers=2,
        model_dim=16,
        num_heads=2,
        window=8,
        name="fake_deterministic_transformer",
    )
    args.update(kwargs)
    return deterministic_transformer(**args)


def base_deterministic_transformer_with_heads(**kwargs):
    """The tiny transformer plus reward and episode-end heads."""
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    return base_deterministic_transformer(**kwargs)
