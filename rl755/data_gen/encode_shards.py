"""Stage 3's work split: which raw shard files each encoding instance reads, and the names
of the files it writes (pure functions of the flags and the file list; see
rl755.data_gen.encode for the whole scheme).

    mine = outer_shard_files(files, num_outer_shards=12, outer_shard_index=3)
    for j, group in enumerate(sub_shard_files(mine, num_sub_shards=4)):
        name = output_file_name("encoded", "train", 3, 12, j, 4)
        # encoded-train-o00003of00012.tfrecord-0000j-of-00004
"""

from __future__ import annotations

import os

from rl755.common import config, sharded_io
from rl755.environments import Environments


def _contiguous_split(items: list, n: int) -> list[list]:
    """`n` contiguous runs of near-equal length (the first ones one longer)."""
    q, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return out


def outer_shard_files(files: list[str], num_outer_shards: int, outer_shard_index: int) -> list[str]:
    """The input files of outer shard `outer_shard_index` (of the sorted `files`)."""
    if num_outer_shards <= 0:
        raise ValueError(f"--num_outer_shards must be positive, got {num_outer_shards}.")
    if not 0 <= outer_shard_index < num_outer_shards:
        raise ValueError(
            f"--outer_shard_index={outer_shard_index} is outside [0, {num_outer_shards}) "
            f"(--num_outer_shards={num_outer_shards})."
        )
    return _contiguous_split(sorted(files), num_outer_shards)[outer_shard_index]


def sub_shard_files(files: list[str], num_sub_shards: int) -> list[list[str]]:
    """Input files of each of this instance's `num_sub_shards` output files."""
    if num_sub_shards <= 0:
        raise ValueError(f"--num_sub_shards must be positive, got {num_sub_shards}.")
    return _contiguous_split(list(files), num_sub_shards)


def output_file_name(
    out_name: str,
    split: str,
    outer_shard_index: int,
    num_outer_shards: int,
    sub_shard_index: int,
    num_sub_shards: int,
) -> str:
    """e.g. "encoded-train-o00003of00012.tfrecord-00001-of-00004"."""
    base = f"{out_name}-{split}-o{outer_shard_index:05d}of{num_outer_shards:05d}"
    return sharded_io.shard_name(base, sub_shard_index, num_sub_shards)


def default_out_dir(environment: Environments | str, model_name: str) -> str:
    """`<data_dir>/<env folder>/encoded_rollouts/<model name>`."""
    env = Environments.from_name(environment)
    return str(config.env_data_dir(env.folder_name) / "encoded_rollouts" / model_name)


def resolve_out_dir(
    environment: Environments | str, model: str, model_dir: str | None, out_dir: str | None
) -> str:
    """--out_dir, else the default for the saved model `model` (or the model dir's basename)."""
    if out_dir:
        return os.path.abspath(os.path.expanduser(out_dir))
    name = model if model_dir is None else os.path.basename(os.path.normpath(model_dir))
    return default_out_dir(environment, name)
