"""Autoregressive causal transformers over DOOM_TAKE_COVER's encoded rollouts (Z = 64, A = 3 one-hot).

`--environment=DOOM_TAKE_COVER --model=transformer.base_deterministic_transformer`
(scripts/models/train_sequential_model.py). The same size presets as CarRacing
(rl755/models/car_racing/transformer.py; sliding-window attention with ALiBi and a
key/value cache for acting):

    preset   layers  model_dim  heads  window
    tiny        2        64       4      32
    small       4       128       4      64
    base        6       256       8     128

The `*_with_heads` variants also predict reward and episode end (needed to train a
controller inside the model). Every keyword argument of
`rl755.models.common.sequential_models.deterministic_transformer` can be overridden.
"""

from __future__ import annotations

from rl755.environments import Environments
from rl755.models.common.sequential_models import deterministic_transformer

REPRESENTATION_SIZE = 64  # rl755.models.doom_take_cover.vae.Vae's default
ACTION_SIZE = Environments.DOOM_TAKE_COVER.action_shape[0]

_PRESETS = {
    "tiny": dict(num_layers=2, model_dim=64, num_heads=4, window=32),
    "small": dict(num_layers=4, model_dim=128, num_heads=4, window=64),
    "base": dict(num_layers=6, model_dim=256, num_heads=8, window=128),
}


def _make(preset: str, **kwargs):
    args = dict(
        representation_size=REPRESENTATION_SIZE,
        action_size=ACTION_SIZE,
        name=f"{preset}_deterministic_transformer",
        **_PRESETS[preset],
    )
    args.update(kwargs)
    return deterministic_transformer(**args)


def tiny_deterministic_transformer(**kwargs):
    """2 layers, 64 wide, 4 heads, window 32."""
    return _make("tiny", **kwargs)


def small_deterministic_transformer(**kwargs):
    """4 layers, 128 wide, 4 heads, window 64."""
    return _make("small", **kwargs)


def base_deterministic_transformer(**kwargs):
    """6 layers, 256 wide, 8 heads, window 128."""
    return _make("base", **kwargs)


def base_deterministic_transformer_with_heads(**kwargs):
    """The base transformer plus reward and episode-end heads (for dream training)."""
    kwargs.setdefault("predict_reward", True)
    kwargs.setdefault("predict_done", True)
    return _make("base", **kwargs)
