"""One's own cluster, described once: the "slurm" object of the rl755 config file.

`rl755.common.config` finds the file (`$RL755_CONFIG` or `~/.config/rl755/config.json`);
nothing here names a partition of any particular cluster. Every key is optional:

    {"slurm": {
        "partition": "general",          # CPU jobs (default: the cluster's default partition)
        "gpu_partition": "volta-gpu",    # jobs that ask for GPUs (default: "partition")
        "qos": null, "gpu_qos": "gpu_access", "account": null,
        "stages": {"train_controller": {"cpus": 32, "mem": "64G", "time": "3-00:00:00"}}
    }}

"stages" overrides a pipeline preset's resources per stage (`rl755.pipeline.resources`);
flags (`scripts/pipeline.py`, `scripts/launch.py`) override the file.

    res = place(Resources(gpus=1, mem="8G"))     # partition/qos/account filled from the file
"""

from __future__ import annotations

import dataclasses

from rl755.common import config
from rl755.common.errors import BadInput
from rl755.slurm.sbatch import Resources

PLACE_KEYS = ("partition", "gpu_partition", "qos", "gpu_qos", "account")
STAGE_KEYS = ("partition", "qos", "cpus", "mem", "gpus", "time")
_INTS = ("cpus", "gpus")


def check_stage_fields(fields: dict, where: str) -> dict:
    """Validates {cpus, mem, gpus, time, partition, qos} values; `where` names their origin."""
    unknown = sorted(set(fields) - set(STAGE_KEYS))
    if unknown:
        raise BadInput(f"{where}: unknown keys {unknown}; valid: {list(STAGE_KEYS)}.")
    out = {}
    for key, value in fields.items():
        if key in _INTS:
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise BadInput(f"{where}: {key}={value!r} is not an integer.") from None
        elif value is not None:
            value = str(value)
        out[key] = value
    probe = {k: v for k, v in out.items() if k in ("cpus", "mem", "gpus", "time") and v is not None}
    try:
        Resources(**probe).validate()
    except ValueError as e:
        raise BadInput(f"{where}: {e}") from None
    return out


def settings() -> dict:
    """The validated "slurm" object of the config file ({} when there is none)."""
    data = config.section("slurm")
    where = f'rl755 config file {config.config_file()}, "slurm"'
    unknown = sorted(set(data) - set(PLACE_KEYS) - {"stages"})
    if unknown:
        raise BadInput(f"{where}: unknown keys {unknown}; valid: {list(PLACE_KEYS) + ['stages']}.")
    for key in PLACE_KEYS:
        if data.get(key) is not None and not isinstance(data[key], str):
            raise BadInput(f"{where}: {key} must be a string, got {data[key]!r}.")
    stages = data.get("stages", {})
    if not isinstance(stages, dict) or not all(isinstance(v, dict) for v in stages.values()):
        raise BadInput(f'{where}: "stages" must map stage names to objects like {{"mem": "8G"}}.')
    data["stages"] = {
        name: check_stage_fields(fields, f"{where}, stages.{name}")
        for name, fields in stages.items()
    }
    return data


def place(
    resources: Resources,
    *,
    partition: str | None = None,
    gpu_partition: str | None = None,
    qos: str | None = None,
    gpu_qos: str | None = None,
    account: str | None = None,
    site: dict | None = None,
) -> Resources:
    """Fills what `resources` leaves open: partition, qos and account.

    A value already in `resources` wins; then the arguments (flags); then the config file
    (`site`, default: `settings()`). Jobs asking for GPUs go to the GPU partition (and GPU
    qos) when one is given, else to the CPU one; None = the cluster's default.
    """
    site = settings() if site is None else site
    gpu = resources.gpus > 0

    def pick(cpu_value, gpu_value, cpu_key, gpu_key):
        if gpu:
            for value in (gpu_value, site.get(gpu_key)):
                if value:
                    return value
        return cpu_value or site.get(cpu_key)

    return dataclasses.replace(
        resources,
        partition=resources.partition
        or pick(partition, gpu_partition, "partition", "gpu_partition"),
        qos=resources.qos or pick(qos, gpu_qos, "qos", "gpu_qos"),
        account=resources.account or account or site.get("account"),
    )
