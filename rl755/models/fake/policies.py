"""Rollout policies for FAKE_PIXELS (same names as rl755/models/car_racing/policies.py).

Actions are float32 [3] = [steering in [-1, 1], gas in [0, 1], brake in [0, 1]].
"""

from __future__ import annotations

from rl755.data_gen import policies as _generic


class RandomPolicy(_generic.UniformRandomPolicy):
    """Uniform over the environment's action box, independently at every step."""


class HastingsRandomPolicy(_generic.SmoothNoisePolicy):
    """Smooth Perlin-noise steering (period ~8 steps, the episodes last 24) with gas ~0.5."""

    def __init__(self):
        super().__init__(center=[0.0, 0.5, 0.0], scale=[1.0, 0.3, 0.1], period=[8.0, 12.0, 12.0])
