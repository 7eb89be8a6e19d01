"""Compare trained infilling U-Nets on the same held-out windows (scripts/models/evaluate_infilling_unet.py).

    result = evaluate_infilling_models(["runs/unet_l2", "runs/unet_gan"], out_dir="runs/cmp",
                                       num_examples=256, num_draws=4)
    result["models"]["unet_gan"]["sample_diversity"]

Every model sees the same windows of the split (drawn with `seed`), the same masks and the
same noise vectors; `copy t-1` (frame t-1's pixels in the mask) is the baseline that
predicts nothing moves. Per model, means over the windows (and standard errors, `<name>_se`)
of rl755.models.infilling.metrics.frame_measures: mse (first draw), best_of_draws_mse,
mse_of_mean, ssim, sample_diversity, laplacian_variance(_ratio), gradient_energy(_ratio).

Writes into `out_dir`, each atomically: infilling_benchmark.json (everything), table.txt (the
markdown table), infills.png (context, masked input, real frame, every model's draws for the
first `picture_examples` windows), and a run record.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from rl755.common import run_record, sharded_io
from rl755.common.errors import BadInput
from rl755.environments import Environments
from rl755.models.encoders.train import check_raw_rollouts, raw_rollouts_builder
from rl755.models.infilling import data, metrics, pictures
from rl755.models.unet.train import load_infilling_unet

BASELINE = "copy t-1"
SAME_KEYS = ("environment", "task", "context_frames")
TABLE_COLUMNS = (
    ("mse", "MSE"),
    ("best_of_draws_mse", "best-of-D MSE"),
    ("ssim", "SSIM"),
    ("sample_diversity", "diversity"),
    ("laplacian_variance_ratio", "Laplacian var / real"),
    ("gradient_energy_ratio", "grad energy / real"),
)


def _load_models(model_dirs: Sequence[str], names: Sequence[str] | None) -> dict:
    if not model_dirs:
        raise BadInput("Give at least one --model_dir.")
    names = list(names) if names else [os.path.basename(os.path.normpath(d)) for d in model_dirs]
    if len(names) != len(model_dirs) or len(set(names)) != len(names) or BASELINE in names:
        raise BadInput(
            f"--names must give one distinct name per --model_dir (not {BASELINE!r}); got "
            f"{names} for {len(model_dirs)} directories."
        )
    models = {}
    for name, d in zip(names, model_dirs):
        try:
            generator, info = load_infilling_unet(d)
        except (FileNotFoundError, ValueError) as e:
            raise BadInput(f"--model_dir={d}: {e}") from e
        models[name] = (d, generator, info)
    first_dir, _, first = next(iter(models.values()))
    for d, _, info in models.values():
        diff = {k: (first[k], info[k]) for k in SAME_KEYS if first[k] != info[k]}
        if diff:
            raise BadInput(
                f"{d} and {first_dir} were trained for different things ({diff}): compare "
                "models of one environment, task and --context_frames."
            )
    return models


def _windows(builder, split, k, num_examples, batch_size, seed) -> list[dict]:
    ds = data.frame_windows(
        builder, split, k, windows_per_rollout=4, repeat=True, shuffle_files=False, seed=seed
    )
    batches = list(ds.take(num_examples).batch(batch_size).as_numpy_iterator())
    if not batches:
        raise BadInput(f"The '{split}' rollouts hold no window of {k + 1} frames.")
    return batches


def _copy_last(inputs: dict) -> tf.Tensor:
    mask = inputs["mask"]
    return mask * inputs["context"][:, -1] + (1.0 - mask) * inputs["target"]


def _summary(parts: list[dict]) -> dict:
    values = {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}
    out = metrics.summarize(values)
    for k, v in values.items():
        out[f"{k}_se"] = float(np.std(v) / np.sqrt(max(len(v) - 1, 1)))
    out["examples"] = int(len(next(iter(values.values()))))
    return out


def _table(results: dict) -> str:
    head = "| model | adversarial weight | " + " | ".join(t for _, t in TABLE_COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(TABLE_COLUMNS) + 2)]
    for name, r in results.items():
        cells = []
        for key, _ in TABLE_COLUMNS:
            v = r.get(key)
            se = r.get(f"{key}_se")
            cells.append("-" if v is None else f"{v:.4g}" + (f" ± {se:.2g}" if se else ""))
        weight = r.get("adversarial_weight", "-")
        lines.append(f"| {name} | {weight} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def evaluate_infilling_models(
    model_dirs: Sequence[str],
    out_dir: str,
    names: Sequence[str] | None = None,
    split: str = "validation",
    num_examples: int = 256,
    num_draws: int = 4,
    batch_size: int = 64,
    seed: int = 0,
    rollouts_pattern: str | None = None,
    picture_examples: int = 6,
    run_flags: dict | None = None,
) -> dict:
    """See the module docstring. Bad flags (BadInput) and missing data fail before anything
    is written. `run_flags` go into the run record (default: the arguments). Returns
    {"settings", "models": {name: measures}, "table": markdown, "files": {what: path}}."""
    if num_draws < 2 or num_examples < 1 or batch_size < 1:
        raise BadInput(
            f"--num_draws must be >= 2 and --num_examples, --batch_size positive (got "
            f"{num_draws}, {num_examples}, {batch_size})."
        )
    models = _load_models(model_dirs, names)
    info = next(iter(models.values()))[2]
    env = Environments.from_name(info["environment"])
    builder = raw_rollouts_builder(env, rollouts_pattern or info.get("rollouts_pattern"))
    try:
        check_raw_rollouts(builder, split, env)
    except (FileNotFoundError, ValueError) as e:
        raise BadInput(str(e)) from e
    task, k = info["task"], int(info["context_frames"])
    batches = _windows(builder, split, k, num_examples, batch_size, seed)
    settings = dict(
        environment=env.name,
        task=task,
        context_frames=k,
        split=split,
        num_draws=num_draws,
        seed=seed,
        rollouts_pattern=builder.tfrecords_pattern(),
    )
    flags = run_flags
    if flags is None:
        flags = dict(settings, model_dirs=list(model_dirs), num_examples=num_examples)
    with run_record.record_run(out_dir, flags, stage="evaluate_infilling"):
        return _evaluate(models, settings, batches, out_dir, picture_examples)


def _evaluate(models: dict, settings: dict, batches: list, out_dir: str, picture_examples: int):
    task, num_draws, seed = settings["task"], settings["num_draws"], settings["seed"]

    parts: dict[str, list] = {name: [] for name in [BASELINE, *models]}
    pictured: dict[str, np.ndarray] = {}
    first_inputs = None
    for i, batch in enumerate(batches):
        batch_seed = tf.constant([seed, i], tf.int64)
        for name, (_, generator, _) in models.items():
            inputs, draws = data.sample_draws(generator, batch, task, num_draws, batch_seed)
            parts[name].append(metrics.frame_measures(draws, inputs["target"], inputs["mask"]))
            if i == 0:
                pictured[name] = draws.numpy()[:, :picture_examples]
                first_inputs = inputs
        inputs = data.model_inputs(batch, task, 0, batch_seed)
        copy = tf.stack([_copy_last(inputs)] * num_draws)
        parts[BASELINE].append(metrics.frame_measures(copy, inputs["target"], inputs["mask"]))
        if i == 0:
            pictured = {BASELINE: copy.numpy()[:1, :picture_examples], **pictured}

    results = {}
    for name, p in parts.items():
        results[name] = _summary(p)
        if name in models:
            d, _, m_info = models[name]
            results[name].update(
                model_dir=d,
                step=m_info.get("step"),
                adversarial_weight=m_info.get("adversarial_weight"),
                noise_size=m_info.get("noise_size"),
                use_actions=m_info.get("use_actions"),
            )
    table = _table(results)
    files = {
        "json": os.path.join(out_dir, "infilling_benchmark.json"),
        "table": os.path.join(out_dir, "table.txt"),
        "picture": os.path.join(out_dir, "infills.png"),
    }
    settings = dict(settings, examples=results[BASELINE]["examples"])
    sharded_io.write_json_atomic(files["json"], {"settings": settings, "models": results})
    sharded_io.write_text_atomic(files["table"], table + "\n")
    picture_inputs = {key: np.asarray(v)[:picture_examples] for key, v in first_inputs.items()}
    title = (
        f"{settings['environment']} {task}, K = {settings['context_frames']}: "
        f"{num_draws} draws per model"
    )
    pictures.comparison(picture_inputs, pictured, picture_examples, title).save(files["picture"])
    return {"settings": settings, "models": results, "table": table, "files": files}
