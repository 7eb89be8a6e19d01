"""The pipeline's presets: the sizes of a run, as each stage script's own flags.

A preset names the environment and the trained models that connect the stages, gives
each stage's flags by the stage script's own flag names (`scripts/...`; validated by the
script itself before anything runs, see `rl755.slurm.launcher.check_stage`). The pipeline
adds only what wires the stages together (`rl755.pipeline.stages.WIRED_FLAGS`): paths,
--environment, the names of the models a stage reads, seeds. And it says what each stage
asks SLURM for (`resources`: CPUs, memory, GPUs, time; no partition, which is the cluster's
business: `rl755.pipeline.resources`).

    preset = PRESETS["demo"]
    preset.train_encoder["representation_size"]     # 32 (scripts/models/train_obs_encoder.py)
    get_preset("demo", "DOOM_TAKE_COVER").train_encoder["representation_size"]   # 64

Every preset runs on any environment of the table (`for_environment`, `scripts/pipeline.py
--environment`): its sizes, with the models sized by the environment's `ModelPresets` and
the stages connected by the run's own directories instead of zoo names.
"""

from __future__ import annotations

import dataclasses

# The encoded dataset a run connected by directories reads (with --rollouts_pattern):
# rl755.data.registry.VAE_ENCODED.
VAE_ENCODED = "VaeEncodedRollouts"
# Stage name -> its script (relative to the repo root); a preset gives each one's flags.
STAGE_SCRIPTS = {
    "collect": "scripts/data_gen/car_racing/parallel_rollout_main.py",
    "train_encoder": "scripts/models/train_obs_encoder.py",
    "encode": "scripts/data_gen/encode_raw_rollouts.py",
    "train_sequential": "scripts/models/train_sequential_model.py",
    "train_controller": "scripts/models/train_controller.py",
    "evaluate": "scripts/models/evaluate_controller.py",
}
# How stages find the previous stages' outputs: zoo names, or the run's directories.
CONNECTIONS = ("zoo", "directories")
# Resource groups of a preset: the stages, plus the report that ends a SLURM chain.
RESOURCE_GROUPS = (*STAGE_SCRIPTS, "report")


@dataclasses.dataclass(frozen=True)
class Preset:
    """Sizes of one pipeline run.

    Attributes:
      environment: Environments name.
      encoder_name: the stage-2 encoder's registry function in saved_models (also its
        directory name); stage 3 encodes with it, stage 5 uses it.
      encoded_dataset: the stage-3 dataset class in rl755.data.<env>.encoded_rollouts.
      sequential_name: the stage-4 model's registry function (and directory name).
      controller_name: the stage-5 controller's registry function (and directory name).
      collect, train_encoder, encode, train_sequential, train_controller, evaluate: flags of
        each stage's script (`STAGE_SCRIPTS`) by their own names, e.g. train_encoder
        {"model": "vae.Vae", "train_steps": 2000, ...}.
      resources: per group (`RESOURCE_GROUPS`; "encode" covers both encode stages), what
        one job (or array task) asks SLURM for: {"cpus": int, "mem": "2G", "gpus": int,
        "time": "1:00:00"}. GPU stages ask for "gpus": 1; a cluster without GPUs runs them
        on CPUs with --gpus=0.
      description: one line for `scripts/pipeline.py`.
      shipped: the zoo rows shipped in the repository (rl755.zoo.shipped) that stand in for
        (encoder, sequential model, controller) where none were trained, as
        `find_world_model`'s last resort; empty when the environment ships none.
      connect: how a stage finds the models and data of the stages before it: "zoo" (by
        the names above, which the zoo has rows for) or "directories" (by the run's own
        directories, `rl755.pipeline.stages.Paths`: any environment of the table).
    """

    environment: str
    encoder_name: str
    encoded_dataset: str
    sequential_name: str
    controller_name: str
    collect: dict
    train_encoder: dict
    encode: dict
    train_sequential: dict
    train_controller: dict
    evaluate: dict
    resources: dict = dataclasses.field(default_factory=dict)
    description: str = ""
    shipped: tuple[str, str, str] | tuple[()] = ()
    connect: str = "zoo"

    def __post_init__(self):
        if self.connect not in CONNECTIONS:
            raise ValueError(f"Preset connect {self.connect!r}; valid: {', '.join(CONNECTIONS)}.")
        missing = [g for g in RESOURCE_GROUPS if g not in self.resources]
        if missing:
            raise ValueError(f"Preset resources lack {missing}; give each of {RESOURCE_GROUPS}.")

    def stage_flags(self, stage: str) -> dict:
        if stage not in STAGE_SCRIPTS:
            raise ValueError(f"Unknown stage {stage!r}; valid: {', '.join(STAGE_SCRIPTS)}.")
        return dict(getattr(self, stage))


def _preset(base: dict, **fields) -> Preset:
    """A Preset whose stage flags are `base`'s, updated by `fields`' (per stage)."""
    merged = {k: v for k, v in base.items() if k not in STAGE_SCRIPTS}
    for key, value in fields.items():
        if key in STAGE_SCRIPTS:
            merged[key] = {**base.get(key, {}), **value}
        elif key == "resources":
            merged[key] = {g: {**base.get(key, {}).get(g, {}), **value.get(g, {})} for g in value}
        else:
            merged[key] = value
    for stage in STAGE_SCRIPTS:
        merged.setdefault(stage, dict(base.get(stage, {})))
    return Preset(**merged)


def _resources(cpu: dict, gpu: dict, **per_group) -> dict:
    """Every group's resources: `gpu` for the GPU stages, `cpu` for the others, then
    `per_group` for the groups that need something else."""
    out = {g: dict(cpu) for g in RESOURCE_GROUPS}
    for g in ("train_encoder", "encode", "train_sequential"):
        out[g] = dict(gpu)
    for g, fields in per_group.items():
        out[g] = {**out[g], **fields}
    return out


_CAR_RACING = dict(
    environment="CAR_RACING",
    encoder_name="raw_rollout_vae_32ld",
    encoded_dataset="RawRolloutVae32ld",
    sequential_name="mdn_rnn_vae_32ld",
    controller_name="linear_controller_vae_mdn_rnn",
    collect={"policy": "HastingsRandomPolicy"},
    train_encoder={"model": "vae.Vae", "representation_size": 32},
    train_sequential={"model": "mdn_rnn.mdn_rnn", "sample_observations": True},
    train_controller={"controller": "LinearController", "mode": "real", "temperature": 1.0},
    evaluate={"compare_random": True},
)

# The sizes of a run, side by side: stage -> flag -> its value in each of these presets.
_SIZED = ("demo", "world_models", "tiny", "tiny_car_racing")
_SIZES = {
    "collect": dict(
        num_rollouts=(40, 10000, 12, 2),
        max_steps=(300, 1000, 24, 30),
        parallelism=(2, 32, 2, 2),
        rollouts_per_shard=(4, 8, 3, 1),
    ),
    "train_encoder": dict(
        train_steps=(2000, 100000, 30, 4),
        batch_size=(32, 100, 16, 8),
        learning_rate=(1e-3, 1e-4, 1e-3, 1e-3),
        obs_sampled_per_rollout=(50, 100, 8, 8),
        save_every_n_steps=(500, 5000, 15, 2),
    ),
    "train_sequential": dict(
        train_steps=(1500, 20000, 30, 4),
        batch_size=(16, 100, 4, 2),
        sequence_length=(32, 32, 8, 8),
        learning_rate=(1e-3, 1e-3, 1e-3, 1e-3),
        save_every_n_steps=(500, 1000, 15, 2),
    ),
    "train_controller": dict(
        cma_population_size=(12, 64, 4, 2),
        cma_trials_per_member=(1, 16, 1, 1),
        cma_generations=(32, 1800, 2, 1),
        rollout_max_steps=(300, 1000, 24, 20),
        sigma=(0.1, 0.1, 0.5, 0.5),
        eval_every=(8, 25, 1, 0),
        eval_episodes=(4, 100, 1, 1),
        # The tiny presets' few episodes in this process: Ray's start-up would be most of
        # their run; the Ray path has its own tests.
        parallelism=(2, 32, 0, 0),
        select_episodes=(8, 0, 0, 0),
        # The demo's 12 episodes a generation as one batch per worker (with 4, three
        # batches on two workers leave one idle a third of the time).
        envs_per_worker=(6, 4, 4, 4),
    ),
    "evaluate": dict(num_episodes=(5, 100, 2, 1), max_steps=(600, 1000, 24, 20)),
}


def _sized(name: str, base: dict, **fields) -> Preset:
    """Preset `name`: `base`, its column of `_SIZES`, then `fields` (per stage, updated)."""
    column = _SIZED.index(name)
    for stage, flags in _SIZES.items():
        fields[stage] = {
            **{f: values[column] for f, values in flags.items()},
            **fields.get(stage, {}),
        }
    return _preset(base, **fields)


# The two test presets' jobs: one CPU (a GPU for the GPU stages), 2 GB, half an hour.
_TINY_RESOURCES = _resources(
    dict(cpus=1, mem="2G", time="0:30:00"),
    dict(gpus=1, cpus=1, mem="2G", time="0:30:00"),
    collect=dict(cpus=2),  # --parallelism=2
)


PRESETS: dict[str, Preset] = {
    # About 15 minutes on a 2-core CPU: enough to see every stage work and the controller beat
    # the random policy; nowhere near the paper's score.
    "demo": _sized(
        "demo",
        _CAR_RACING,
        description="CarRacing at a small size for a 2-core CPU (about 15 minutes).",
        shipped=("raw_rollout_vae_32ld_demo", "mdn_rnn_vae_32ld_demo", "real_controller"),
        resources=_resources(
            dict(cpus=2, mem="4G", time="2:00:00"),
            dict(gpus=1, cpus=2, mem="8G", time="2:00:00"),
            report=dict(cpus=1, mem="4G", time="0:30:00"),
        ),
    ),
    # The World Models paper's settings, for a cluster (pair with --launcher=slurm).
    "world_models": _sized(
        "world_models",
        _CAR_RACING,
        description="The CarRacing zoo rows' flags (the paper's but 32-step MDN-RNN slices and "
        "100 evaluation episodes): 10,000 rollouts, population 64 x 16 trials.",
        resources=_resources(
            dict(cpus=4, mem="16G", time="1-00:00:00"),
            dict(gpus=1, cpus=4, mem="32G", time="2-00:00:00"),
            collect=dict(cpus=32),  # each of the 10 array tasks: --parallelism=32
            train_controller=dict(cpus=32, mem="32G", time="3-00:00:00"),
            report=dict(cpus=1, mem="8G", time="1:00:00"),
        ),
        encode=dict(num_sub_shards=4),
    ),
    # Seconds per stage on the fake environment: the end-to-end test.
    "tiny": _sized(
        "tiny",
        dict(
            _CAR_RACING,
            environment="FAKE_PIXELS",
            encoder_name="raw_rollout_vae_4ld",
            encoded_dataset="RawRolloutVae4ld",
            sequential_name="mdn_rnn_vae_4ld",
        ),
        description="Fake 16x16 environment, tiny models: every stage in seconds (tests).",
        resources=_TINY_RESOURCES,
        train_encoder=dict(representation_size=4),
    ),
    # CarRacing at a tiny size: real frames and real model shapes, minutes (tests).
    "tiny_car_racing": _sized(
        "tiny_car_racing",
        _CAR_RACING,
        description="CarRacing with the real model sizes, a few steps each (tests).",
        resources=_TINY_RESOURCES,
    ),
}


def get_preset(name: str, environment: str | None = None) -> Preset:
    """PRESETS[name] (strict), for `environment` if given (`for_environment`)."""
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; valid: {', '.join(sorted(PRESETS))}.")
    return for_environment(PRESETS[name], environment)


def for_environment(preset: Preset, environment: str | None) -> Preset:
    """`preset`'s run on `environment` (an Environments name, strict; None: its own).

    The preset itself when the environment is its own. Otherwise the same stage sizes
    (steps, batches, rollouts, CMA-ES) with the models sized by the environment's
    `ModelPresets` (Z = its representation_size; the catalogue sizes the rest), collection by
    `rl755.policies.exploration_policy` (its first tuned one, else the generic
    `RandomPolicy`), and the stages connected by the run's own directories (no zoo rows).
    """
    from rl755.environments import Environments
    from rl755.policies import exploration_policy

    if environment is None:
        return preset
    env = Environments.from_name(environment)
    if env.name == preset.environment:
        return preset
    z = env.presets.representation_size
    policy = exploration_policy(env)
    return dataclasses.replace(
        preset,
        environment=env.name,
        encoder_name=f"raw_rollout_vae_{z}ld",
        encoded_dataset=VAE_ENCODED,
        sequential_name=f"mdn_rnn_vae_{z}ld",
        collect={**preset.collect, "policy": policy},
        train_encoder={**preset.train_encoder, "representation_size": z},
        description=(
            f"{env.name} at this preset's sizes; models sized by its ModelPresets (Z = {z}); "
            "stages connected by the run's directories."
        ),
        shipped=(),
        connect="directories",
    )
