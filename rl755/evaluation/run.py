"""What scripts/models/evaluate_world_model.py runs: names to models, then the benchmark,
then the files.

    out = run_benchmark(environment="CAR_RACING", sequential_models=["mdn_rnn_32ld"],
                        sequential_model_dirs=["/models/transformer"], encoder="raw_rollout_vae_32ld",
                        rollouts_dataset="VaeEncodedRollouts", split="validation",
                        settings=Settings(...), out_dir="/tmp/wm_bench", dream_gap_episodes=20)

Writes into out_dir:
    world_model_benchmark.json   settings, data, the copy-last-z baseline, one summary per model
    table.txt                    the side-by-side table (also returned and printed)
    open_loop_error.png          latent (and decoded-frame) error against horizon, all models
    calibration.png              reliability and hazard (models with an episode-end head)
    frames_<model>.png           real beside dreamed frames at each horizon (with a decoder)
    runs/*.json                  run records
Each file is written under a temporary name and renamed when complete.

`resolve_models` is the one place where flag values become model constructors.
"""

from __future__ import annotations

import dataclasses
import os
import re

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.data.common.rollout_datasets import EncodedRolloutDatasetBuilder
from rl755.evaluation import benchmark, figures, gap
from rl755.evaluation.rollouts import load_rollouts

RESULT_FILE = "world_model_benchmark.json"


def resolve_models(
    environment: str, sequential_models=(), sequential_model_dirs=(), encoder: str | None = None
):
    """-> (encoder constructor or None, {label: sequential model constructor}).

    sequential_models: sequential-model names of the zoo (rl755.zoo; trained weights);
    sequential_model_dirs: scripts/models/train_sequential_model.py --model_dir values
    (label: the directory's name); encoder: a zoo encoder name, or None / "none".
    """
    from rl755.controller import resolve
    from rl755.environments import Environments

    env = Environments.from_name(environment)
    models = {}
    for name in sequential_models or ():
        try:
            models[name] = resolve.saved_model_fn(env, name, "sequential_model")
        except LookupError as e:
            raise BadInput(str(e)) from None
        if models[name] is None:
            raise BadInput("--sequential_model=none is not a model to evaluate.")
    for d in sequential_model_dirs or ():
        if not os.path.isdir(d):
            raise BadInput(f"--sequential_model_dir={d} is not a directory.")
        label = os.path.basename(os.path.normpath(d))
        while label in models:
            label += "'"
        models[label] = resolve.SequentialModelFromDir(d)
    if not models:
        raise BadInput("Pass at least one --sequential_model or --sequential_model_dir.")
    try:
        encoder_fn = resolve.saved_model_fn(env, encoder, "encoder") if encoder else None
    except LookupError as e:
        raise BadInput(str(e)) from None
    return encoder_fn, models


def resolve_dataset(environment: str, rollouts_dataset: str | None, rollouts_pattern: str | None):
    """An EncodedRolloutDatasetBuilder: rl755.data.registry's `rollouts_dataset` class
    (reading `rollouts_pattern` instead of its own files when given), or, with only a
    pattern, a builder of that pattern (Z from its dataset_info.json)."""
    from rl755.data import registry
    from rl755.environments import Environments

    env = Environments.from_name(environment)
    if rollouts_pattern is not None and "{split}" not in rollouts_pattern:
        raise BadInput(
            f"--rollouts_pattern={rollouts_pattern} has no '{{split}}' placeholder; e.g. "
            "'/data/encoded-{split}*.tfrecord-*'."
        )
    if rollouts_dataset:
        try:
            cls = registry.encoded_rollouts_class(env, rollouts_dataset)
        except LookupError as e:
            raise BadInput(str(e)) from None
        return cls(tfrecords_pattern=rollouts_pattern) if rollouts_pattern else cls()
    if not rollouts_pattern:
        raise BadInput("Pass --rollouts_dataset (a name) or --rollouts_pattern (a glob).")
    return PatternRollouts(env, rollouts_pattern)


class PatternRollouts(EncodedRolloutDatasetBuilder):
    """Encoded rollouts at a glob pattern; Z and std devs from its dataset_info.json."""

    def __init__(self, env, pattern: str):
        super().__init__(tfrecords_pattern=pattern)
        self._env = env
        self._info = sharded_io.read_dataset_info(os.path.dirname(pattern)) or {}
        if "representation_size" not in self._info:
            raise BadInput(
                f"--rollouts_pattern={pattern}: its directory has no dataset_info.json with "
                "representation_size; pass --rollouts_dataset too."
            )

    def _environment(self):
        return self._env

    def _tfrecords_pattern(self):
        return self._pattern_override

    def representation_size(self) -> int:
        return int(self._info["representation_size"])

    def _has_std_devs(self) -> bool:
        return bool(self._info.get("has_std_devs", True))


def _build(label: str, fn, flag: str):
    try:
        return fn()
    except FileNotFoundError as e:
        raise BadInput(f"{flag} {label}: {e}") from e


def _check_sizes(label: str, model, data) -> None:
    if (model.representation_size, model.action_size) != (
        data.representation_size,
        data.action_size,
    ):
        raise BadInput(
            f"Model {label} takes Z={model.representation_size}, A={model.action_size} but the "
            f"rollouts hold Z={data.representation_size}, A={data.action_size}: evaluate it on "
            "the rollouts encoded by its own encoder (--rollouts_dataset)."
        )


def _file_label(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "model"


def run_benchmark(
    *,
    environment: str,
    out_dir: str,
    sequential_models=(),
    sequential_model_dirs=(),
    encoder: str | None = None,
    rollouts_dataset: str | None = None,
    rollouts_pattern: str | None = None,
    split: str = "validation",
    max_rollouts: int | None = 100,
    settings: benchmark.Settings | None = None,
    dream_gap_episodes: int = 0,
    dream_temperature: float = 1.0,
    dream_max_steps: int | None = None,
    run_flags: dict | None = None,
) -> dict:
    """Resolves everything (failing fast with BadInput naming the flag), scores every model,
    writes the files of the module docstring and returns the JSON dict (+ "table")."""
    from rl755.common import run_record
    from rl755.environments import Environments

    settings = settings or benchmark.Settings()
    try:
        env = Environments.from_name(environment)
    except (LookupError, ValueError) as e:
        raise BadInput(f"--environment: {e}") from None
    if split not in ("train", "validation"):
        raise BadInput(f"--split={split}: use train or validation.")
    if os.path.isfile(out_dir):
        raise BadInput(f"--out_dir={out_dir} is a file; pass a directory.")
    for flag, value in (
        ("--context_length", settings.context_length),
        ("--num_starts", settings.num_starts),
        ("--chunk_length", settings.chunk_length),
    ):
        if int(value) < 1:
            raise BadInput(f"{flag} must be >= 1, got {value}.")
    if not settings.horizons or min(settings.horizons) < 1:
        raise BadInput(f"--horizons must be positive integers, got {list(settings.horizons)}.")
    encoder_fn, model_fns = resolve_models(
        env.name, sequential_models, sequential_model_dirs, encoder
    )
    if dream_gap_episodes > 0 and encoder_fn is None:
        raise BadInput("--dream_gap_episodes needs --encoder (dreams start from encoded frames).")
    if dream_gap_episodes == 1:
        # DreamEvaluator's tf.while_loop fails on a batch of one dream (a shape of 1 broadcast
        # against an unknown one); until that is fixed, ask for two.
        raise BadInput("--dream_gap_episodes must be 0 (no dream gap) or at least 2.")
    builder = resolve_dataset(env.name, rollouts_dataset, rollouts_pattern)
    try:
        data = load_rollouts(builder, split, max_rollouts)
    except FileNotFoundError as e:
        raise BadInput(f"--rollouts_dataset/--rollouts_pattern: {e}") from e
    settings.windows(data)  # fails fast when no window fits
    enc = _build(encoder or "", encoder_fn, "--encoder") if encoder_fn else None
    if enc is not None and enc.representation_size != data.representation_size:
        raise BadInput(
            f"--encoder={encoder} gives Z={enc.representation_size} but the rollouts hold "
            f"Z={data.representation_size}."
        )
    models = {}
    for label, fn in model_fns.items():
        flag = (
            "--sequential_model" if label in (sequential_models or ()) else "--sequential_model_dir"
        )
        models[label] = _build(label, fn, flag)
        _check_sizes(label, models[label], data)
    decode_fn = _decoder(enc)

    with run_record.record_run(out_dir, dict(run_flags or {}), stage="evaluate_world_model"):
        reports = []
        for label, model in models.items():
            gap_fn = None
            if dream_gap_episodes > 0 and model.has_reward_head:
                gap_fn = _gap_fn(
                    env.name,
                    enc,
                    model,
                    label,
                    encoder,
                    dream_gap_episodes,
                    settings.seed,
                    dream_temperature,
                    dream_max_steps,
                )
            report = benchmark.evaluate_world_model(label, model, data, settings, decode_fn, gap_fn)
            report.summary["training"] = _training_info(model_fns[label])
            if dream_gap_episodes > 0 and not model.has_reward_head:
                report.summary["dream_gap_skipped"] = "no reward head: dream returns would be 0"
            reports.append(report)
        base = benchmark.baselines(data, settings)
        table = benchmark.format_table(reports, base)
        pictures = _write_pictures(out_dir, reports, base, settings)
        result = {
            "environment": env.name,
            "rollouts": {
                "dataset": rollouts_dataset,
                "pattern": builder.tfrecords_pattern(),
                "split": split,
                "num_rollouts": data.num_rollouts,
                "num_steps": int(data.lengths.sum()),
                "max_rollouts": max_rollouts,
                "terminated": int(data.terminated.sum()),
            },
            "encoder": encoder,
            "settings": dataclasses.asdict(settings),
            "dream_gap_settings": {
                "episodes": int(dream_gap_episodes),
                "temperature": float(dream_temperature),
                "max_steps": dream_max_steps,
                "seed": int(settings.seed),
            },
            "baselines": base,
            "models": [r.summary for r in reports],
            "pictures": pictures,
            "out_dir": os.path.abspath(out_dir),
        }
        sharded_io.write_json_atomic(os.path.join(out_dir, RESULT_FILE), result)
        sharded_io.write_text_atomic(os.path.join(out_dir, "table.txt"), table + "\n")
    return {**result, "table": table}


def _training_info(model_fn) -> dict | None:
    """What a --sequential_model_dir model was trained with (its newest checkpoint's marker):
    {"model", "train_steps", "task"}, so the table shows whether models had equal compute."""
    from rl755.controller import resolve
    from rl755.models.sequential.train import read_model_info

    if not isinstance(model_fn, resolve.SequentialModelFromDir):
        return None
    info = read_model_info(model_fn.model_dir)
    return {
        "model": info.get("model"),
        "train_steps": info.get("step"),
        "task": info.get("task", "autoregressive"),
    }


def _decoder(encoder):
    """encoder.decode, or None when there is no encoder or it cannot decode."""
    if encoder is None:
        return None
    import tensorflow as tf

    try:
        encoder.decode(tf.zeros([1, encoder.representation_size]))
    except NotImplementedError:
        return None
    return encoder.decode


def _gap_fn(env_name, encoder, model, label, encoder_name, episodes, seed, temperature, max_steps):
    def run():
        return gap.model_dream_gap(
            env_name,
            lambda: encoder,
            lambda: model,
            num_episodes=episodes,
            seed=seed,
            temperature=temperature,
            max_steps=max_steps,
            model_name=label,
            encoder_name=encoder_name or "none",
        )

    return run


def _write_pictures(out_dir, reports, base, settings) -> dict:
    paths = {}
    summaries = [r.summary for r in reports]
    paths["open_loop_error"] = figures.error_curve_figure(
        os.path.join(out_dir, "open_loop_error.png"), summaries, base["open_loop_z_mse"]
    )
    if any(s["episode_end"] for s in summaries):
        paths["calibration"] = figures.calibration_figure(
            os.path.join(out_dir, "calibration.png"), summaries
        )
    for r in reports:
        if r.example_frames is not None:
            paths[f"frames:{r.name}"] = figures.frames_figure(
                os.path.join(out_dir, f"frames_{_file_label(r.name)}.png"),
                r.example_frames,
                settings.horizons,
                title=f"{r.name}: real (decoded) vs dreamed, context {settings.context_length}",
            )
    return {k: os.path.basename(v) for k, v in paths.items()}
