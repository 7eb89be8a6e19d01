"""Where a user's data and trained models live.

Resolution order for each setting (first found wins):
  1. the environment variable (`RL755_DATA_DIR`, `RL755_MODELS_DIR`);
  2. the user config file, `$RL755_CONFIG` or `~/.config/rl755/config.json`, e.g.
         {"data_dir": "/pine/scr/u/me/rl755_data", "models_dir": "/pine/scr/u/me/rl755_models"}
  3. the default, `~/rl755_data` and `~/rl755_models`.

The same file may describe the SLURM cluster under "slurm" (read by `section("slurm")`,
validated by `rl755.slurm.site`), e.g.
    {"slurm": {"partition": "general", "gpu_partition": "volta-gpu", "gpu_qos": "gpu_access"}}

Per-environment locations follow one layout, so every environment folder looks alike:
    <data_dir>/<env folder>/raw_rollouts/rollouts-{split}*.tfrecord-*
    <data_dir>/<env folder>/encoded_rollouts/<name>/encoded-{split}*.tfrecord-*
    <models_dir>/<env folder>/<model name>/
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_SETTINGS = {
    "data_dir": ("RL755_DATA_DIR", "~/rl755_data"),
    "models_dir": ("RL755_MODELS_DIR", "~/rl755_models"),
}
# Settings that are JSON objects, each validated by the code that reads it.
_SECTIONS = ("slurm",)


def config_file() -> Path:
    return Path(os.environ.get("RL755_CONFIG", "~/.config/rl755/config.json")).expanduser()


def _load_file() -> dict:
    path = config_file()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(
            f"rl755 config file {path} is not valid JSON ({e}). Fix or delete it."
        ) from e
    if not isinstance(data, dict):
        raise ValueError(f"rl755 config file {path} must hold a JSON object, got {type(data)}.")
    unknown = set(data) - set(_SETTINGS) - set(_SECTIONS)
    if unknown:
        raise ValueError(
            f"rl755 config file {path} has unknown keys {sorted(unknown)}; "
            f"valid keys: {sorted(set(_SETTINGS) | set(_SECTIONS))}."
        )
    for name in _SECTIONS:
        if not isinstance(data.get(name, {}), dict):
            raise ValueError(f'rl755 config file {path}: "{name}" must be a JSON object.')
    return data


def get(name: str) -> Path:
    """Returns the resolved path of setting `name` ("data_dir" or "models_dir")."""
    if name not in _SETTINGS:
        raise ValueError(f"Unknown rl755 setting {name!r}; valid: {sorted(_SETTINGS)}.")
    env_var, default = _SETTINGS[name]
    value = os.environ.get(env_var) or _load_file().get(name) or default
    return Path(value).expanduser()


def section(name: str) -> dict:
    """The JSON object `name` of the config file ({} when absent), e.g. section("slurm")."""
    if name not in _SECTIONS:
        raise ValueError(f"Unknown rl755 config section {name!r}; valid: {list(_SECTIONS)}.")
    return dict(_load_file().get(name, {}))


def data_dir() -> Path:
    return get("data_dir")


def models_dir() -> Path:
    return get("models_dir")


def env_data_dir(folder_name: str) -> Path:
    """`<data_dir>/<env folder>`."""
    return data_dir() / folder_name


def env_models_dir(folder_name: str) -> Path:
    """`<models_dir>/<env folder>`."""
    return models_dir() / folder_name


def describe() -> str:
    """Human-readable summary (`python -m rl755.common.config`)."""
    lines = [f"config file: {config_file()} ({'found' if config_file().exists() else 'absent'})"]
    for name, (env_var, _) in _SETTINGS.items():
        lines.append(f"{name}: {get(name)}   (override with ${env_var})")
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
