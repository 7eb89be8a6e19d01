"""Held-out encoded rollouts in memory, padded to one length, for evaluating world models.

    data = load_rollouts(builder, split="validation", max_rollouts=100)
    data.z          # float32 [N, T, Z]   z_t (zero past each rollout's end)
    data.actions    # float32 [N, T, A]   a_t
    data.mask       # float32 [N, T]      1 where step t exists
    data.target_mask  # float32 [N, T]    1 where z_{t+1} exists (not the last step)
    data.dones      # float32 [N, T]      1 at the last step of a rollout that terminated

The masks mean what they mean in `EncodedRolloutDatasetBuilder.get_autoregressive_slices`
(rl755/data/common/rollout_datasets.py): the latent prediction of step t is scored where
`target_mask` is 1, reward and episode-end predictions where `mask` is 1. A rollout that hit
its time limit has no episode end (dones all 0).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rl755.common.errors import BadInput


@dataclasses.dataclass(frozen=True)
class Rollouts:
    """N rollouts padded to T steps.

    Attributes:
      z: float32 [N, T, Z], the encoded observations z_0 .. z_{len-1}, zero-padded.
      actions: float32 [N, T, A], a_t (taken after seeing z_t), zero-padded.
      rewards: float32 [N, T], reward_t (follows a_t), zero-padded.
      lengths: int64 [N], the number of steps of each rollout (>= 1).
      terminated: bool [N], the episode ended by termination after its last step (False: a
        time limit or the collection's step limit cut it).
    """

    z: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray

    @property
    def num_rollouts(self) -> int:
        return int(self.z.shape[0])

    @property
    def representation_size(self) -> int:
        return int(self.z.shape[2])

    @property
    def action_size(self) -> int:
        return int(self.actions.shape[2])

    @property
    def mask(self) -> np.ndarray:
        """float32 [N, T]: 1 where step t exists."""
        t = np.arange(self.z.shape[1])[None, :]
        return (t < self.lengths[:, None]).astype(np.float32)

    @property
    def target_mask(self) -> np.ndarray:
        """float32 [N, T]: 1 where z_{t+1} exists."""
        t = np.arange(self.z.shape[1])[None, :]
        return (t < self.lengths[:, None] - 1).astype(np.float32)

    @property
    def dones(self) -> np.ndarray:
        """float32 [N, T]: 1 at the last step of each terminated rollout."""
        t = np.arange(self.z.shape[1])[None, :]
        last = t == self.lengths[:, None] - 1
        return (last & self.terminated[:, None]).astype(np.float32)

    @property
    def next_z(self) -> np.ndarray:
        """float32 [N, T, Z]: z_{t+1} (zero where it does not exist)."""
        out = np.zeros_like(self.z)
        out[:, :-1] = self.z[:, 1:]
        return out * self.target_mask[..., None]


def from_episodes(episodes) -> Rollouts:
    """Rollouts from dicts {"observations": [T, Z], "actions": [T, A], "rewards": [T],
    "done": bool} (what `rollouts_ds` yields, as numpy)."""
    episodes = list(episodes)
    if not episodes:
        raise BadInput("No rollouts to evaluate on (the dataset split is empty).")
    lengths = np.array([len(e["actions"]) for e in episodes], np.int64)
    if lengths.min() < 1:
        raise BadInput("A rollout has no steps.")
    n, t = len(episodes), int(lengths.max())
    z_size = np.asarray(episodes[0]["observations"]).shape[-1]
    a_size = np.asarray(episodes[0]["actions"]).shape[-1]
    z = np.zeros((n, t, z_size), np.float32)
    actions = np.zeros((n, t, a_size), np.float32)
    rewards = np.zeros((n, t), np.float32)
    for i, e in enumerate(episodes):
        k = lengths[i]
        z[i, :k] = np.asarray(e["observations"], np.float32)[:k]
        actions[i, :k] = np.asarray(e["actions"], np.float32)
        rewards[i, :k] = np.asarray(e["rewards"], np.float32)
    terminated = np.array([bool(e["done"]) for e in episodes])
    if not np.all(np.isfinite(z)):
        raise BadInput("The encoded rollouts hold NaN or infinite representations.")
    return Rollouts(z, actions, rewards, lengths, terminated)


def load_rollouts(builder, split: str = "validation", max_rollouts: int | None = None) -> Rollouts:
    """The first `max_rollouts` rollouts of `split` (files in sorted order, so the same ones
    every time) of an `EncodedRolloutDatasetBuilder`."""
    ds = builder.rollouts_ds(split, repeat=False, shuffle_files=False)
    if max_rollouts:
        ds = ds.take(int(max_rollouts))
    return from_episodes(ds.as_numpy_iterator())


def chunk(x: np.ndarray, length: int) -> np.ndarray:
    """[N, T, ...] -> [N * ceil(T / length), length, ...]: consecutive pieces, zero-padded."""
    n, t = x.shape[:2]
    pieces = -(-t // length)
    pad = [(0, 0), (0, pieces * length - t)] + [(0, 0)] * (x.ndim - 2)
    return np.pad(x, pad).reshape((n * pieces, length) + x.shape[2:])


def unchunk(x: np.ndarray, num_rollouts: int, steps: int) -> np.ndarray:
    """The inverse of `chunk`: [N * P, length, ...] -> [N, T, ...]."""
    return x.reshape((num_rollouts, -1) + x.shape[2:])[:, :steps]
