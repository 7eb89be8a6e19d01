"""What each pipeline stage asks SLURM for: the preset's, then the cluster file's, then flags.

Layers, later ones win, each per field (cpus, mem, gpus, time, partition, qos):
  1. the preset (`Preset.resources[group]`: a tiny preset asks for 1-2 CPUs and 2G);
  2. the config file's "slurm" object (`rl755.slurm.site`): "stages": {group or stage: {...}};
  3. flags, all stages (`--mem=8G`), then one stage (`--mem=train_controller=4G`).
A stage asking for GPUs goes to the GPU partition (`--gpu_partition`, or "gpu_partition" in
the file), any other to `--partition` / "partition"; none given = the cluster's default.

Stage names in flags and in the file: the chain's (`encode_train`) or their group's
(`encode` = both encode stages), e.g.

    overrides = parse_overrides({"mem": ["8G", "train_controller=4G"], "gpus": ["0"]})
    resources = stage_resources(preset, "train_controller", overrides, site={})
"""

from __future__ import annotations

import dataclasses

from rl755.common.errors import BadInput
from rl755.pipeline.presets import RESOURCE_GROUPS, Preset
from rl755.slurm import site as site_config
from rl755.slurm.sbatch import Resources

# Chain stage -> its group in presets and flags (the others are their own group).
STAGE_GROUPS = {"encode_train": "encode", "encode_validation": "encode"}
CHAIN_STAGES = (
    "collect",
    "train_encoder",
    "encode_train",
    "encode_validation",
    "train_sequential",
    "train_controller",
    "evaluate",
    "report",
)
OVERRIDE_FIELDS = ("partition", "cpus", "mem", "gpus", "time", "qos")
VALID_NAMES = tuple(dict.fromkeys(CHAIN_STAGES + RESOURCE_GROUPS))


@dataclasses.dataclass(frozen=True)
class Overrides:
    """Resource flags: per field, the all-stages value (key None) and per-stage values.

    Attributes:
      fields: {field: {None | stage or group name: value}}.
      gpu_partition, gpu_qos, account: cluster-wide placement flags (None = not given).
    """

    fields: dict = dataclasses.field(default_factory=dict)
    gpu_partition: str | None = None
    gpu_qos: str | None = None
    account: str | None = None

    def layer(self, name: str | None) -> dict:
        return {f: v[name] for f, v in self.fields.items() if name in v}


def parse_overrides(
    values: dict[str, list[str] | None],
    gpu_partition: str | None = None,
    gpu_qos: str | None = None,
    account: str | None = None,
) -> Overrides:
    """{"mem": ["8G", "train_controller=4G"]} -> Overrides; bad names or values -> BadInput.

    Each value is VALUE (every stage) or STAGE=VALUE (one stage or group); a field may be
    given several times, a later value for the same stage replacing an earlier one.
    """
    fields: dict[str, dict] = {}
    for field, items in values.items():
        if field not in OVERRIDE_FIELDS:
            raise ValueError(f"Unknown resource field {field!r}; valid: {OVERRIDE_FIELDS}.")
        for item in items or []:
            name, value = item.split("=", 1) if "=" in item else (None, item)
            flag = f"--{field}={item}"
            if name is not None and name not in VALID_NAMES:
                raise BadInput(
                    f"{flag}: unknown stage {name!r}; use --{field}=VALUE for every stage or "
                    f"--{field}=STAGE=VALUE with STAGE one of {', '.join(VALID_NAMES)}."
                )
            checked = site_config.check_stage_fields({field: value}, flag)
            fields.setdefault(field, {})[name] = checked[field]
    return Overrides(fields, gpu_partition=gpu_partition, gpu_qos=gpu_qos, account=account)


def stage_resources(
    preset: Preset, stage: str, overrides: Overrides | None = None, site: dict | None = None
) -> Resources:
    """The Resources of chain stage `stage` (module doc for the layers)."""
    if stage not in CHAIN_STAGES:
        raise ValueError(f"Unknown pipeline stage {stage!r}; valid: {', '.join(CHAIN_STAGES)}.")
    overrides = overrides or Overrides()
    site = site_config.settings() if site is None else site
    group = STAGE_GROUPS.get(stage, stage)
    fields = dict(preset.resources[group])
    file_stages = site.get("stages", {})
    unknown = sorted(set(file_stages) - set(VALID_NAMES))
    if unknown:
        raise BadInput(
            f"The rl755 config file's slurm.stages names unknown stages {unknown}; "
            f"valid: {', '.join(VALID_NAMES)}."
        )
    for layer in (
        file_stages.get(group, {}),
        file_stages.get(stage, {}),
        overrides.layer(None),
        overrides.layer(group),
        overrides.layer(stage),
    ):
        fields.update({k: v for k, v in layer.items() if v is not None})
    # An all-stages --partition (--qos) places the CPU stages, and the GPU stages when no GPU
    # partition (qos) is given; a per-stage one (flag or file) wins for that stage.
    per_stage = (
        overrides.layer(stage),
        overrides.layer(group),
        file_stages.get(stage, {}),
        file_stages.get(group, {}),
    )

    def explicit(key: str) -> str | None:
        return next((layer[key] for layer in per_stage if layer.get(key)), None)

    resources = Resources(
        partition=explicit("partition"),
        cpus=int(fields.get("cpus", 1)),
        mem=str(fields.get("mem", "2G")),
        gpus=int(fields.get("gpus", 0)),
        time=str(fields.get("time", "1:00:00")),
        qos=explicit("qos"),
    )
    everywhere = overrides.layer(None)
    return site_config.place(
        resources,
        partition=everywhere.get("partition"),
        gpu_partition=overrides.gpu_partition,
        qos=everywhere.get("qos"),
        gpu_qos=overrides.gpu_qos,
        account=overrides.account,
        site=site,
    )


def flag_hint() -> str:
    """What to change when a request can never start, in scripts/pipeline.py's flags."""
    return (
        "Change the stage's request with scripts/pipeline.py flags, e.g. --mem=STAGE=4G "
        "--cpus=STAGE=1 --gpus=STAGE=0 --time=STAGE=1:00:00 (or without STAGE= for every "
        "stage), --partition / --gpu_partition, or describe your cluster once in the rl755 "
        'config file ("slurm": {"partition": ..., "gpu_partition": ..., "stages": {...}}; '
        "see docs/guides/slurm.md)."
    )
