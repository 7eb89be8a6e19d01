"""Helpers for the encoder tests: fake raw rollouts on disk and tiny encoder checkpoints."""

from __future__ import annotations

import os

import numpy as np

from rl755.common import sharded_io
from rl755.common.structs import Rollout
from rl755.environments import Environments

ENV = Environments.FAKE_PIXELS


def fake_rollout(seed: int, max_steps: int | None = None) -> Rollout:
    """One FAKE_PIXELS rollout under random actions (<= 24 steps, unique actions per seed)."""
    env = ENV.make()
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    r = Rollout()
    for _ in range(max_steps or 10**6):
        a = rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32)
        r.obs_l.append(obs)
        r.action_l.append(a)
        obs, reward, terminated, truncated, _ = env.step(a)
        r.reward_l.append(float(reward))
        if terminated or truncated:
            r.done = bool(terminated)
            break
    env.close()
    return r


def write_raw_rollouts(
    directory, split: str, num_files: int, per_file: int, seed: int = 0, compression: str = ""
) -> list[Rollout]:
    """Writes rollouts-<split>.tfrecord-0000i-of-n shards; returns the rollouts in file order."""
    os.makedirs(directory, exist_ok=True)
    rollouts = []
    for i in range(num_files):
        batch = [fake_rollout(seed * 10_000 + i * 100 + j) for j in range(per_file)]
        rollouts.extend(batch)
        path = os.path.join(
            str(directory), sharded_io.shard_name(f"rollouts-{split}", i, num_files)
        )
        sharded_io.write_tfrecord(path, [r.serialize() for r in batch], compression)
    return rollouts


def pattern(directory) -> str:
    return os.path.join(str(directory), "rollouts-{split}*.tfrecord-*")


def save_untrained_vae(model_dir, representation_size: int = 4, seed: int = 0):
    """A fake `vae.Vae` with random weights saved as checkpoint 1 of model_dir; returns it."""
    import keras

    from rl755.common import checkpoints
    from rl755.models import catalogue

    keras.utils.set_random_seed(seed)
    vae = catalogue.build(ENV, "vae.Vae", representation_size=representation_size)
    vae.build_for_frames()
    checkpoints.save_checkpoint(
        str(model_dir),
        1,
        vae,
        {"model": "vae.Vae", "environment": ENV.name, "representation_size": representation_size},
    )
    return vae
