"""Shipped models: trained zoo rows committed in the repository, so they load with no training.

A shipped copy of the row `<name>` of an environment lives in

    <shipped root>/<env folder>/<name>/      (root: rl755/zoo/shipped, or $RL755_SHIPPED_DIR)
        shipped.json           what it is and where it came from (`RECORD_FILE`, see ship.py)
        model-NNN.json         encoders, sequential models: a checkpoint marker
        model-NNN.weights.h5   (rl755.common.checkpoints) listing the weights, stored float16,
                               without the optimizer; Keras casts them back to float32 on load
        controller.json        controllers: the trained controller's files
        controller_params.npy  (rl755.controller.saved), parameters float32

so the loaders read a shipped folder like any model dir. `rl755.zoo.ship.ship_model` writes
it (scripts/dev/ship_model.py). All shipped models together stay under `SIZE_LIMIT_BYTES`.

A row loads the user's trained copy (`<models_dir>/<env folder>/<name>/`) when there is one
(`has_trained_copy`), else the shipped copy (`ZooModel.load`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rl755.common import checkpoints

#: Overrides the shipped root (tests; a checkout's models elsewhere).
ENV_VAR = "RL755_SHIPPED_DIR"
#: The package's own folder of shipped models.
PACKAGE_ROOT = Path(__file__).resolve().parent / "shipped"
#: All shipped models together (the repository's budget, issue #12).
SIZE_LIMIT_BYTES = 60 * 10**6
#: The record of a shipped copy; a folder without it is not a shipped model.
RECORD_FILE = "shipped.json"
#: A trained controller's files (rl755.controller.saved.META_FILE, PARAMS_FILE).
CONTROLLER_FILES = ("controller.json", "controller_params.npy")

TRAINED, SHIPPED = "trained", "shipped"
SOURCES = (TRAINED, SHIPPED)


def root() -> Path:
    """Where shipped models are: $RL755_SHIPPED_DIR, else the package's folder."""
    override = os.environ.get(ENV_VAR)
    return Path(override).expanduser() if override else PACKAGE_ROOT


def shipped_dir(row, base: str | os.PathLike | None = None) -> Path:
    """`<root>/<env folder>/<name>` of a zoo row (`base` replaces the root)."""
    return Path(base or root()) / row.folder_name / row.name


def is_shipped(row, base: str | os.PathLike | None = None) -> bool:
    return (shipped_dir(row, base) / RECORD_FILE).exists()


def read_record(row, base: str | os.PathLike | None = None) -> dict:
    path = shipped_dir(row, base) / RECORD_FILE
    with open(path) as f:
        return json.load(f)


def has_trained_copy(kind: str, model_dir: str | os.PathLike) -> bool:
    """Whether `model_dir` holds a trained model of `kind` the loaders can read: a controller's
    files, or (encoders, sequential models) a weights checkpoint."""
    model_dir = str(model_dir)
    if kind == "controller":
        return all(os.path.exists(os.path.join(model_dir, f)) for f in CONTROLLER_FILES)
    return checkpoints.newest_weights_file(model_dir) is not None


def folder_size(path: str | os.PathLike) -> int:
    """Bytes of the files under `path`, hidden (temporary) entries skipped."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(str(path)):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        total += sum(
            os.path.getsize(os.path.join(dirpath, f)) for f in filenames if not f.startswith(".")
        )
    return total


def shipped_rows(base: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """(env folder, name) of every shipped copy under the root, sorted."""
    base = Path(base or root())
    if not base.is_dir():
        return []
    return sorted(
        (env_dir.name, model_dir.name)
        for env_dir in base.iterdir()
        if env_dir.is_dir() and not env_dir.name.startswith(".")
        for model_dir in env_dir.iterdir()
        if (model_dir / RECORD_FILE).exists() and not model_dir.name.startswith(".")
    )


def ship_command(row) -> str:
    return f"python scripts/dev/ship_model.py --environment={row.environment} --name={row.name}"
