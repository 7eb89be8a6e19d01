"""Sharded TFRecord files that are never seen half-written.

Names: `<name>.tfrecord-00003-of-00074` (`shard_name`). Every writer writes to a
temporary name in the same directory (`.<final name>.tmp-<host>-<pid>-<random>`, hidden
from the `*.tfrecord-*` globs) and renames it when complete (`atomic_output`), so a killed
job never leaves a partial file under a final name, and a rerun can skip shards that exist.
The stages remove the temporary files of killed writers when they start on a directory
(`remove_stale_tmp_files`).

Compression ("" / "GZIP" / "ZLIB") is chosen by the writer and detected by the
reader from the file's first bytes (`detect_compression`), so every reader handles
every format any writer produces, even mixed in one dataset.

TensorFlow is imported only by the functions that read or write TFRecords, so the atomic
file helpers (`atomic_output`, `write_text_atomic`, `write_json_atomic`) stay cheap for
tools that never touch TF (the SLURM launcher and status, run records).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import socket
import struct
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf

COMPRESSIONS = ("", "GZIP", "ZLIB")
_SHARD_RE = re.compile(r"^(?P<name>.+)\.tfrecord-(?P<index>\d{5})-of-(?P<total>\d{5})$")


def shard_name(name: str, index: int, total: int) -> str:
    """`shard_name("rollouts", 3, 74)` -> "rollouts.tfrecord-00003-of-00074"."""
    if not 0 <= index < total:
        raise ValueError(f"Shard index {index} is outside [0, {total}).")
    return f"{name}.tfrecord-{index:05d}-of-{total:05d}"


def parse_shard_name(path: str) -> tuple[str, int, int] | None:
    """Inverse of `shard_name` on a basename or path; None if it is not a shard name."""
    m = _SHARD_RE.match(os.path.basename(path))
    if not m:
        return None
    return m.group("name"), int(m.group("index")), int(m.group("total"))


def normalize_compression(compression: str | None) -> str:
    c = (compression or "").upper()
    if c in ("NONE", ""):
        return ""
    if c not in COMPRESSIONS:
        raise ValueError(f"Unknown compression {compression!r}; valid: none, GZIP, ZLIB.")
    return c


def tmp_path_for(final_path: str, suffix: str = "") -> str:
    """`.<final name>.tmp-<host>-<pid>-<random><suffix>`, next to `final_path`.

    The host and process id let `stale_tmp_files` tell a killed writer's leftovers from a
    live writer's work in progress; `suffix` is for libraries that insist on an extension.
    """
    d, base = os.path.split(final_path)
    return os.path.join(d, f".{base}.tmp-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


def is_tmp_path(path: str) -> bool:
    return os.path.basename(path).startswith(".") and ".tmp-" in os.path.basename(path)


def _host() -> str:
    return socket.gethostname().split(".")[0] or "localhost"


_TMP_OWNER = re.compile(r"\.tmp-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{8}(?:\.[^-]*)?$")


_MIN_IDLE_S = 120.0


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def stale_tmp_files(directory: str, max_age_hours: float = 24.0) -> list[str]:
    """Temporary files in `directory` (not recursive) that no running writer will finish.

    Stale: written by a process of this host that is gone (a killed or preempted job) and
    untouched for two minutes (a guard against process ids seen through another PID
    namespace), or, whatever wrote it, untouched for `max_age_hours`. Work in progress of
    live processes, here or on other hosts sharing the directory, is left alone.
    """
    if not os.path.isdir(directory):
        return []
    now, host, stale = time.time(), _host(), []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not is_tmp_path(path) or not os.path.isfile(path):
            continue
        try:
            idle = now - os.path.getmtime(path)
        except FileNotFoundError:  # renamed by its writer meanwhile
            continue
        m = _TMP_OWNER.search(name)
        gone = bool(m) and m.group("host") == host and not _pid_alive(int(m.group("pid")))
        if (gone and idle > _MIN_IDLE_S) or idle > max_age_hours * 3600:
            stale.append(path)
    return stale


def remove_stale_tmp_files(directory: str, max_age_hours: float = 24.0) -> list[str]:
    """Deletes `stale_tmp_files(directory, max_age_hours)`, logging what it frees."""
    removed, freed = [], 0
    for path in stale_tmp_files(directory, max_age_hours):
        with contextlib.suppress(FileNotFoundError):
            size = os.path.getsize(path)
            os.remove(path)
            removed.append(path)
            freed += size
    if removed:
        logging.getLogger(__name__).info(
            "Removed %d temporary file(s) (%.1f MB) left by killed writers in %s.",
            len(removed),
            freed / 1e6,
            directory,
        )
    return removed


@contextlib.contextmanager
def atomic_output(final_path: str) -> Iterator[str]:
    """Yields a temporary path; on success renames it to `final_path`, else deletes it."""
    os.makedirs(os.path.dirname(os.path.abspath(final_path)), exist_ok=True)
    tmp = tmp_path_for(final_path)
    try:
        yield tmp
        os.replace(tmp, final_path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def write_text_atomic(path: str, text: str) -> None:
    """Writes a small text file atomically (temp name, then rename)."""
    with atomic_output(path) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def write_json_atomic(path: str, data: object) -> None:
    """Writes `data` as indented, key-sorted JSON atomically."""
    import json

    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def read_json_or_none(path: str):
    """The JSON in `path`, or None when there is no such file or it does not parse (logged)."""
    import json

    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        logging.getLogger(__name__).warning("Ignoring %s, which cannot be read: %s", path, e)
        return None


def write_tfrecord(
    final_path: str, records: Sequence[bytes] | Iterator[bytes], compression: str = ""
) -> int:
    """Writes serialized records to `final_path` atomically. Returns the record count."""
    import tensorflow as tf

    options = tf.io.TFRecordOptions(compression_type=normalize_compression(compression))
    n = 0
    with atomic_output(final_path) as tmp:
        with tf.io.TFRecordWriter(tmp, options=options) as w:
            for r in records:
                w.write(r)
                n += 1
    return n


# ---- compression detection -------------------------------------------------------------------
def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def detect_compression(path: str) -> str:
    """Returns "", "GZIP" or "ZLIB" for a TFRecord file, from its first 12 bytes.

    An uncompressed TFRecord starts with an 8-byte length and its masked CRC32C, which
    is checked first, so the answer is unambiguous for files any rl755 writer made.
    """
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as f:
        head = f.read(12)
    if len(head) == 0:
        return ""
    if len(head) >= 12 and struct.unpack("<I", head[8:12])[0] == _masked_crc32c(head[:8]):
        return ""
    if head[:2] == b"\x1f\x8b":
        return "GZIP"
    if len(head) >= 2 and (head[0] & 0x0F) == 8 and ((head[0] << 8) | head[1]) % 31 == 0:
        return "ZLIB"
    return ""


def list_shards(pattern: str) -> list[str]:
    """Sorted final (non-temporary) files matching a glob pattern."""
    return sorted(p for p in glob.glob(os.path.expanduser(pattern)) if not is_tmp_path(p))


def tfrecord_dataset(files: Sequence[str], **interleave_kwargs) -> tf.data.Dataset:
    """A dataset of serialized records from files of any compression (mixed allowed).

    Files are read in parallel with `interleave`; pass `cycle_length`, `deterministic` etc.
    through `interleave_kwargs` (default: AUTOTUNE parallel reads, non-deterministic).
    """
    import tensorflow as tf

    files = list(files)
    if not files:
        raise ValueError("No TFRecord files to read.")
    compressions = [detect_compression(f) for f in files]
    ds = tf.data.Dataset.from_tensor_slices((files, compressions))
    kwargs = dict(
        cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,
    )
    kwargs.update(interleave_kwargs)
    return ds.interleave(lambda f, c: tf.data.TFRecordDataset(f, compression_type=c), **kwargs)


# ---- dataset_info.json sidecar ------------------------------------------------------------------
DATASET_INFO = "dataset_info.json"


def read_dataset_info(directory: str) -> dict | None:
    """The `dataset_info.json` beside a set of shards, or None if there is none."""
    import json

    path = os.path.join(directory, DATASET_INFO)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_dataset_info(directory: str, info: dict, check_keys: Sequence[str] | None = None) -> None:
    """Writes `dataset_info.json` atomically, or checks it against an existing one.

    Several instances may write to one directory: the first writes, the others check
    that the keys in `check_keys` (default: all keys of `info`) agree, and raise a
    ValueError naming the differences otherwise (e.g. two environments mixed in one dir).
    """

    os.makedirs(directory, exist_ok=True)
    existing = read_dataset_info(directory)
    if existing is not None:
        keys = list(check_keys) if check_keys is not None else list(info)
        diff = {
            k: (existing.get(k), info.get(k))
            for k in keys
            if k in existing and _jsonable(existing.get(k)) != _jsonable(info.get(k))
        }
        if diff:
            raise ValueError(
                f"{os.path.join(directory, DATASET_INFO)} describes different data "
                f"(existing vs new): {diff}. Use a different output directory."
            )
        return
    write_json_atomic(os.path.join(directory, DATASET_INFO), info)


def _jsonable(value):
    import json

    return json.loads(json.dumps(value, default=str))
