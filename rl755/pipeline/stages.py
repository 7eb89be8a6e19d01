"""The pipeline's stages: where each reads and writes, and the chain of stage scripts.

Everything a run makes lives under `out_dir`:

    data/<env>/raw_rollouts/             stage 1: random-policy rollouts (GZIP TFRecord shards)
    models/<env>/<encoder name>/         stage 2: VAE checkpoints, reconstructions PNG, TensorBoard
    data/<env>/encoded_rollouts/<encoder name>/    stage 3: encoded rollouts
    models/<env>/<sequential name>/      stage 4: MDN-RNN / transformer / LSTM checkpoints
    models/<env>/<controller name>/      stage 5: CMA-ES state, best controller, learning_curve.png
    evaluation/                          evaluation.json (controller vs random policy), episode.gif
    pictures/                            the pictures worth looking at, collected in one place
    pipeline.json                        the resolved preset and seed of the run
    pipeline_summary.json                stage, wall time, outputs, scores
    slurm/chain-<time>.json              SLURM: the chain's jobs (scripts/status.py sums it up)

Each stage's script reads the previous stage's outputs from the standard locations, because
the stages run with `RL755_DATA_DIR=<out_dir>/data` and `RL755_MODELS_DIR=<out_dir>/models`.
A preset with `connect="zoo"` (the shipped environments' own presets) names the trained
models by their zoo rows (`rl755.zoo`); one with `connect="directories"` (any environment of
the table: `pipeline.py --environment=NAME`) passes the directories themselves: encode gets
the encoder's --model_dir, stage 4 the encoded shards' --rollouts_pattern, stage 5
--encoder_dir and --sequential_model_dir.
"""

from __future__ import annotations

import dataclasses
import os

from rl755.environments import Environments
from rl755.pipeline.presets import STAGE_SCRIPTS, Preset

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Flags the pipeline sets to connect the stages; a preset may not set them.
WIRED_FLAGS = {
    "collect": ("environment", "out_dir", "out_format", "compression", "seed", "deterministic"),
    "train_encoder": ("environment", "model_dir", "num_threads", "seed", "deterministic"),
    "encode": (
        "environment",
        "model",
        "model_dir",
        "split",
        "out_dir",
        "num_threads",
        "deterministic",
    ),
    "train_sequential": (
        "environment",
        "model_dir",
        "rollouts_dataset",
        "rollouts_pattern",
        "num_threads",
        "seed",
        "deterministic",
    ),
    "train_controller": (
        "environment",
        "model_dir",
        "encoder",
        "sequential_model",
        "encoder_dir",
        "encoder_model",
        "representation_size",
        "sequential_model_dir",
        "seed",
        "deterministic",
    ),
    "evaluate": ("environment", "model_dir", "out_dir", "seed", "deterministic"),
}
PIPELINE_SCRIPT = "scripts/pipeline.py"
RUN_FILE = "pipeline.json"  # the resolved preset and seed of the run in out_dir
ARRAY_ABOVE_ROLLOUTS = 200  # collection runs as a SLURM job array above this many rollouts


@dataclasses.dataclass
class Paths:
    out_dir: str
    env: Environments

    @property
    def data_dir(self) -> str:
        return os.path.join(self.out_dir, "data")

    @property
    def models_dir(self) -> str:
        return os.path.join(self.out_dir, "models")

    def model_dir(self, name: str) -> str:
        return os.path.join(self.models_dir, self.env.folder_name, name)

    @property
    def raw_dir(self) -> str:
        return os.path.join(self.data_dir, self.env.folder_name, "raw_rollouts")

    def encoded_dir(self, encoder_name: str) -> str:
        return os.path.join(self.data_dir, self.env.folder_name, "encoded_rollouts", encoder_name)

    @property
    def evaluation_dir(self) -> str:
        return os.path.join(self.out_dir, "evaluation")

    @property
    def pictures_dir(self) -> str:
        return os.path.join(self.out_dir, "pictures")


def stage_environ(out_dir: str) -> dict[str, str]:
    """The environment variables every stage runs with."""
    out_dir = os.path.abspath(out_dir)
    return {
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "RL755_DATA_DIR": os.path.join(out_dir, "data"),
        "RL755_MODELS_DIR": os.path.join(out_dir, "models"),
    }


def _flags(preset: Preset, stage: str, **wired) -> dict:
    """The preset's flags of `stage` plus the wiring (which the preset may not set)."""
    own = preset.stage_flags(stage)
    clash = sorted(set(own) & set(WIRED_FLAGS[stage]))
    if clash:
        raise ValueError(
            f"Preset flags {clash} of stage {stage!r} are set by the pipeline itself "
            f"(it sets {', '.join(WIRED_FLAGS[stage])})."
        )
    return {**{k: v for k, v in wired.items() if v is not None}, **own}


def build_stages(
    preset: Preset,
    out_dir: str,
    seed: int = 0,
    threads: int | None = None,
    resources=None,
    report: bool = False,
    deterministic: bool | None = None,
):
    """The chain as `rl755.slurm.chain.Stage`s (absolute script paths).

    Args:
      resources: stage name -> `Resources`; default: the preset's alone
        (`rl755.pipeline.resources.stage_resources` without flags or config file).
      report: end with the "report" stage (`scripts/pipeline.py --report`: the summary table
        and the pictures, as a local run ends), for SLURM.
      deterministic: every stage gets `seed` (evaluation: 10,000 + seed, episodes unseen in
        training) and, unless None, `--deterministic` / `--nodeterministic`; None leaves each
        stage to decide on the machine it runs on (`rl755.common.determinism`: on without a GPU).
    """
    from rl755.pipeline.resources import stage_resources
    from rl755.slurm.chain import Stage
    from rl755.slurm.launcher import ArraySpec

    if resources is None:

        def resources(name):
            return stage_resources(preset, name, site={})

    env = Environments.from_name(preset.environment)
    paths = Paths(os.path.abspath(out_dir), env)
    e = env.name
    by_dirs = preset.connect == "directories"
    encoder_dir = paths.model_dir(preset.encoder_name)
    encoded_dir = paths.encoded_dir(preset.encoder_name)
    sequential_dir = paths.model_dir(preset.sequential_name)

    def script(stage: str) -> str:
        return os.path.join(REPO_ROOT, STAGE_SCRIPTS[stage])

    small = int(preset.collect["num_rollouts"]) <= ARRAY_ABOVE_ROLLOUTS
    # Array tasks need distinct seeds (same seed = same rollouts): the decimal string
    # "<seed + 1>000<task>" is unique per (seed, task) and fixed across reruns, so a rerun
    # or requeue resumes instead of duplicating.
    collect_seed = seed if small else f"{seed + 1}000{{global_index}}"
    collect = _flags(
        preset,
        "collect",
        environment=e,
        out_format="tfrecord",
        compression="GZIP",
        out_dir=paths.raw_dir,
        seed=collect_seed,
        deterministic=deterministic,
    )
    stages = [
        Stage(
            "collect",
            script("collect"),
            collect,
            resources("collect"),
            array=None if small else ArraySpec(num_tasks=10, split=("num_rollouts",)),
        ),
        Stage(
            "train_encoder",
            script("train_encoder"),
            _flags(
                preset,
                "train_encoder",
                environment=e,
                model_dir=encoder_dir,
                num_threads=threads,
                seed=seed,
                deterministic=deterministic,
            ),
            resources("train_encoder"),
        ),
    ]
    for split in ("train", "validation"):
        encode = _flags(
            preset,
            "encode",
            environment=e,
            model=preset.train_encoder["model"] if by_dirs else preset.encoder_name,
            model_dir=encoder_dir if by_dirs else None,
            split=split,
            out_dir=encoded_dir,
            num_threads=threads,
            deterministic=deterministic,
        )
        stages.append(
            Stage(
                f"encode_{split}",
                script("encode"),
                encode,
                resources(f"encode_{split}"),
                after=("train_encoder",),
            )
        )
    controller_dir = paths.model_dir(preset.controller_name)
    stages += [
        Stage(
            "train_sequential",
            script("train_sequential"),
            _flags(
                preset,
                "train_sequential",
                environment=e,
                rollouts_dataset=preset.encoded_dataset,
                rollouts_pattern=(
                    os.path.join(encoded_dir, "encoded-{split}*.tfrecord-*") if by_dirs else None
                ),
                model_dir=sequential_dir,
                num_threads=threads,
                seed=seed,
                deterministic=deterministic,
            ),
            resources("train_sequential"),
            after=("encode_train", "encode_validation"),
        ),
        Stage(
            "train_controller",
            script("train_controller"),
            _flags(
                preset,
                "train_controller",
                environment=e,
                **_controller_inputs(preset, encoder_dir, sequential_dir),
                model_dir=controller_dir,
                seed=seed,
                deterministic=deterministic,
            ),
            resources("train_controller"),
        ),
        Stage(
            "evaluate",
            script("evaluate"),
            _flags(
                preset,
                "evaluate",
                environment=e,
                model_dir=controller_dir,
                seed=10_000 + seed,
                out_dir=paths.evaluation_dir,
                deterministic=deterministic,
            ),
            resources("evaluate"),
        ),
    ]
    if report:
        stages.append(
            Stage(
                "report",
                os.path.join(REPO_ROOT, PIPELINE_SCRIPT),
                {"out_dir": paths.out_dir, "report": True},
                resources("report"),
            )
        )
    return stages


def _controller_inputs(preset: Preset, encoder_dir: str, sequential_dir: str) -> dict:
    """Stage 5's flags naming its encoder and sequential model: zoo names or directories."""
    if preset.connect == "directories":
        return {
            "encoder_dir": encoder_dir,
            "encoder_model": preset.train_encoder["model"],
            "representation_size": preset.train_encoder["representation_size"],
            "sequential_model_dir": sequential_dir,
        }
    return {"encoder": preset.encoder_name, "sequential_model": preset.sequential_name}


def check_preset(preset: Preset) -> None:
    """Fails fast if a name in the preset does not resolve (before any compute), through the
    stages' own resolvers. (Each stage's flags are checked by its script: `run_local`,
    `submit_slurm`.)"""
    from rl755.controller.resolve import saved_model_fn
    from rl755.models.encoders.train import resolve_encoder_fn
    from rl755.models.sequential.train import resolve_model_fn, resolve_rollouts_dataset
    from rl755.policies import resolve_policy

    env = Environments.from_name(preset.environment)
    for stage in STAGE_SCRIPTS:
        _flags(preset, stage)
    resolve_policy(env, preset.collect["policy"])
    resolve_encoder_fn(env, preset.train_encoder["model"])
    resolve_rollouts_dataset(env, preset.encoded_dataset)
    resolve_model_fn(env, preset.train_sequential["model"])
    if preset.connect == "zoo":
        saved_model_fn(env, preset.encoder_name, "encoder")
        saved_model_fn(env, preset.sequential_name, "sequential_model")
        saved_model_fn(env, preset.controller_name, "saved_controller")
