"""Checkpoints of every trainer, written so a reader never sees half of one.

Checkpoint `N` of a model directory is a marker `model-NNN.json` plus the files it lists:

    model-003.json             {"checkpoint_number", "step", "files": {role: file name}, ...}
    model-003.weights.h5       role "weights": `model.save_weights` (a compiled Keras model
                               includes its optimizer's variables: step counter, Adam moments)
    model-003.optimizer.npz    role "optimizer": the variables of an optimizer that is not
                               part of the model (custom training loops), see `save_checkpoint`
    model-003.cma.pkl, ...     any other role a trainer needs (`write_checkpoint`), e.g. the
                               CMA-ES state of rl755.controller.cma_train

Each file is written under a temporary name and renamed into place; the marker is renamed
last, so a checkpoint is *complete* exactly when its marker and every file it lists exist.
Readers only ever see complete checkpoints (`list_complete_checkpoints`); a killed writer
leaves at most files without a marker, which are ignored (and overwritten by the next save
of that number). `N` counts the saves (1, 2, ...); the marker's "step" says how far the
trainer was (training steps, or CMA-ES generations).

Every trainer keeps the newest `KEEP_CHECKPOINTS` (its --keep_checkpoints) plus the newest
checkpoint marked best (`is_new_best`), and resumes exactly from the newest
(`remove_older_checkpoints` after each save).

    ckpt = newest_complete_checkpoint(model_dir)   # Checkpoint or None
    load_weights_checked(model, ckpt.weights_path) # clear error on a size/architecture mismatch

To restore a compiled model's optimizer too, `optimizer.build(model.trainable_variables)`
before loading; an uncompiled model (inference) loads the same file and ignores that part.
Weights copied by hand without the marker can still be loaded by naming the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence

from absl import logging

from rl755.common import sharded_io

_MARKER_RE = re.compile(r"^model-(\d+)\.json$")
_WEIGHTS_RE = re.compile(r"^model-(\d+)\.weights\.h5$")


def file_name(number: int, suffix: str) -> str:
    """`model-NNN<suffix>`, e.g. file_name(3, ".weights.h5") == "model-003.weights.h5"."""
    return f"model-{number:03d}{suffix}"


def file_name_pattern(model_dir: str, number: int) -> str:
    """The glob of every file of checkpoint `number`: `<model_dir>/model-NNN.*`."""
    return os.path.join(glob.escape(str(model_dir)), file_name(number, ".*"))


def weights_name(number: int) -> str:
    return file_name(number, ".weights.h5")


def marker_name(number: int) -> str:
    return file_name(number, ".json")


def is_marker(path: str) -> bool:
    """Whether `path` names a checkpoint marker (`model-NNN.json`)."""
    return bool(_MARKER_RE.match(os.path.basename(path)))


@dataclasses.dataclass
class Checkpoint:
    """One complete checkpoint: its number, its files {role: absolute path}, its marker."""

    number: int
    files: dict[str, str]
    info: dict

    @property
    def step(self) -> int:
        return int(self.info.get("step", 0))

    @property
    def weights_path(self) -> str | None:
        return self.files.get("weights")

    def path(self, role: str) -> str:
        if role not in self.files:
            raise KeyError(
                f"Checkpoint {self.number} has no {role!r} file; it has {sorted(self.files)}."
            )
        return self.files[role]


def list_complete_checkpoints(model_dir: str) -> list[Checkpoint]:
    """Complete checkpoints of `model_dir`, oldest first (partial ones are ignored)."""
    out = []
    for marker in glob.glob(os.path.join(str(model_dir), "model-*.json")):
        m = _MARKER_RE.match(os.path.basename(marker))
        if not m:
            continue
        try:
            with open(marker) as f:
                info = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(info, dict) or not isinstance(info.get("files"), dict):
            continue
        files = {role: os.path.join(str(model_dir), name) for role, name in info["files"].items()}
        if files and all(os.path.exists(p) for p in files.values()):
            out.append(Checkpoint(int(m.group(1)), files, info))
    return sorted(out, key=lambda c: c.number)


def newest_complete_checkpoint(model_dir: str) -> Checkpoint | None:
    ckpts = list_complete_checkpoints(model_dir)
    return ckpts[-1] if ckpts else None


def checkpoint_at(
    model_dir: str, step: int | None, hint: str, ckpts: Sequence[Checkpoint] | None = None
) -> Checkpoint:
    """The newest complete checkpoint of `model_dir` (or of `ckpts`, oldest first, when
    given), or the one saved at training step `step`; where there is none, FileNotFoundError
    naming `model_dir` and `step`, followed by `hint` (what the model_dir should hold)."""
    if ckpts is None:
        ckpts = list_complete_checkpoints(model_dir)
    if step is not None:
        ckpts = [c for c in ckpts if c.step == int(step)]
    if not ckpts:
        at = f" at step {step}" if step is not None else ""
        raise FileNotFoundError(f"No complete checkpoint in {model_dir}{at}: {hint}")
    return ckpts[-1]


def newest_weights_file(model_dir: str) -> str | None:
    """The newest complete checkpoint's weights, else the highest-numbered weights file."""
    for ckpt in reversed(list_complete_checkpoints(model_dir)):
        if ckpt.weights_path:
            return ckpt.weights_path
    numbered = []
    for path in glob.glob(os.path.join(str(model_dir), "model-*.weights.h5")):
        m = _WEIGHTS_RE.match(os.path.basename(path))
        if m:
            numbered.append((int(m.group(1)), path))
    return max(numbered)[1] if numbered else None


Writer = Callable[[str], None]  # writes one file at the path it is given


def write_checkpoint(
    model_dir: str, number: int, files: Mapping[str, tuple[str, Writer]], info: dict | None = None
) -> Checkpoint:
    """Writes checkpoint `number`: each file, then the marker listing them, all atomically.

    Args:
      files: {role: (suffix, write)}; `write(path)` writes the file (the path ends with the
        suffix, for libraries that check extensions); it lands at `model-NNN<suffix>`.
      info: goes into the marker (JSON-serializable; a "step" key is read by `Checkpoint`).
    """
    model_dir = str(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    names = {}
    for role, (suffix, write) in files.items():
        final = os.path.join(model_dir, file_name(number, suffix))
        tmp = sharded_io.tmp_path_for(final, suffix)
        try:
            write(tmp)
            os.replace(tmp, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
        names[role] = os.path.basename(final)
    marker = dict(info or {})
    marker.update(checkpoint_number=int(number), files=names)
    with sharded_io.atomic_output(os.path.join(model_dir, marker_name(number))) as t:
        with open(t, "w") as f:
            json.dump(marker, f, indent=2, sort_keys=True, default=str)
    return Checkpoint(
        int(number), {r: os.path.join(model_dir, n) for r, n in names.items()}, marker
    )


KEEP_CHECKPOINTS = 3  # every trainer's --keep_checkpoints default
KEEP_HELP = (
    "Checkpoints kept in the model dir: the newest this many, plus the best one (lowest "
    "validation loss) where the trainer validates."
)
BEST = "best"  # a marker's key: true where the checkpoint beat every earlier one


def is_new_best(model_dir: str, key: str, value: float | None) -> bool:
    """Whether `value` (lower is better, e.g. a validation loss) is below the `key` of every
    complete checkpoint in `model_dir`: the next checkpoint is then marked best. None is
    never best; markers without `key` do not count."""
    if value is None:
        return False
    earlier = [c.info.get(key) for c in list_complete_checkpoints(model_dir)]
    return all(value < e for e in earlier if e is not None)


def remove_older_checkpoints(model_dir: str, keep: int) -> list[int]:
    """Deletes the complete checkpoints but the newest `keep` and the newest one marked best
    (its marker's `BEST` is true): each marker first, then every `model-NNN.*` file of its
    number (pictures beside it too). Returns the numbers deleted."""
    if int(keep) < 1:
        raise ValueError(f"keep_checkpoints must be >= 1, got {keep}.")
    ckpts = list_complete_checkpoints(model_dir)
    best = [c.number for c in ckpts if c.info.get(BEST)]
    spared = {c.number for c in ckpts[-int(keep) :]} | set(best[-1:])
    removed = []
    for ckpt in ckpts:
        if ckpt.number in spared:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(str(model_dir), marker_name(ckpt.number)))
        for path in [*ckpt.files.values(), *glob.glob(file_name_pattern(model_dir, ckpt.number))]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        removed.append(ckpt.number)
    return removed


# ---- Keras models -----------------------------------------------------------------------------
def save_checkpoint(
    model_dir: str, number: int, model, info: dict | None = None, optimizer=None
) -> Checkpoint:
    """Checkpoint `number` of a Keras model: its weights, and `optimizer`'s variables when the
    optimizer is not the compiled model's own (restore them with `restore_optimizer`)."""
    files: dict[str, tuple[str, Writer]] = {"weights": (".weights.h5", model.save_weights)}
    if optimizer is not None:
        files["optimizer"] = (".optimizer.npz", optimizer_writer(optimizer))
    return write_checkpoint(model_dir, number, files, info)


def optimizer_writer(optimizer) -> Writer:
    """A `Writer` of `optimizer`'s variables (an .npz), for `write_checkpoint` roles of
    trainers with several optimizers (restore each with `restore_optimizer(..., role=)`)."""
    import numpy as np

    def write_optimizer(path: str) -> None:
        values = {f"v{i:05d}": np.asarray(v.numpy()) for i, v in enumerate(optimizer.variables)}
        with open(path, "wb") as f:
            np.savez(f, **values)

    return write_optimizer


def restore_optimizer(optimizer, ckpt: Checkpoint, role: str = "optimizer") -> None:
    """Assigns the optimizer variables saved with `save_checkpoint(..., optimizer=)` (or
    under another `role` by `optimizer_writer`).

    The optimizer must be built (`optimizer.build(model.trainable_variables)`). A file from
    an optimizer with a constant learning rate restores into one with a schedule (the saved
    rate is dropped: the schedule gives the rate)."""
    import numpy as np

    path = ckpt.path(role)
    with np.load(path) as data:
        values = [data[k] for k in sorted(k for k in data.files if k.startswith("v"))]
    names = [v.path.rsplit("/", 1)[-1] for v in optimizer.variables]
    if len(values) == len(names) + 1 and "learning_rate" not in names and values[1].ndim == 0:
        # Written by an optimizer with a constant rate (Keras keeps it as its second variable,
        # after the step counter); this one takes its rate from a schedule: drop the old rate.
        del values[1]
    if len(values) != len(optimizer.variables):
        raise ValueError(
            f"{path} holds {len(values)} optimizer variables, the optimizer has "
            f"{len(optimizer.variables)}: was it written for another model?"
        )
    for var, value in zip(optimizer.variables, values):
        var.assign(value)


def check_same_run(ckpt: Checkpoint | None, info: Mapping, keys, model_dir: str) -> None:
    """Fails when the newest checkpoint was made with other `keys` values than `info`'s
    (resuming must train the same thing)."""
    if ckpt is None:
        return
    diff = {k: (ckpt.info[k], info[k]) for k in keys if k in ckpt.info and k in info}
    diff = {k: v for k, v in diff.items() if v[0] != v[1]}
    if diff:
        details = ", ".join(f"{k}={old!r} (now {new!r})" for k, (old, new) in diff.items())
        raise ValueError(
            f"{model_dir} holds a checkpoint made with different settings: {details} "
            f"({marker_name(ckpt.number)}). Use another --model_dir, or the original "
            "settings to resume."
        )


def warm_start(
    latest: Checkpoint | None,
    initial_weights: str | None,
    info: dict,
    keys,
    model_dir: str,
    example: str,
) -> Checkpoint | None:
    """Where a run's weights come from besides its own newest checkpoint `latest`: the
    checkpoint of --initial_weights to load (a warm start at step 0, a new optimizer), or None.

    Sets info["initial_weights"] (the markers' record of where the run started): the loaded
    weights' path, or, when resuming, what `latest`'s marker recorded. A resumed run ignores
    `initial_weights` (logged). Raises FileNotFoundError when `initial_weights` holds no
    complete checkpoint (naming `example`, a folder the flag takes), and ValueError when one of
    `keys` differs between its marker and `info` (naming the marker and the key)."""
    if latest is not None:
        if "initial_weights" in latest.info:
            info["initial_weights"] = latest.info["initial_weights"]
        if initial_weights:
            logging.info("--initial_weights is not used: %s holds a checkpoint.", model_dir)
        return None
    if not initial_weights:
        return None
    path = os.path.expanduser(str(initial_weights))
    found = newest_complete_checkpoint(path) if os.path.isdir(path) else None
    if found is None:
        raise FileNotFoundError(
            f"--initial_weights={path}: no complete checkpoint there (model-NNN.json + "
            f"model-NNN.weights.h5). Give {example}."
        )
    for key in keys:
        if key in found.info and key in info and found.info[key] != info[key]:
            raise ValueError(
                f"--initial_weights: {marker_name(found.number)} in {path} has "
                f"{key}={found.info[key]!r}, this run trains {key}={info[key]!r}: start from "
                "the same model."
            )
    info["initial_weights"] = os.path.abspath(found.weights_path)
    return found


def _h5_shapes(path: str) -> list[tuple[str, tuple[int, ...]]]:
    import h5py

    shapes: list[tuple[str, tuple[int, ...]]] = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer/"):
            shapes.append((name, tuple(int(s) for s in obj.shape)))

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return shapes


def load_weights_checked(model, path: str, description: str | None = None) -> None:
    """`model.load_weights(path)`, failing with both shape lists if they do not fit.

    The model must be built. `description` names the model in the message (default: its
    class name)."""
    description = description or type(model).__name__
    if not os.path.exists(path):
        raise FileNotFoundError(f"Checkpoint file {path} does not exist.")
    expected = sorted(tuple(int(s) for s in w.shape) for w in model.weights)
    found_named = _h5_shapes(path)
    found = sorted(shape for _, shape in found_named)

    def mismatch(extra: str = "") -> ValueError:
        missing = _multiset_minus(expected, found)
        surplus = _multiset_minus(found, expected)
        return ValueError(
            f"Checkpoint {path} does not fit {description}: the model expects "
            f"{len(expected)} weight arrays, the file holds {len(found)}. "
            f"Expected shapes not in the file: {missing or 'none'}; "
            f"shapes in the file the model lacks: {surplus or 'none'}. "
            "Load it with the model class and --representation_size it was trained with "
            f"(see model-XXX.json beside it).{extra}"
        )

    if expected != found:
        raise mismatch()
    try:
        model.load_weights(path)
    except ValueError as e:
        raise mismatch(f" Keras said: {e}") from e


def _multiset_minus(a: list, b: list) -> list:
    rest = list(b)
    out = []
    for x in a:
        if x in rest:
            rest.remove(x)
        else:
            out.append(x)
    return out
