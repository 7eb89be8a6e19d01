"""The five World Models stages as one chain, locally or on SLURM (`scripts/pipeline.py`).

    from rl755 import pipeline
    preset = pipeline.PRESETS["demo"]
    summary = pipeline.run_local(preset, out_dir="runs/demo")     # blocking, prints a table
    results = pipeline.submit_slurm(preset, out_dir="/pine/scr/me/wm")   # afterok chain

Everything a run makes lives under `out_dir`:

    data/<env>/raw_rollouts/             stage 1: random-policy rollouts (GZIP TFRecord shards)
    models/<env>/<encoder name>/         stage 2: VAE checkpoints, reconstructions PNG, TensorBoard
    data/<env>/encoded_rollouts/<encoder name>/    stage 3: encoded rollouts
    models/<env>/<sequential name>/      stage 4: MDN-RNN / transformer / LSTM checkpoints
    models/<env>/<controller name>/      stage 5: CMA-ES state, best controller, learning_curve.png
    evaluation/                          evaluation.json (controller vs random policy), episode.gif
    pictures/                            the pictures worth looking at, collected in one place
    pipeline_summary.json                stage, wall time, outputs, scores

Each stage's script reads the previous stage's outputs from the standard locations, because
the stages run with `RL755_DATA_DIR=<out_dir>/data` and `RL755_MODELS_DIR=<out_dir>/models`,
and the trained models are used through the registries (`rl755.models.<env>.saved_models`).
Rerunning with the same out_dir resumes: every stage skips or continues finished work.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time

from rl755.common import sharded_io
from rl755.environments import Environments

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Preset:
    """Sizes of one pipeline run.

    Attributes:
      environment: Environments name.
      policy: stage-1 policy name (rl755.policies.policy_names(environment)).
      num_rollouts, max_steps, parallelism, rollouts_per_shard: stage 1 (collection).
      encoder_model: stage-2 model under rl755.models.<env>, e.g. "vae.Vae".
      encoder_name: its registry function in saved_models (also its directory name).
      representation_size, encoder_steps, encoder_batch_size, encoder_learning_rate,
        obs_sampled_per_rollout: stage 2.
      encoded_dataset: stage-3 dataset class in rl755.data.<env>.encoded_rollouts.
      sequential_model: stage-4 model under rl755.models.<env>, e.g. "mdn_rnn.mdn_rnn_with_heads".
      sequential_name: its registry function in saved_models (and directory name).
      sequential_steps, sequential_batch_size, sequence_length, sequential_learning_rate,
        sample_observations (z sampled from the VAE posterior, as in the paper).
      controller, controller_name, mode, population, trials, generations, rollout_max_steps,
        temperature, sigma, eval_every, eval_episodes: stage 5 (CMA-ES).
      final_episodes, final_max_steps: the closing evaluation (controller and random policy on
        the same seeds).
      save_every_n_steps: checkpoint period of stages 2 and 4.
    """

    environment: str
    policy: str
    num_rollouts: int
    max_steps: int
    parallelism: int
    rollouts_per_shard: int
    encoder_model: str
    encoder_name: str
    representation_size: int
    encoder_steps: int
    encoder_batch_size: int
    encoder_learning_rate: float
    obs_sampled_per_rollout: int
    encoded_dataset: str
    sequential_model: str
    sequential_name: str
    sequential_steps: int
    sequential_batch_size: int
    sequence_length: int
    sequential_learning_rate: float
    sample_observations: bool
    controller: str
    controller_name: str
    mode: str
    population: int
    trials: int
    generations: int
    rollout_max_steps: int
    temperature: float
    sigma: float
    eval_every: int
    eval_episodes: int
    final_episodes: int
    final_max_steps: int
    save_every_n_steps: int
    description: str = ""


_CAR_RACING = dict(
    environment="CAR_RACING",
    policy="HastingsRandomPolicy",
    encoder_model="vae.Vae",
    encoder_name="raw_rollout_vae_32ld",
    representation_size=32,
    encoded_dataset="RawRolloutVae32ld",
    sequential_model="mdn_rnn.mdn_rnn",
    sequential_name="mdn_rnn_vae_32ld",
    sample_observations=True,
    controller="LinearController",
    controller_name="linear_controller_vae_mdn_rnn",
)

PRESETS: dict[str, Preset] = {
    # ~30 minutes on a 2-core CPU: enough to see every stage work and the controller beat
    # the random policy; nowhere near the paper's score.
    "demo": Preset(
        **_CAR_RACING,
        num_rollouts=40,
        max_steps=300,
        parallelism=2,
        rollouts_per_shard=4,
        encoder_steps=2000,
        encoder_batch_size=32,
        encoder_learning_rate=1e-3,
        obs_sampled_per_rollout=50,
        sequential_steps=1500,
        sequential_batch_size=16,
        sequence_length=32,
        sequential_learning_rate=1e-3,
        mode="real",
        population=12,
        trials=1,
        generations=16,
        rollout_max_steps=300,
        temperature=1.0,
        sigma=0.5,
        eval_every=8,
        eval_episodes=2,
        final_episodes=5,
        final_max_steps=600,
        save_every_n_steps=500,
        description="CarRacing at a small size for a 2-core CPU (~15 min).",
    ),
    # The World Models paper's settings, for a cluster (pair with --launcher=slurm).
    "world_models": Preset(
        **_CAR_RACING,
        num_rollouts=10000,
        max_steps=1000,
        parallelism=32,
        rollouts_per_shard=8,
        encoder_steps=100000,
        encoder_batch_size=100,
        encoder_learning_rate=1e-4,
        obs_sampled_per_rollout=100,
        sequential_steps=40000,
        sequential_batch_size=100,
        sequence_length=999,
        sequential_learning_rate=1e-3,
        mode="real",
        population=64,
        trials=16,
        generations=2000,
        rollout_max_steps=1000,
        temperature=1.0,
        sigma=0.1,
        eval_every=25,
        eval_episodes=1024,
        final_episodes=100,
        final_max_steps=1000,
        save_every_n_steps=5000,
        description="The paper's CarRacing settings: 10,000 rollouts, population 64 x 16 trials.",
    ),
    # Seconds per stage on the fake environment: the end-to-end test.
    "tiny": Preset(
        environment="FAKE_PIXELS",
        policy="HastingsRandomPolicy",
        num_rollouts=12,
        max_steps=24,
        parallelism=2,
        rollouts_per_shard=3,
        encoder_model="vae.Vae",
        encoder_name="raw_rollout_vae_4ld",
        representation_size=4,
        encoder_steps=30,
        encoder_batch_size=16,
        encoder_learning_rate=1e-3,
        obs_sampled_per_rollout=8,
        encoded_dataset="RawRolloutVae4ld",
        sequential_model="mdn_rnn.mdn_rnn",
        sequential_name="mdn_rnn_vae_4ld",
        sample_observations=True,
        sequential_steps=30,
        sequential_batch_size=4,
        sequence_length=8,
        sequential_learning_rate=1e-3,
        controller="LinearController",
        controller_name="linear_controller_vae_mdn_rnn",
        mode="real",
        population=4,
        trials=1,
        generations=2,
        rollout_max_steps=24,
        temperature=1.0,
        sigma=0.5,
        eval_every=1,
        eval_episodes=1,
        final_episodes=2,
        final_max_steps=24,
        save_every_n_steps=15,
        description="Fake 16x16 environment, tiny models: every stage in seconds (tests).",
    ),
    # CarRacing at a tiny size: real frames and real model shapes, minutes (tests).
    "tiny_car_racing": Preset(
        **_CAR_RACING,
        num_rollouts=2,
        max_steps=30,
        parallelism=2,
        rollouts_per_shard=1,
        encoder_steps=4,
        encoder_batch_size=8,
        encoder_learning_rate=1e-3,
        obs_sampled_per_rollout=8,
        sequential_steps=4,
        sequential_batch_size=2,
        sequence_length=8,
        sequential_learning_rate=1e-3,
        mode="real",
        population=2,
        trials=1,
        generations=1,
        rollout_max_steps=20,
        temperature=1.0,
        sigma=0.5,
        eval_every=0,
        eval_episodes=1,
        final_episodes=1,
        final_max_steps=20,
        save_every_n_steps=2,
        description="CarRacing with the real model sizes, a few steps each (tests).",
    ),
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"Unknown preset {name!r}; valid: {', '.join(sorted(PRESETS))}.")
    return PRESETS[name]


# ---- the stages -------------------------------------------------------------------------------
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


def build_stages(preset: Preset, out_dir: str, seed: int = 0, threads: int | None = None):
    """The chain as `rl755.slurm.chain.Stage`s (script paths relative to the repo root)."""
    from rl755.slurm.chain import Stage
    from rl755.slurm.launcher import ArraySpec
    from rl755.slurm.sbatch import Resources

    env = Environments.from_name(preset.environment)
    paths = Paths(os.path.abspath(out_dir), env)
    s = os.path.join
    common = {"environment": env.name}
    thread_flags = {"num_threads": threads} if threads else {}
    cpu = Resources(cpus=max(2, preset.parallelism), mem="16G", time="1-00:00:00")
    gpu = Resources(partition="volta-gpu", gpus=1, cpus=4, mem="32G", time="2-00:00:00")
    small = preset.num_rollouts <= 200
    stages = [
        Stage(
            "collect",
            s(REPO_ROOT, "scripts/data_gen/car_racing/parallel_rollout_main.py"),
            {
                **common,
                "policy": preset.policy,
                "num_rollouts": preset.num_rollouts,
                "max_steps": preset.max_steps,
                "parallelism": preset.parallelism,
                "out_format": "tfrecord",
                "compression": "GZIP",
                "rollouts_per_shard": preset.rollouts_per_shard,
                "out_dir": paths.raw_dir,
                # Array tasks need distinct seeds (same seed = same rollouts): the decimal
                # string "<seed + 1>000<task>" is unique per (seed, task) and fixed across
                # reruns, so a rerun or requeue resumes instead of duplicating.
                "seed": seed if small else f"{seed + 1}000{{global_index}}",
            },
            cpu,
            array=None if small else ArraySpec(num_tasks=10, split=("num_rollouts",)),
        ),
        Stage(
            "train_encoder",
            s(REPO_ROOT, "scripts/models/train_obs_encoder.py"),
            {
                **common,
                **thread_flags,
                "model": preset.encoder_model,
                "model_dir": paths.model_dir(preset.encoder_name),
                "train_steps": preset.encoder_steps,
                "batch_size": preset.encoder_batch_size,
                "representation_size": preset.representation_size,
                "save_every_n_steps": preset.save_every_n_steps,
                "obs_sampled_per_rollout": preset.obs_sampled_per_rollout,
                "learning_rate": preset.encoder_learning_rate,
            },
            gpu,
        ),
    ]
    for split in ("train", "validation"):
        stages.append(
            Stage(
                f"encode_{split}",
                s(REPO_ROOT, "scripts/data_gen/encode_raw_rollouts.py"),
                {
                    **common,
                    **thread_flags,
                    "model": preset.encoder_name,
                    "split": split,
                    "out_dir": paths.encoded_dir(preset.encoder_name),
                    "num_sub_shards": 1 if small else 4,
                },
                gpu,
                after=("train_encoder",),
            )
        )
    stages += [
        Stage(
            "train_sequential",
            s(REPO_ROOT, "scripts/models/train_sequential_model.py"),
            {
                **common,
                **thread_flags,
                "model": preset.sequential_model,
                "rollouts_dataset": preset.encoded_dataset,
                "model_dir": paths.model_dir(preset.sequential_name),
                "train_steps": preset.sequential_steps,
                "batch_size": preset.sequential_batch_size,
                "sequence_length": preset.sequence_length,
                "learning_rate": preset.sequential_learning_rate,
                "save_every_n_steps": preset.save_every_n_steps,
                "sample_observations": preset.sample_observations,
            },
            gpu,
            after=("encode_train", "encode_validation"),
        ),
        Stage(
            "train_controller",
            s(REPO_ROOT, "scripts/models/train_controller.py"),
            {
                **common,
                "encoder": preset.encoder_name,
                "sequential_model": preset.sequential_name,
                "controller": preset.controller,
                "model_dir": paths.model_dir(preset.controller_name),
                "mode": preset.mode,
                "cma_population_size": preset.population,
                "cma_trials_per_member": preset.trials,
                "cma_generations": preset.generations,
                "rollout_max_steps": preset.rollout_max_steps,
                "temperature": preset.temperature,
                "sigma": preset.sigma,
                "eval_every": preset.eval_every,
                "eval_episodes": preset.eval_episodes,
                "parallelism": preset.parallelism,
                "seed": seed,
            },
            Resources(cpus=max(2, preset.parallelism), mem="32G", time="3-00:00:00"),
        ),
        Stage(
            "evaluate",
            s(REPO_ROOT, "scripts/models/evaluate_controller.py"),
            {
                **common,
                "model_dir": paths.model_dir(preset.controller_name),
                "num_episodes": preset.final_episodes,
                "max_steps": preset.final_max_steps,
                "seed": 10_000 + seed,
                "compare_random": True,
                "out_dir": paths.evaluation_dir,
            },
            cpu,
        ),
    ]
    return stages


def check_preset(preset: Preset) -> None:
    """Fails fast if a name in the preset does not resolve (before any compute)."""
    from rl755.common.lookup import resolve
    from rl755.policies import resolve_policy

    env = Environments.from_name(preset.environment)
    models = env.folder_module("models")
    data = env.folder_module("data")
    resolve_policy(env, preset.policy)
    resolve(models, preset.encoder_model, what="encoder model")
    resolve(models, f"saved_models.{preset.encoder_name}", what="saved encoder")
    resolve(data, f"encoded_rollouts.{preset.encoded_dataset}", what="encoded dataset")
    resolve(models, preset.sequential_model, what="sequential model")
    resolve(models, f"saved_models.{preset.sequential_name}", what="saved sequential model")
    resolve(models, f"saved_models.{preset.controller_name}", what="saved controller")


# ---- running ----------------------------------------------------------------------------------
def run_local(
    preset: Preset,
    out_dir: str,
    seed: int = 0,
    stages: list[str] | None = None,
    threads: int | None = None,
    pictures: bool = True,
    python: str | None = None,
) -> dict:
    """Runs the chain here, stage after stage; returns (and writes) the summary."""
    from rl755.slurm import launcher

    check_preset(preset)
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    all_stages = build_stages(preset, out_dir, seed=seed, threads=threads)
    names = [s.name for s in all_stages]
    if stages:
        unknown = sorted(set(stages) - set(names))
        if unknown:
            raise ValueError(f"Unknown stages {unknown}; valid: {', '.join(names)}.")
    for stage in all_stages:
        launcher.check_stage(stage.script, stage.flags, python)
    os.environ.update(stage_environ(out_dir))
    rows = []
    started = time.time()
    for i, stage in enumerate(all_stages):
        if stages and stage.name not in stages:
            continue
        print(f"\n=== [{i + 1}/{len(all_stages)}] {stage.name} ===", flush=True)
        t0 = time.time()
        result = launcher.launch(
            stage.script, stage.flags, local=True, job_name=stage.name, python=python, check=False
        )
        seconds = time.time() - t0
        rows.append(
            {
                "stage": stage.name,
                "seconds": round(seconds, 1),
                "status": "ok" if result.returncode == 0 else f"exit {result.returncode}",
                "outputs": stage_output(stage),
            }
        )
        if result.returncode != 0:
            summary = _summary(preset, out_dir, rows, started)
            print(format_summary(summary))
            raise RuntimeError(
                f"Stage {stage.name} failed (exit {result.returncode}); see its output above. "
                "Fix the cause and rerun the same command: finished work is kept."
            )
    if pictures:
        t0 = time.time()
        pics = collect_pictures(preset, out_dir)
        rows.append(
            {
                "stage": "pictures",
                "seconds": round(time.time() - t0, 1),
                "status": "ok",
                "outputs": Paths(out_dir, Environments.from_name(preset.environment)).pictures_dir,
                "files": pics,
            }
        )
    summary = _summary(preset, out_dir, rows, started)
    path = os.path.join(out_dir, "pipeline_summary.json")
    sharded_io.write_json_atomic(path, summary)
    print(format_summary(summary), flush=True)
    return summary


def stage_output(stage) -> str:
    for key in ("out_dir", "model_dir"):
        if key in stage.flags:
            return str(stage.flags[key])
    return ""


def submit_slurm(preset: Preset, out_dir: str, seed: int = 0, dry_run: bool = False, python=None):
    """Submits the chain to SLURM with afterok dependencies; returns LaunchResults."""
    from rl755.slurm.chain import submit_chain

    check_preset(preset)
    os.environ.update(stage_environ(out_dir))  # sbatch exports the submitting environment
    stages = build_stages(preset, os.path.abspath(out_dir), seed=seed)
    return submit_chain(stages, dry_run=dry_run, python=python)


def _read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _summary(preset: Preset, out_dir: str, rows: list[dict], started: float) -> dict:
    env = Environments.from_name(preset.environment)
    evaluation = _read_json(os.path.join(Paths(out_dir, env).evaluation_dir, "evaluation.json"))
    scores = None
    if evaluation:
        scores = {"controller": {k: evaluation.get(k) for k in ("mean", "std")}}
        rnd = evaluation.get("random_policy")
        if rnd:
            scores["random_policy"] = {k: rnd.get(k) for k in ("mean", "std")}
        scores["episodes"] = len(evaluation.get("returns", []))
    return {
        "preset": dataclasses.asdict(preset),
        "out_dir": out_dir,
        "stages": rows,
        "total_seconds": round(time.time() - started, 1),
        "scores": scores,
    }


def format_summary(summary: dict) -> str:
    """The closing table: stage, wall time, status, outputs; then the scores."""
    rows = summary["stages"]
    width = max([len(r["stage"]) for r in rows] + [5])
    lines = [
        "",
        f"{'stage':<{width}}  {'wall time':>10}  {'status':<8}  outputs",
        f"{'-' * width}  {'-' * 10}  {'-' * 8}  {'-' * 40}",
    ]
    for r in rows:
        lines.append(
            f"{r['stage']:<{width}}  {_fmt_seconds(r['seconds']):>10}  {r['status']:<8}  "
            f"{os.path.relpath(r['outputs'], summary['out_dir']) if r['outputs'] else ''}"
        )
    lines.append(f"{'total':<{width}}  {_fmt_seconds(summary['total_seconds']):>10}")
    scores = summary.get("scores")
    if scores:
        c = scores["controller"]
        lines.append("")
        lines.append(
            f"Real-environment score over {scores['episodes']} fixed-seed episodes: "
            f"controller {c['mean']:.1f} ± {c['std']:.1f}"
            + (
                f"  vs  random policy {scores['random_policy']['mean']:.1f} ± "
                f"{scores['random_policy']['std']:.1f}"
                if "random_policy" in scores
                else ""
            )
        )
    for r in rows:
        for f in r.get("files", []):
            lines.append(f"picture: {f}")
    lines.append(f"summary: {os.path.join(summary['out_dir'], 'pipeline_summary.json')}")
    return "\n".join(lines)


def _fmt_seconds(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


# ---- pictures ---------------------------------------------------------------------------------
def _newest(directory: str, suffix: str) -> str | None:
    if not os.path.isdir(directory):
        return None
    files = [
        os.path.join(directory, f)
        for f in os.listdir(directory)
        if f.endswith(suffix) and not sharded_io.is_tmp_path(f)
    ]
    return max(files, key=os.path.getmtime) if files else None


def collect_pictures(preset: Preset, out_dir: str) -> list[str]:
    """Copies the stages' pictures into <out_dir>/pictures and draws predicted frames."""
    env = Environments.from_name(preset.environment)
    paths = Paths(out_dir, env)
    os.makedirs(paths.pictures_dir, exist_ok=True)
    made = []
    sources = {
        "vae_reconstructions.png": _newest(paths.model_dir(preset.encoder_name), ".png"),
        "controller_learning_curve.png": _newest(paths.model_dir(preset.controller_name), ".png"),
        "episode.gif": _newest(paths.evaluation_dir, ".gif"),
    }
    for name, src in sources.items():
        if src:
            dst = os.path.join(paths.pictures_dir, name)
            shutil.copyfile(src, dst)
            made.append(dst)
    try:
        from rl755 import visualize

        dst = os.path.join(paths.pictures_dir, "predicted_frames.png")
        visualize.predicted_frames_for_registry(
            env, preset.encoder_name, preset.sequential_name, dst
        )
        made.append(dst)
    except Exception as e:  # pictures must never fail a finished pipeline
        print(f"(predicted frames not drawn: {type(e).__name__}: {e})", file=sys.stderr)
    return made
