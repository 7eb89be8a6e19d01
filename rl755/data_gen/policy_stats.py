"""How much of the world a random policy shows: statistics of its rollouts.

policy_fn = resolve_policy("CAR_RACING", "HastingsRandomPolicy")
stats = measure_policy(Environments.CAR_RACING, policy_fn, num_rollouts=3, max_steps=300, seed=0)
stats["road_fraction"]     # share of frames with grey road just ahead of the car
stats["tiles_per_rollout"]  # track tiles visited per rollout (driving forward)
stats["action_autocorr"]   # lag-1 autocorrelation of actions, per dimension [A]
"""

from __future__ import annotations

import numpy as np

from rl755.data_gen.episodes import rollout_seed, run_episode
from rl755.environments import Environments
from rl755.policies.base import PolicyFn, build_policy

# CarRacing-v3 96x96 frames: the car sits at rows ~66-77, columns ~45-50; this patch is the
# road just ahead of it. Road is grey (r = g = b ~ 100-110); grass is green (102, 204/229, 102).
_AHEAD_ROWS = slice(56, 64)
_AHEAD_COLS = slice(44, 52)


def car_racing_road_fraction(frames: np.ndarray) -> float:
    """Share of frames (uint8 [T, 96, 96, 3]) whose patch ahead of the car is mostly road."""
    patch = frames[:, _AHEAD_ROWS, _AHEAD_COLS, :].astype(np.int16)  # [T, 8, 8, 3]
    r, g, b = patch[..., 0], patch[..., 1], patch[..., 2]
    grey = (np.abs(r - g) < 12) & (np.abs(g - b) < 12) & (r > 80) & (r < 130)
    return float(np.mean(grey.mean(axis=(1, 2)) > 0.5))


def action_autocorrelation(actions: np.ndarray) -> np.ndarray:
    """Lag-1 autocorrelation per action dimension of float [T, A] actions: [A] (0 if constant)."""
    a = actions - actions.mean(axis=0, keepdims=True)
    num = (a[1:] * a[:-1]).sum(axis=0)
    den = (a * a).sum(axis=0)
    return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0)


def measure_policy(
    environment: Environments,
    policy_fn: PolicyFn,
    num_rollouts: int,
    max_steps: int,
    seed: int = 0,
) -> dict:
    """Runs `num_rollouts` rollouts serially and summarizes them (see module docstring)."""
    env = environment.make()
    policy = build_policy(policy_fn)
    road, tiles, returns, autocorr = [], [], [], []
    try:
        for i in range(num_rollouts):
            rollout = run_episode(env, policy, max_steps, rollout_seed(seed, i))
            frames = np.stack(rollout.obs_l)
            actions = np.stack(rollout.action_l)
            if environment is Environments.CAR_RACING:
                road.append(car_racing_road_fraction(frames))
                tiles.append(int(env.unwrapped.tile_visited_count))
            returns.append(float(np.sum(rollout.reward_l)))
            autocorr.append(action_autocorrelation(actions))
    finally:
        env.close()
    out = {
        "return_per_rollout": float(np.mean(returns)),
        "action_autocorr": [round(float(x), 3) for x in np.mean(autocorr, axis=0)],
    }
    if road:
        out["road_fraction"] = float(np.mean(road))
        out["tiles_per_rollout"] = float(np.mean(tiles))
    return out
