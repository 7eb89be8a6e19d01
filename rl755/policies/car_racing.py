"""The policy tuned for CAR_RACING: `--policy=HastingsRandomPolicy` (registered in
`rl755.policies.registry`; `--policy=RandomPolicy` is the generic uniform one).

    --policy=RandomPolicy          uniform over the action box at every step
    --policy=HastingsRandomPolicy  smooth Perlin-noise driving that follows the track

Actions are float32 [3] = [steering in [-1, 1], gas in [0, 1], brake in [0, 1]].

Measured on CarRacing-v3 (4 rollouts x 300 steps; `benchmarks/policy_coverage.py`):
RandomPolicy's gas and brake cancel out, so the car barely leaves the start (~8 track tiles
visited, frames near-identical); open-loop Perlin noise drives ~20 tiles then leaves the
track (a quarter of frames show road ahead); HastingsRandomPolicy visits ~95 tiles with
road ahead of the car in ~90% of frames, while its actions stay smooth (lag-1
autocorrelation ~0.95).
"""

from __future__ import annotations

import numpy as np

from rl755.policies.generic import SmoothNoisePolicy

# Rows of the 96x96 frame ahead of the car (the car sits at rows ~66-77, columns 45-50).
_AHEAD_ROWS = slice(40, 66)
_CAR_COLUMN = 47.5


class HastingsRandomPolicy(SmoothNoisePolicy):
    """Temporally smooth random driving, in the spirit of the original Perlin-noise policy.

    Steering, gas and brake follow 1-D Perlin noise (steering amplitude `steer_scale`,
    period ~`steer_period` steps; gas around `gas`; no brake), so the car commits to turns
    for tens of steps. On top, steering gets a pull of strength `track_pull` toward the
    grey road visible ahead of the car, so the car drives along the track instead of
    leaving it for the grass within a few seconds; set `track_pull=0` for pure noise.

    Args:
      steer_scale: Perlin amplitude of the steering.
      steer_period: steps between steering lattice points (larger: smoother).
      gas: mean gas; gas noise amplitude is `gas_scale`.
      gas_scale: Perlin amplitude of the gas.
      track_pull: steering added per unit of (road center - car column) / 48.
    """

    def __init__(
        self,
        steer_scale: float = 0.6,
        steer_period: float = 40.0,
        gas: float = 0.3,
        gas_scale: float = 0.2,
        track_pull: float = 1.5,
    ):
        super().__init__(
            center=[0.0, gas, 0.0],
            scale=[steer_scale, gas_scale, 0.0],
            period=[steer_period, 80.0, 80.0],
        )
        self.track_pull = track_pull

    def sample_action(self, obs, step, rollout, **kwargs) -> np.ndarray:
        action = super().sample_action(obs, step, rollout).copy()  # [3]
        if self.track_pull:
            ahead = obs[_AHEAD_ROWS].astype(np.int16)  # [26, 96, 3]
            r, g, b = ahead[..., 0], ahead[..., 1], ahead[..., 2]
            road = (np.abs(r - g) < 12) & (np.abs(g - b) < 12) & (r > 80) & (r < 130)
            cols = np.nonzero(road)[1]
            if cols.size:
                pull = self.track_pull * (cols.mean() - _CAR_COLUMN) / 48.0
                action[0] = np.clip(action[0] + pull, -1.0, 1.0)
        return action
