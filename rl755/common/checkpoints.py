"""Encoder checkpoints in a model directory, written so a reader never sees half of one.

A checkpoint `N` of a model directory is two files:

    model-003.weights.h5       `model.save_weights`: the model's weights and, for a compiled
                               model, its optimizer's variables (step counter, Adam moments)
                               under the file's "optimizer" group, so a resume is exact
    model-003.json             {"checkpoint_number", "step", "model", "environment",
                                "representation_size", "files", losses...}

Each file is written under a temporary name and renamed into place; the `.json` is renamed
last, so a checkpoint is *complete* exactly when its `.json` and the files it lists exist.
To restore the optimizer too, compile the model and `optimizer.build(model.trainable_variables)`
before loading; an uncompiled model (inference) loads the same file and ignores that part.
Weights copied by hand without the `.json` can still be loaded by naming the file.

    ckpt = newest_complete_checkpoint(model_dir)   # Checkpoint or None
    load_weights_checked(model, ckpt.weights_path) # clear error on a size/architecture mismatch
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re

from rl755.common import sharded_io

_JSON_RE = re.compile(r"^model-(\d+)\.json$")
_WEIGHTS_RE = re.compile(r"^model-(\d+)\.weights\.h5$")


def weights_name(number: int) -> str:
    return f"model-{number:03d}.weights.h5"


@dataclasses.dataclass
class Checkpoint:
    """One complete checkpoint (see the module docstring)."""

    number: int
    weights_path: str
    info: dict

    @property
    def step(self) -> int:
        return int(self.info.get("step", 0))


def list_complete_checkpoints(model_dir: str) -> list[Checkpoint]:
    """Complete checkpoints of `model_dir`, oldest first (temporary files are ignored)."""
    out = []
    for path in glob.glob(os.path.join(str(model_dir), "model-*.json")):
        m = _JSON_RE.match(os.path.basename(path))
        if not m:
            continue
        try:
            with open(path) as f:
                info = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        files = info.get("files", {})
        weights = os.path.join(str(model_dir), files.get("weights", weights_name(int(m.group(1)))))
        if not os.path.exists(weights):
            continue
        out.append(Checkpoint(int(m.group(1)), weights, info))
    return sorted(out, key=lambda c: c.number)


def newest_complete_checkpoint(model_dir: str) -> Checkpoint | None:
    ckpts = list_complete_checkpoints(model_dir)
    return ckpts[-1] if ckpts else None


def newest_weights_file(model_dir: str) -> str | None:
    """The newest complete checkpoint's weights, else the highest-numbered weights file."""
    ckpt = newest_complete_checkpoint(model_dir)
    if ckpt is not None:
        return ckpt.weights_path
    numbered = []
    for path in glob.glob(os.path.join(str(model_dir), "model-*.weights.h5")):
        m = _WEIGHTS_RE.match(os.path.basename(path))
        if m:
            numbered.append((int(m.group(1)), path))
    return max(numbered)[1] if numbered else None


def save_checkpoint(model_dir: str, number: int, model, info: dict | None = None) -> Checkpoint:
    """Writes checkpoint `number` (weights with optimizer state, then the `.json`), atomically."""
    os.makedirs(str(model_dir), exist_ok=True)
    weights_path = os.path.join(str(model_dir), weights_name(number))
    tmp = sharded_io.tmp_path_for(weights_path, ".weights.h5")
    try:
        model.save_weights(tmp)
        os.replace(tmp, weights_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    full_info = dict(info or {})
    full_info.update(checkpoint_number=number, files={"weights": os.path.basename(weights_path)})
    with sharded_io.atomic_output(os.path.join(str(model_dir), f"model-{number:03d}.json")) as t:
        with open(t, "w") as f:
            json.dump(full_info, f, indent=2, sort_keys=True, default=str)
    return Checkpoint(number, weights_path, full_info)


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
