"""Recipes: a headline result as an ordered list of stage-script steps (`scripts/pipeline.py
--preset=<recipe>`).

A preset (`rl755.pipeline.presets`) runs each of the five stages once. A recipe is what a
headline result really took: several collection sets with different policies, several
encodings, a sequential model trained in phases on the growing data, a controller whose
rollouts become data, CMA-ES runs that start where earlier ones ended, evaluations. Each
step is one run of a stage script (`STAGE_SCRIPTS`) with its own flags, so the steps are
exactly the commands a person would type.

Paths in a step's flags are written with three tokens, replaced when the recipe is built for
an output directory:

    <data>     <out_dir>/data/<env folder>      (raw and encoded rollouts)
    <models>   <out_dir>/models/<env folder>    (trained models and controllers)
    <out>      <out_dir>

    Step("collect_hold", "collect", {"policy": "RepeatRandomPolicy", "num_rollouts": 800,
         "out_dir": "<data>/raw_rollouts_hold", "seed": 757, ...})

The pipeline adds `--environment` to every step and `--deterministic` when asked; a run's
`--seed` S is added to every step's seed except the evaluations' (so S = 0 is the recipe as
documented, and evaluations stay on the results page's seeds). Collection steps always run
as one job with one seed, locally and on SLURM, so their rollouts are a function of their
flags alone: `rl755.pipeline.pack` leaves them out of an archive and they are collected again.
"""

from __future__ import annotations

import dataclasses
import os

from rl755.environments import Environments
from rl755.pipeline.presets import RESOURCE_GROUPS, STAGE_SCRIPTS

TOKENS = ("<data>", "<models>", "<out>")
RECIPE_FILE = "recipe.json"  # the recipe's name, seed and code version, in out_dir
# Flags a step may not set: the pipeline sets them (the environment, determinism).
RESERVED_FLAGS = ("environment", "deterministic")
# The flag naming where each kind of step writes (its run records go there too).
OUTPUT_FLAG = {
    "collect": "out_dir",
    "train_encoder": "model_dir",
    "encode": "out_dir",
    "train_sequential": "model_dir",
    "train_controller": "model_dir",
    "evaluate": "out_dir",
}


@dataclasses.dataclass(frozen=True)
class Step:
    """One run of a stage script.

    Attributes:
      name: unique in the recipe (the SLURM job name, the summary's row).
      stage: the kind of step, a key of `STAGE_SCRIPTS` (which script runs, which SLURM
        resources it asks for).
      flags: the script's flags by its own names; paths written with `TOKENS`.
      after: names of earlier steps this one needs; None: the previous step. Only SLURM
        uses it (independent steps run side by side); locally steps run in order.
    """

    name: str
    stage: str
    flags: dict
    after: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.stage not in STAGE_SCRIPTS:
            raise ValueError(
                f"Step {self.name!r}: unknown stage {self.stage!r}; valid: "
                f"{', '.join(STAGE_SCRIPTS)}."
            )
        reserved = sorted(set(self.flags) & set(RESERVED_FLAGS))
        if reserved:
            raise ValueError(f"Step {self.name!r} sets {reserved}; the pipeline sets them.")
        if OUTPUT_FLAG[self.stage] not in self.flags:
            raise ValueError(f"Step {self.name!r} needs --{OUTPUT_FLAG[self.stage]}.")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A headline result's whole recipe.

    Attributes:
      environment: Environments name.
      steps: in the order they run locally.
      description: one line for `scripts/pipeline.py`.
      wall_time: {"2 cores": ..., "slurm": ...}: expected wall time, estimated from the
        compute the steps took when the result was made.
      resources: per group (`RESOURCE_GROUPS`), what one SLURM job asks for, as a preset's.
      evaluation_seed: the first seed of every evaluation step (not shifted by --seed).
    """

    environment: str
    steps: tuple[Step, ...]
    description: str
    wall_time: dict
    resources: dict
    evaluation_seed: int = 1000

    def __post_init__(self):
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"Step names must be unique, got {names}.")
        for i, step in enumerate(self.steps):
            unknown = sorted(set(step.after or ()) - set(names[:i]))
            if unknown:
                raise ValueError(f"Step {step.name!r} is after {unknown}: not earlier steps.")
        missing = [g for g in RESOURCE_GROUPS if g not in self.resources]
        if missing:
            raise ValueError(f"Recipe resources lack {missing}; give each of {RESOURCE_GROUPS}.")

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise ValueError(f"No step {name!r}; valid: {', '.join(s.name for s in self.steps)}.")


def expand(value: object, out_dir: str, env: Environments) -> object:
    """`value` with the path tokens replaced (other values as they are)."""
    if not isinstance(value, str):
        return value
    folder = env.folder_name
    return (
        value.replace("<data>", os.path.join(out_dir, "data", folder))
        .replace("<models>", os.path.join(out_dir, "models", folder))
        .replace("<out>", out_dir)
    )


def step_flags(
    recipe: Recipe, step: Step, out_dir: str, seed: int = 0, deterministic: bool | None = None
) -> dict:
    """The flags `step` runs with in `out_dir` (absolute paths, the run's seed, the wiring)."""
    env = Environments.from_name(recipe.environment)
    out_dir = os.path.abspath(out_dir)
    flags = {"environment": env.name}
    for name, value in step.flags.items():
        flags[name] = expand(value, out_dir, env)
    if step.stage != "evaluate" and "seed" in flags:
        flags["seed"] = int(flags["seed"]) + int(seed)
    if deterministic is not None:
        flags["deterministic"] = bool(deterministic)
    return flags


def output_dir(recipe: Recipe, step: Step, out_dir: str) -> str:
    """Where `step` writes (and keeps its run records)."""
    env = Environments.from_name(recipe.environment)
    return expand(step.flags[OUTPUT_FLAG[step.stage]], os.path.abspath(out_dir), env)


def build_recipe_stages(
    recipe: Recipe,
    out_dir: str,
    seed: int = 0,
    resources=None,
    deterministic: bool | None = None,
):
    """The recipe as `rl755.slurm.chain.Stage`s (absolute script paths, one job each).

    resources: step kind (a chain stage name of `rl755.pipeline.resources`) -> Resources;
      default: the recipe's own, without the config file or flags.
    """
    from rl755.pipeline.resources import stage_resources
    from rl755.pipeline.stages import REPO_ROOT
    from rl755.slurm.chain import Stage

    if resources is None:

        def resources(kind):
            return stage_resources(recipe, kind, site={})

    stages = []
    for step in recipe.steps:
        kind = "encode_train" if step.stage == "encode" else step.stage
        extra = {} if step.after is None else {"after": tuple(step.after)}
        stages.append(
            Stage(
                step.name,
                os.path.join(REPO_ROOT, STAGE_SCRIPTS[step.stage]),
                step_flags(recipe, step, out_dir, seed, deterministic),
                resources(kind),
                **extra,
            )
        )
    return stages


def collection_dirs(recipe: Recipe, out_dir: str) -> list[str]:
    """The output directories of the recipe's collection steps (re-created from flags)."""
    return [output_dir(recipe, s, out_dir) for s in recipe.steps if s.stage == "collect"]


# ---- helpers of the recipe definitions (recipe_doom.py, recipe_car_racing.py) ----
ENCODED = "<data>/encoded_rollouts"


def resources_by_group(cpu: dict, gpu: dict, **per_group) -> dict:
    out = {g: dict(cpu) for g in RESOURCE_GROUPS}
    for g in ("train_encoder", "encode", "train_sequential"):
        out[g] = dict(gpu)
    for g, fields in per_group.items():
        out[g] = {**out[g], **fields}
    return out


FULL_RESOURCES = resources_by_group(
    dict(cpus=2, mem="8G", time="8:00:00"),
    dict(gpus=1, cpus=4, mem="16G", time="12:00:00"),
    collect=dict(cpus=2, mem="8G", time="2:00:00"),  # --parallelism=2, as the result was made
    train_controller=dict(cpus=2, mem="8G", time="12:00:00"),
)
TINY_RESOURCES = resources_by_group(
    dict(cpus=1, mem="2G", time="0:30:00"), dict(gpus=1, cpus=1, mem="4G", time="0:30:00")
)


def encode_steps(name: str, encoder_dir: str, raw_dir: str, out_dir: str, after: tuple) -> list:
    """Both splits of one collection set encoded by the VAE in `encoder_dir`."""
    return [
        Step(
            f"{name}_{split}",
            "encode",
            {
                "model": "vae.Vae",
                "model_dir": encoder_dir,
                "split": split,
                "rollouts_pattern": raw_dir + "/rollouts-{split}*.tfrecord-*",
                "out_dir": out_dir,
            },
            after=after,
        )
        for split in ("train", "validation")
    ]


def collect_flags(raw_dir: str, seed: int, size: dict, **flags) -> dict:
    return {
        "num_rollouts": size["rollouts"],
        "max_steps": size["max_steps"],
        "parallelism": size["parallelism"],
        "out_format": "tfrecord",
        "compression": "GZIP",
        "out_dir": raw_dir,
        "seed": seed,
        **({"rollouts_per_shard": size["per_shard"]} if size.get("per_shard") else {}),
        **flags,
    }
