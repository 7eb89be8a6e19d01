"""Helpers for the sequential-model tests: tiny encoded-rollout datasets on disk and in memory."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from rl755.common import checkpoints, sharded_io
from rl755.common.structs import Rollout
from rl755.models import catalogue

Z, A = 4, 3


def fake_model(name: str) -> catalogue.ModelFn:
    """The catalogue's `name` for FAKE_PIXELS (Z = 4, A = 3): a no-argument constructor."""
    return catalogue.model_fn("FAKE_PIXELS", name)


def encoded_rollout(rng, steps, done=False, z=Z):
    return Rollout(
        obs_l=[rng.normal(size=z).astype(np.float32) for _ in range(steps)],
        action_l=[rng.uniform(-1, 1, A).astype(np.float32) for _ in range(steps)],
        reward_l=list(rng.normal(size=steps)),
        done=done,
        obs_std_l=[np.full(z, 0.3, np.float32) for _ in range(steps)],
    )


def write_encoded_dataset(directory, rollouts_per_split=4, steps=12, seed=0, z=Z):
    """Writes encoded-{train,validation} shards + dataset_info.json (FAKE_PIXELS, Z=z)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split in ("train", "validation"):
        rollouts = [
            encoded_rollout(rng, steps, done=i % 2 == 0, z=z) for i in range(rollouts_per_split)
        ]
        path = directory / sharded_io.shard_name(f"encoded-{split}", 0, 1)
        sharded_io.write_tfrecord(str(path), [r.serialize() for r in rollouts], "GZIP")
    sharded_io.write_dataset_info(
        str(directory),
        {"environment": "FAKE_PIXELS", "representation_size": z, "has_std_devs": True},
    )
    return directory


def fixed_slices(n=8, length=6, seed=0, z=Z, a=A, poison=False, rollout_ids=False):
    """A deterministic in-memory dataset_fn: the same n slices, repeated, in order (with a
    "rollout_id" each when `rollout_ids`, for models that need them)."""
    rng = np.random.default_rng(seed)
    data = {
        "inputs": rng.normal(size=(n, length, z + a)).astype(np.float32),
        "targets": rng.normal(size=(n, length, z)).astype(np.float32),
        "rewards": rng.normal(size=(n, length)).astype(np.float32),
        "dones": (rng.uniform(size=(n, length)) < 0.2).astype(np.float32),
        "mask": np.ones((n, length), np.float32),
        "target_mask": np.ones((n, length), np.float32),
    }
    data["mask"][1, -2:] = 0.0  # some padding
    data["target_mask"][1, -3:] = 0.0
    if poison:
        data["targets"][:] = np.inf
    if rollout_ids:
        data["rollout_id"] = np.arange(n, dtype=np.int64)

    def dataset_fn(split):
        del split
        return tf.data.Dataset.from_tensor_slices(data).repeat()

    return dataset_fn


def load_benchmark(name: str):
    """benchmarks/<name>.py as a module, imported once per process (it defines absl flags)."""
    import importlib.util
    import os
    import sys

    key = f"benchmarks_{name}"
    if key not in sys.modules:
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        spec = importlib.util.spec_from_file_location(
            key, os.path.join(repo, "benchmarks", f"{name}.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


# The tiny stage-4 run the trainer tests share (FAKE_PIXELS, VaeEncodedRollouts, 6-step slices).
TINY_TRAINING = dict(
    environment="FAKE_PIXELS",
    rollouts_dataset="VaeEncodedRollouts",
    batch_size=4,
    sequence_length=6,
    learning_rate=1e-3,
    save_every_n_steps=2,
    validation_steps=1,
    run_flags={"test": True},
)


def train_tiny(model_dir, steps: int, model: str, **overrides):
    """`train_sequential_model` of `model` for `steps` steps at TINY_TRAINING's settings."""
    from rl755.models.sequential import train as train_sequential

    args = dict(TINY_TRAINING, model_dir=str(model_dir), train_steps=steps, model=model)
    args.update(overrides)
    return train_sequential.train_sequential_model(**args)


def train_mdn(model_dir, steps, **kw):
    """train_tiny with the MDN-RNN with heads unless `model=` names another catalogue model."""
    return train_tiny(model_dir, steps, kw.pop("model", "mdn_rnn.mdn_rnn_with_heads"), **kw)


def checkpoint_steps(model_dir):
    """The steps of `model_dir`'s complete checkpoints, oldest first."""
    return [c.step for c in checkpoints.list_complete_checkpoints(str(model_dir))]


def run_steps(model, x):
    """`model.step` over x [B, T, Z + A] one step at a time (Z = 4): the h_t stacked, [B, T, H]."""
    state = model.initial_state(x.shape[0])
    hs = []
    for t in range(x.shape[1]):
        h, state = model.step(x[:, t, :Z], x[:, t, Z:], state)
        hs.append(h.numpy())
    return np.stack(hs, axis=1)
