"""Finding TFRecord files that cannot be read to the end.

    bad = find_corrupted_tfrecords("~/rl755_data/car_racing/raw_rollouts/*.tfrecord-*")
    for path, reason in bad: print(path, reason)
    dispose_corrupted(bad, quarantine_dir="/tmp/bad")   # or delete=True

Every record of every file is read with the file's own compression (none, GZIP or ZLIB,
detected from its bytes), which checks each record's length and data CRCs and the
compressed stream's integrity. Temporary files of writers in progress (`.<name>.tmp-*`)
are never listed, so a running or killed job's partial output is not reported.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from rl755.common import shard_checks, sharded_io
from rl755.common.errors import BadInput


def check_tfrecord_file(path: str) -> tuple[int, str | None]:
    """(number of records read, None) if the file reads to the end, else (n, reason)."""
    return shard_checks.read_every_record(path)


def find_corrupted_tfrecords(
    pattern: str, progress: bool = True
) -> tuple[list[tuple[str, str]], int]:
    """([(path, reason)] of corrupted files, number of files checked) for a glob pattern."""
    from tqdm.auto import tqdm

    files = sharded_io.list_shards(pattern)
    if not files:
        raise BadInput(
            f"--pattern={pattern} matches no files. Quote it so the shell does not expand it, "
            "e.g. --pattern='<out_dir>/rollouts-*.tfrecord-*'."
        )
    corrupted = []
    for path in tqdm(files, unit="file", desc="checking", disable=not progress):
        _, reason = check_tfrecord_file(path)
        if reason is not None:
            corrupted.append((path, reason))
    return corrupted, len(files)


def dispose_corrupted(
    corrupted: Sequence[tuple[str, str]], delete: bool = False, quarantine_dir: str | None = None
) -> list[str]:
    """Deletes the files, or moves them into `quarantine_dir`; returns what was done per file."""
    if delete and quarantine_dir:
        raise BadInput("Pass either --delete or --quarantine_dir, not both.")
    done = []
    if quarantine_dir:
        if os.path.exists(quarantine_dir) and not os.path.isdir(quarantine_dir):
            raise BadInput(f"--quarantine_dir={quarantine_dir} is a file; pass a directory.")
        os.makedirs(quarantine_dir, exist_ok=True)
    for path, _ in corrupted:
        if delete:
            os.remove(path)
            done.append(f"deleted {path}")
        elif quarantine_dir:
            target = os.path.join(quarantine_dir, os.path.basename(path))
            if os.path.exists(target):
                raise BadInput(f"{target} exists already; choose another --quarantine_dir.")
            shutil.move(path, target)
            done.append(f"moved {path} -> {target}")
    return done
