"""Shards that read to the end: checked before a stage spends compute on them, and errors
that name the bad file.

    check_shards(files, pattern)                   # BadInput naming every broken file
    with naming_bad_shards(files, pattern):        # a DataLossError while reading -> BadInput
        model.fit(dataset_reading(files))

`check_shard(path)` reads a file's structure without TensorFlow:
  - uncompressed: walks the record headers (8-byte length + its masked CRC32C) by seeking,
    12 bytes read per record: a truncated file, or trailing bytes, or a broken length is
    found without reading the data;
  - GZIP / ZLIB: inflates the stream to its end (output discarded, record headers walked as
    they pass): a truncated file has no end of stream (GZIP: no trailer), damaged data fails
    the stream's own checksum (CRC-32 / Adler-32). In parallel threads, cached per (path,
    size, mtime) for the process.
Each record's own data CRC32C is not recomputed here; `find_corrupted_tfrecords.py` reads every
record with TensorFlow, which checks it. The messages point there.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import struct
import time
import zlib
from collections.abc import Iterator, Sequence

from rl755.common import sharded_io
from rl755.common.errors import BadInput

log = logging.getLogger(__name__)

FINDER = "scripts/data_gen/find_corrupted_tfrecords.py"
FULL_READ_MAX_BYTES = 2e9  # after a DataLossError, read whole shards with TF to name the file
_CHUNK = 1 << 20
_MAX_OUT = 1 << 24
_cache: dict[tuple[str, int, int], str | None] = {}


class _RecordWalker:
    """Follows TFRecord framing through a byte stream fed in pieces."""

    def __init__(self):
        self.records = 0
        self.skip = 0  # bytes of the current record's data (+ its CRC) still to pass
        self.head = b""
        self.error: str | None = None

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        while i < n and self.error is None:
            if self.skip:
                step = min(self.skip, n - i)
                self.skip -= step
                i += step
                continue
            need = 12 - len(self.head)
            self.head += data[i : i + need]
            i += min(need, n - i)
            if len(self.head) == 12:
                self._header(self.head)
                self.head = b""

    def _header(self, head: bytes) -> None:
        (length,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != sharded_io._masked_crc32c(head[:8]):
            self.error = f"record {self.records + 1} has a broken length header"
            return
        self.records += 1
        self.skip = length + 4

    def end(self) -> str | None:
        if self.error:
            return self.error
        if self.skip or self.head:
            return f"truncated inside record {self.records + (0 if self.skip else 1)}"
        return None


def _walk_uncompressed(path: str) -> str | None:
    size = os.path.getsize(path)
    walker = _RecordWalker()
    with open(path, "rb") as f:
        pos = 0
        while pos < size:
            head = f.read(12)
            if len(head) < 12:
                return (
                    f"{len(head)} bytes after record {walker.records}: a truncated record "
                    "header, or trailing bytes"
                )
            walker._header(head)
            if walker.error:
                return walker.error
            pos += 12 + walker.skip
            walker.skip = 0
            if pos > size:
                return f"truncated inside record {walker.records} (ends {pos - size} bytes early)"
            f.seek(pos)
    return None


def _walk_compressed(path: str, compression: str) -> str | None:
    inflater = zlib.decompressobj(31 if compression == "GZIP" else 15)
    walker = _RecordWalker()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                if inflater.eof:
                    return f"bytes after the end of the {compression} stream"
                out = inflater.decompress(chunk, _MAX_OUT)
                walker.feed(out)
                while inflater.unconsumed_tail:
                    walker.feed(inflater.decompress(inflater.unconsumed_tail, _MAX_OUT))
                if walker.error:
                    return walker.error
    except zlib.error as e:
        return f"damaged {compression} data ({e})"
    if not inflater.eof:
        end = "trailer" if compression == "GZIP" else "end"
        return f"truncated: the {compression} stream has no {end}"
    if inflater.unused_data:
        return f"bytes after the end of the {compression} stream"
    return walker.end()


def check_shard(path: str) -> str | None:
    """None if `path` is a whole TFRecord file (any compression), else what is wrong."""
    try:
        st = os.stat(path)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key not in _cache:
        try:
            compression = sharded_io.detect_compression(path)
            if compression:
                _cache[key] = _walk_compressed(path, compression)
            else:
                _cache[key] = _walk_uncompressed(path)
        except OSError as e:
            return f"unreadable ({e})"
    return _cache[key]


def read_every_record(path: str) -> tuple[int, str | None]:
    """(records read, None) if TensorFlow reads `path` to the end, checking every record's
    CRC32C, else (records read in whole batches of 64 before the failure, why not). Reads the
    whole file."""
    import tensorflow as tf

    n = 0
    try:
        compression = sharded_io.detect_compression(path)
        ds = tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=1 << 20)
        for batch in ds.batch(64):
            n += int(batch.shape[0])
    except Exception as e:  # noqa: BLE001 - every read failure means "corrupted"
        msg = getattr(e, "message", None) or str(e)
        return n, f"{type(e).__name__} after {n} records: {msg.strip().splitlines()[0]}"
    return n, None


def find_bad_shards(files: Sequence[str], threads: int | None = None) -> list[tuple[str, str]]:
    """[(path, reason)] of the files that are not whole, in file order (parallel threads)."""
    files = list(files)
    threads = threads or min(8, os.cpu_count() or 1)
    t0 = time.monotonic()
    total = sum(os.path.getsize(f) for f in files if os.path.exists(f))
    if total > 1e9:
        log.info(
            "Checking that %d shard files (%.1f GB) read to the end...", len(files), total / 1e9
        )
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        reasons = list(pool.map(check_shard, files))
    secs = time.monotonic() - t0
    if secs > 5:
        log.info("Checked %d shard files in %.0f s.", len(files), secs)
    return [(f, r) for f, r in zip(files, reasons) if r is not None]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def finder_command(pattern: str) -> str:
    return f"python {FINDER} --pattern='{pattern}'"


def corrupted_message(bad: Sequence[tuple[str, str]], pattern: str) -> str:
    """What BadInput says: every bad file and why, and how to find and remove them all."""
    lines = [f"  {path}: {reason}" for path, reason in bad[:20]]
    if len(bad) > 20:
        lines.append(f"  ... and {len(bad) - 20} more")
    return (
        f"{len(bad)} shard file(s) of {pattern} cannot be read to the end:\n"
        + "\n".join(lines)
        + f"\nList (and --delete or --quarantine_dir) every corrupted shard with: "
        f"{finder_command(pattern)}"
    )


def check_shards(files: Sequence[str], pattern: str) -> None:
    """Raises BadInput naming every file of `files` that is not whole (see the module doc)."""
    bad = find_bad_shards(files)
    if bad:
        raise BadInput(corrupted_message(bad, pattern))


@contextlib.contextmanager
def naming_bad_shards(files: Sequence[str], pattern: str) -> Iterator[None]:
    """Turns TensorFlow's DataLossError (which names no file) raised in the body into a
    BadInput naming the broken files of `files`: found by `find_bad_shards`, or when they all
    look whole (a record's checksum failed) by reading them with TensorFlow if they hold at
    most FULL_READ_MAX_BYTES; else it names the pattern and the finder to run."""
    import tensorflow as tf

    try:
        yield
    except tf.errors.DataLossError as e:
        tf_says = (getattr(e, "message", None) or str(e)).strip().splitlines()[0]
        bad = find_bad_shards(files)
        if not bad and sum(_size(f) for f in files) <= FULL_READ_MAX_BYTES:
            # Whole in structure: a record's own checksum failed. Small enough to find it.
            reasons = [(f, read_every_record(f)[1]) for f in files]
            bad = [(f, r) for f, r in reasons if r is not None]
        if bad:
            raise BadInput(f"{corrupted_message(bad, pattern)}\n(TensorFlow: {tf_says})") from e
        where = files[0] if len(files) == 1 else f"one of the {len(files)} shard files of {pattern}"
        raise BadInput(
            f"A record of {where} is damaged (TensorFlow: {tf_says}). List every corrupted "
            f"shard (and --delete or --quarantine_dir them) with: {finder_command(pattern)}"
        ) from e
