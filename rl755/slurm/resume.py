"""What a rerun of a chain need not submit: stages done already, and jobs still queued.

A stage is done when every one of its processes (array tasks x instances) has a run record
(`<out_dir>/runs/*.json`, `rl755.common.run_record`) with status "completed" whose flags
include the process's flags, values compared as the command line would spell them. A
changed flag (more steps, another seed) makes the stage run again, and it resumes from its
outputs. A job is still queued when the chain's last record (`<dir>/chain-*.json`, written
by `submit_chain`) names it for the same flags and SLURM says it is pending or running.

    done = stage_done(script_flags_instances)        # [[{flag: value}, ...], ...]
    record = latest_chain_record("/scratch/me/run/slurm")
"""

from __future__ import annotations

import datetime
import glob
import json
import os
from collections.abc import Mapping, Sequence

from rl755.common import run_record
from rl755.common.sharded_io import write_json_atomic

CHAIN_PREFIX = "chain-"
ACTIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED")


def _spelled(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_spelled(v) for v in value)
    return str(value)


def same_value(asked: object, recorded: object) -> bool:
    """Whether a flag value and a record's parsed value mean the same ("3" == 3, 1e-3 == 0.001)."""
    a, b = _spelled(asked), _spelled(recorded)
    if a.lower() == b.lower():
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return False


def _matches(flags: Mapping[str, object], recorded: Mapping[str, object]) -> bool:
    return all(
        name in recorded and same_value(value, recorded[name])
        for name, value in flags.items()
        if value is not None
    )


def completed_record(out_dir: str, flags: Mapping[str, object]) -> dict | None:
    """The latest completed run record in `<out_dir>/runs` whose flags include `flags`."""
    records = run_record.read_records(os.path.join(out_dir, run_record.RUNS_SUBDIR))
    for record in reversed(records):  # newest first
        if record.get("status") == "completed" and _matches(flags, record.get("flags") or {}):
            return record
    return None


def stage_done(out_dir: str | None, instances: Sequence[Sequence[Mapping]]) -> bool:
    """True if every process's flags (instances[task][instance]) have a completed record."""
    if not out_dir:
        return False
    return all(completed_record(out_dir, flags) for task in instances for flags in task)


# ---------------------------------------------------------------- chain records
def write_chain_record(directory: str, stages: list[dict], label: str = "chain") -> str:
    """`<directory>/chain-<time>.json`: the chain's stages in order, with their job ids."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = os.path.join(directory, f"{CHAIN_PREFIX}{stamp}.json")
    write_json_atomic(
        path,
        {
            "label": label,
            "submit_time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "stages": stages,
        },
    )
    return path


def chain_records(directory: str) -> list[str]:
    """Paths of the chain records in `directory`, oldest first."""
    return sorted(glob.glob(os.path.join(glob.escape(directory), f"{CHAIN_PREFIX}*.json")))


def read_chain_record(path: str) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("stages"), list) else None


def latest_chain_record(directory: str | None) -> dict | None:
    for path in reversed(chain_records(directory) if directory else []):
        data = read_chain_record(path)
        if data is not None:
            data["_path"] = path
            return data
    return None
