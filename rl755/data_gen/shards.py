"""How stage 1 lays out its TFRecord output: shard names, the train/validation split, rollouts
per shard, the `dataset_info.json` sidecar, and the checks of the output flags.

Shard names match the dataset builders' glob `<out_name>-{split}*.tfrecord-*`:

    <out_name>-<split>.tfrecord-00003-of-00074            conversion of a pickle dir
    <out_name>-<split>-<run tag>.tfrecord-00003-of-00012  written straight by collection workers

(split is "train" or "validation"; the run tag keeps concurrent collection instances apart.)
Every shard is written under a hidden temporary name and renamed when complete
(`sharded_io.atomic_output`), so a killed job leaves no partial file under a final name and
a rerun skips the shards that exist. A `dataset_info.json` sidecar describes the directory
(environment, observation_shape, observation_dtype, action_size, compression, producer).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from rl755.common import sharded_io
from rl755.common.errors import BadInput

SPLITS = ("train", "validation")


def split_shard_name(out_name: str, split: str, index: int, total: int, tag: str = "") -> str:
    """`split_shard_name("rollouts", "train", 3, 74)` -> "rollouts-train.tfrecord-00003-of-00074"."""
    if split not in SPLITS:
        raise BadInput(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
    base = f"{out_name}-{split}" + (f"-{tag}" if tag else "")
    return sharded_io.shard_name(base, index, total)


def validation_indices(n: int, validation_fraction: float) -> set[int]:
    """Which of `n` sorted items go to validation: round(n * fraction) of them (at least one
    if the fraction is positive and n >= 2, never all), evenly spread over the sorted order."""
    if not 0.0 <= validation_fraction < 1.0:
        raise BadInput(f"validation_fraction must be in [0, 1), got {validation_fraction}.")
    if validation_fraction == 0.0 or n < 2:
        return set()
    k = min(n - 1, max(1, round(n * validation_fraction)))
    return {min(n - 1, int((i + 0.5) * n / k)) for i in range(k)}


def chunk(items: Sequence, size: int) -> list[list]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def record_bytes(rollout) -> bytes:
    """A `Rollout` as one TFRecord record: its SequenceExample with the map fields in key
    order, so the same rollout gives the same bytes in every process (a plain
    `SerializeToString` orders them by a per-process hash)."""
    return rollout.to_sequence_example().SerializeToString(deterministic=True)


def dataset_info(
    environment: str | None,
    observation_shape: Sequence[int],
    action_size: int,
    compression: str,
    producer: str,
    observation_dtype: str = "uint8",
) -> dict:
    """The `dataset_info.json` content for raw rollouts."""
    return {
        "environment": environment,
        "observation_shape": [int(d) for d in observation_shape],
        "observation_dtype": observation_dtype,
        "action_size": int(action_size),
        "compression": sharded_io.normalize_compression(compression) or "none",
        "producer": producer,
    }


def write_raw_dataset_info(out_dir: str, info: dict) -> None:
    """Writes the sidecar, or checks an existing one describes the same kind of data."""
    keys = ["environment", "observation_shape", "observation_dtype", "action_size"]
    existing = sharded_io.read_dataset_info(out_dir)
    if existing is not None and existing.get("environment") is None:
        keys.remove("environment")
    sharded_io.write_dataset_info(out_dir, info, check_keys=keys)


def check_out_dir(out_dir: str, flag: str = "--out_dir") -> None:
    """Fails fast if `out_dir` is a file or cannot be created."""
    if not out_dir:
        raise BadInput(f"{flag} is empty; pass a directory.")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise BadInput(f"{flag}={out_dir} is a file; pass a directory (it is created if missing).")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise BadInput(f"Cannot create {flag}={out_dir}: {e}. Pass a writable directory.") from e


def check_positive(**values: int) -> None:
    for name, value in values.items():
        if value is None or value <= 0:
            raise BadInput(f"--{name} must be a positive integer, got {value}.")


def default_rollouts_per_shard(num_rollouts: int) -> int:
    """Rollouts per shard when unspecified: at least ~64 shards (tasks), at most 16 rollouts each.

    Independent of the parallelism, so a rerun with another --parallelism resumes the same shards.
    """
    return max(1, min(16, math.ceil(num_rollouts / 64)))
