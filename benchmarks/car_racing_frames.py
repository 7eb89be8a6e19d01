"""Real CarRacing-v3 frames for the encoder benchmarks, written as raw rollout shards.

A few short random-policy episodes are played (real frames, ~4 ms per step); rollouts of
`steps` frames are then assembled from those frames (random order) so the shards have the
real size and compressibility of CarRacing data without minutes of simulation.
"""

from __future__ import annotations

import os

import numpy as np

from rl755.common import sharded_io
from rl755.common.structs import Rollout
from rl755.environments import Environments


def play_frames(num_frames: int, seed: int = 0) -> np.ndarray:
    """uint8 [N, 96, 96, 3] frames of CarRacing-v3 under smooth random actions."""
    env = Environments.CAR_RACING.make()
    rng = np.random.default_rng(seed)
    frames = []
    obs, _ = env.reset(seed=seed)
    action = np.array([0.0, 0.5, 0.0], np.float32)
    while len(frames) < num_frames:
        action = np.clip(action + rng.normal(0, 0.2, 3).astype(np.float32), [-1, 0, 0], [1, 1, 1])
        action[2] = 0.0 if rng.random() < 0.9 else action[2]
        obs, _, terminated, truncated, _ = env.step(action)
        frames.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return np.stack(frames)


def write_rollouts(
    directory: str,
    frames: np.ndarray,
    num_files: int,
    rollouts_per_file: int,
    steps: int,
    compression: str = "GZIP",
    split: str = "train",
    seed: int = 0,
) -> int:
    """Writes `num_files` shards of rollouts of `steps` frames drawn from `frames`; returns frames."""
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    total = 0
    for i in range(num_files):
        records = []
        for _ in range(rollouts_per_file):
            idx = rng.integers(0, len(frames), steps)
            r = Rollout(
                obs_l=list(frames[idx]),
                action_l=list(rng.uniform([-1, 0, 0], [1, 1, 1], (steps, 3)).astype(np.float32)),
                reward_l=list(rng.normal(size=steps)),
                done=False,
            )
            records.append(r.serialize())
            total += steps
        path = os.path.join(directory, sharded_io.shard_name(f"rollouts-{split}", i, num_files))
        sharded_io.write_tfrecord(path, records, compression)
    return total
