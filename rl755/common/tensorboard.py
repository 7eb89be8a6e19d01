"""One TensorBoard layout for every trainer, and the reader `scripts/status.py` uses.

Layout of a trainer's model directory:

    <model_dir>/tensorboard/train/        training metrics, and the run's flags as a table
    <model_dir>/tensorboard/validation/   validation losses, evaluations, sample pictures

Metric keys are namespaced `<namespace>/<name>` with a namespace from `NAMESPACES`:
`losses/total`, `losses/<term>`, `perf/steps_per_second`, `perf/sequences_per_second`,
`optimizer/learning_rate`, `optimizer/gradient_norm`, `fitness/mean`, `eval/real_mean`,
`cma/sigma`, `images/reconstructions`. The same key in
`train/` and `validation/` is the same quantity on the two splits, so TensorBoard draws
them in one chart. The flags of every run (a resumed run too) are written once, at its
first step, as a markdown table (text summary `hparams`).

    logs = TrainingLogs(model_dir)                     # enabled=False on non-chief workers
    logs.hparams({"learning_rate": 1e-3, ...}, step=0)
    logs.scalars("train", step, {"losses/total": 0.3, "perf/steps_per_second": 12.0})
    logs.image("validation", step, "images/reconstructions", grid)   # uint8 [H, W, C]
    logs.close()

Reading needs no TensorFlow (the `tensorboard` package's protos), so the status table stays
cheap: `latest_metrics(tensorboard_dirs(root))` -> {"train/losses/total": (step, value)}.
"""

from __future__ import annotations

import glob
import os
import struct
import time
from collections.abc import Iterable, Mapping, Sequence

SUBDIR = "tensorboard"
SPLITS = ("train", "validation")
NAMESPACES = ("losses", "perf", "optimizer", "fitness", "eval", "cma", "images")
HPARAMS_TAG = "hparams"
EVENT_GLOB = "events.out.tfevents.*"


def log_dir(model_dir: str, split: str) -> str:
    """`<model_dir>/tensorboard/<split>`."""
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
    return os.path.join(str(model_dir), SUBDIR, split)


def check_key(key: str) -> str:
    """`key` if it is `<namespace>/<name>` with a known namespace, else ValueError."""
    namespace, _, name = key.partition("/")
    if namespace not in NAMESPACES or not name:
        raise ValueError(
            f"TensorBoard key {key!r} is not namespaced: use '<namespace>/<name>' with a "
            f"namespace in {', '.join(NAMESPACES)} (rl755.common.tensorboard)."
        )
    return key


def hparams_table(flags: Mapping[str, object]) -> str:
    """The flags as a two-column markdown table, sorted by name."""
    rows = [f"| {k} | {_cell(v)} |" for k, v in sorted(flags.items())]
    return "\n".join(["| flag | value |", "|---|---|", *rows])


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


class TrainingLogs:
    """The train and validation writers of one model directory (see the module docstring).

    Writers are created on first use, so a run that never validates has no validation dir.
    With `enabled=False` (a non-chief worker) every call does nothing."""

    def __init__(self, model_dir: str, enabled: bool = True):
        self.model_dir = str(model_dir)
        self.enabled = enabled
        self._writers: dict = {}

    def _writer(self, split: str):
        if split not in self._writers:
            import tensorflow as tf

            self._writers[split] = tf.summary.create_file_writer(log_dir(self.model_dir, split))
        return self._writers[split]

    def hparams(self, flags: Mapping[str, object], step: int = 0) -> None:
        """Writes the run's flags as a markdown table (once per run, at its first step)."""
        if not self.enabled:
            return
        import tensorflow as tf

        with self._writer("train").as_default():
            tf.summary.text(HPARAMS_TAG, hparams_table(flags), step=int(step))

    def scalars(self, split: str, step: int, values: Mapping[str, float]) -> None:
        """One point per key at `step`; keys must be namespaced (`check_key`)."""
        for key in values:
            check_key(key)
        if not self.enabled:
            return
        import tensorflow as tf

        with self._writer(split).as_default():
            for key, value in values.items():
                tf.summary.scalar(key, float(value), step=int(step))

    def image(self, split: str, step: int, key: str, image) -> None:
        """One uint8 [H, W, C] picture at `step`."""
        check_key(key)
        if not self.enabled:
            return
        import tensorflow as tf

        with self._writer(split).as_default():
            tf.summary.image(key, image[None], step=int(step))

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers = {}


class StepMeans:
    """Per-step training terms averaged over the steps since the last log, with throughput.

    window = StepMeans(batch_size, "sequences")
    window.add({"loss": 0.31, "z": 0.2})       # every step
    means, perf = window.take()                # at a log step; starts a new window
    # perf: {"perf/steps_per_second": ..., "perf/sequences_per_second": ...}
    window.restart_clock()                     # after time spent not training (a save)
    """

    def __init__(self, batch_size: int, items: str):
        self.batch_size = batch_size
        self.items_key = f"perf/{items}_per_second"
        self._sums: dict[str, float] = {}
        self._steps = 0
        self.restart_clock()

    def restart_clock(self) -> None:
        self._start = time.perf_counter()

    def add(self, terms: Mapping[str, float]) -> None:
        for k, v in terms.items():
            self._sums[k] = self._sums.get(k, 0.0) + v
        self._steps += 1

    def take(self) -> tuple[dict[str, float], dict[str, float]]:
        """(mean of each term, {perf/steps_per_second, perf/<items>_per_second}) over the
        steps added since the last take; then an empty window from now."""
        seconds = max(time.perf_counter() - self._start, 1e-9)
        means = {k: v / self._steps for k, v in self._sums.items()}
        perf = {
            "perf/steps_per_second": self._steps / seconds,
            self.items_key: self._steps * self.batch_size / seconds,
        }
        self._sums, self._steps = {}, 0
        self.restart_clock()
        return means, perf


# ---- reading (no TensorFlow) ------------------------------------------------------------------
def _read_tfrecords(path: str) -> Iterable[bytes]:
    """Records of a TFRecord file (no CRC check); stops at a truncated tail."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if len(header) < 12:
                return
            (length,) = struct.unpack("<Q", header[:8])
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                return
            yield data


def read_events(event_file: str) -> Iterable[tuple[int, str, object]]:
    """(step, tag, value) of every scalar (a float) and text (a str) in one event file."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    for data in _read_tfrecords(event_file):
        event = event_pb2.Event()
        try:
            event.ParseFromString(data)
        except Exception:  # a corrupt record: skip it, keep reading
            continue
        for v in event.summary.value:
            plugin = v.metadata.plugin_data.plugin_name
            if v.HasField("simple_value"):
                yield int(event.step), v.tag, float(v.simple_value)
            elif v.HasField("tensor") and plugin in ("scalars", ""):
                arr = tensor_util.make_ndarray(v.tensor)
                if arr.size == 1 and arr.dtype.kind in "fiub":
                    yield int(event.step), v.tag, float(arr.reshape(()))
            elif v.HasField("tensor") and plugin == "text":
                arr = tensor_util.make_ndarray(v.tensor)
                if arr.size == 1:
                    text = arr.reshape(())[()]
                    yield int(event.step), v.tag, (
                        text.decode() if isinstance(text, bytes) else str(text)
                    )


def last_scalars(event_file: str) -> dict[str, tuple[int, float]]:
    """{tag: (step, value)} of the latest value of every scalar in one event file."""
    out: dict[str, tuple[int, float]] = {}
    for step, tag, value in read_events(event_file):
        if isinstance(value, float) and (tag not in out or step >= out[tag][0]):
            out[tag] = (step, value)
    return out


def read_dir(directory: str) -> dict[str, list[tuple[int, object]]]:
    """{tag: [(step, value), ...]} of every event file in one directory, in file order."""
    out: dict[str, list[tuple[int, object]]] = {}
    for f in sorted(glob.glob(os.path.join(str(directory), EVENT_GLOB))):
        for step, tag, value in read_events(f):
            out.setdefault(tag, []).append((step, value))
    return out


def tensorboard_dirs(out_dir: str) -> list[str]:
    """Directories under out_dir (itself included) that hold TensorBoard event files."""
    if not out_dir or not os.path.isdir(out_dir):
        return []
    dirs = set()
    for dirpath, dirnames, filenames in os.walk(out_dir):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if any(n.startswith("events.out.tfevents.") for n in filenames):
            dirs.add(dirpath)
    return sorted(dirs)


def latest_metrics(tb_dirs: Sequence[str]) -> dict[str, tuple[int, float]]:
    """{tag (prefixed by the dir's name when there are several): (step, value)}."""
    metrics: dict[str, tuple[int, float]] = {}
    for d in tb_dirs:
        prefix = "" if len(tb_dirs) == 1 else os.path.basename(d) + "/"
        for f in sorted(glob.glob(os.path.join(d, EVENT_GLOB))):
            for tag, (step, value) in last_scalars(f).items():
                key = prefix + tag
                if key not in metrics or step >= metrics[key][0]:
                    metrics[key] = (step, value)
    return metrics
