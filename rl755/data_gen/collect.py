"""Stage 1: collect rollouts of a policy and store them as pickles or TFRecord shards.

    collect_rollouts("CAR_RACING", "HastingsRandomPolicy", num_rollouts=100, parallelism=2,
                     max_steps=1000, out_format="tfrecord")   # -> <data_dir>/car_racing/raw_rollouts
    collect_rollouts("CAR_RACING", my_policy_fn, ...)          # or any no-argument constructor

`scripts/data_gen/collect_rollouts.py` (alias: the original
`scripts/data_gen/car_racing/parallel_rollout_main.py`) is the command-line face of this.
Policy names resolve through `rl755.policies.resolve_policy`; this stage never imports the
controller package (a trained controller comes in as a constructor, like any policy).

Output formats:
  pickle    one `<out_dir>/rollout-<tag>-<index>.pickle` per rollout holding `[Rollout]` (the
            original project's format; convert with convert_pickles_to_tfrecords.py).
  tfrecord  workers write finished shards `<out_name>-<split>-<tag>.tfrecord-<i>-of-<n>`
            straight into out_dir (no pickle pass, frames never cross Ray's object store), plus
            `dataset_info.json`; the dataset builders read them where they are.

`<tag>` is derived from the run's base seed and settings (for shards, plus the shard layout),
so concurrent instances (each with its own seed; the default is a fresh random seed) never
collide, and rerunning the same command with the same `seed` skips the files that exist and
makes only the missing ones. Shards of the same seed in another layout are refused (they would
duplicate rollouts). Instances that share an out_dir need distinct seeds (or none): the same
seed makes the same rollouts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import time

from rl755.common import config, determinism, sharded_io
from rl755.common.errors import BadInput
from rl755.data_gen import shards
from rl755.data_gen.episodes import random_base_seed, rollout_seed
from rl755.data_gen.pickles import PICKLE_SUFFIX
from rl755.data_gen.rollout_tasks import RolloutSink, RolloutTask, run_rollout_tasks
from rl755.data_gen.sinks import PickleSink, TFRecordShardSink
from rl755.data_gen.summary import CollectionSummary, timing_line  # noqa: F401
from rl755.environments import Environments
from rl755.policies import CONTROLLER, PolicyFn, resolve_policy

log = logging.getLogger(__name__)

OUT_FORMATS = ("pickle", "tfrecord")


def default_out_dir(environment: Environments, out_format: str) -> str:
    """tfrecord: `<data_dir>/<env folder>/raw_rollouts` (where RawRollouts reads);
    pickle: `<data_dir>/<env folder>/rollout_pickles`."""
    sub = "raw_rollouts" if out_format == "tfrecord" else "rollout_pickles"
    return str(config.env_data_dir(environment.folder_name) / sub)


def run_tag(**settings) -> str:
    """8 hex digits naming a run's outputs, a function of its seed and settings."""
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:8]


def _check_no_other_layout(out_dir: str, out_name: str, tag: str, layout: str, seed: int) -> None:
    """Fails if out_dir holds shards of the same seeded rollouts in another shard layout."""
    pattern = os.path.join(out_dir, f"{out_name}-*-{tag}-*.tfrecord-*")
    other = sorted(
        os.path.basename(p)
        for p in sharded_io.list_shards(pattern)
        if not os.path.basename(p).split(".tfrecord-")[0].endswith(f"-{tag}-{layout}")
    )
    if other:
        raise BadInput(
            f"{out_dir} already holds shards of the rollouts of --seed={seed} written with another "
            f"--num_rollouts, --rollouts_per_shard or --validation_fraction ({other[0]}, ...): "
            "rerun with the original values to finish that run, or pass another --seed (or none) "
            "to add new rollouts."
        )


def plan_tasks(
    out_format: str,
    num_rollouts: int,
    base_seed: int,
    tag: str,
    out_name: str = "rollouts",
    rollouts_per_shard: int = 1,
    validation_fraction: float = 0.0,
) -> list[RolloutTask]:
    """The tasks of a run: rollout i (seed `rollout_seed(base_seed, i)`) appears exactly once."""
    items = [(i, rollout_seed(base_seed, i)) for i in range(num_rollouts)]
    if out_format == "pickle":
        return [
            RolloutTask(key=f"rollout-{tag}-{i:06d}{PICKLE_SUFFIX}", items=(it,))
            for i, it in enumerate(items)
        ]
    val = shards.validation_indices(num_rollouts, validation_fraction)
    tasks = []
    for split in shards.SPLITS:
        split_items = [it for it in items if (it[0] in val) == (split == "validation")]
        groups = shards.chunk(split_items, rollouts_per_shard)
        for j, group in enumerate(groups):
            name = shards.split_shard_name(out_name, split, j, len(groups), tag=tag)
            tasks.append(RolloutTask(key=name, items=tuple(group)))
    return tasks


def policy_key(policy: str | PolicyFn) -> str:
    """A stable name of a policy for run tags and metadata: the name itself, or the
    constructor's module.qualname (with a partial's arguments). A constructor without a stable
    name (a lambda, a closure) gives a new tag per process: pass a name to resume such runs."""
    if isinstance(policy, str):
        return policy
    if isinstance(policy, functools.partial):
        args = [repr(a) for a in policy.args] + [f"{k}={v!r}" for k, v in policy.keywords.items()]
        return f"{policy_key(policy.func)}({', '.join(args)})"
    name = getattr(policy, "__qualname__", None)
    if name is None or "<" in name:
        return repr(policy)
    return f"{getattr(policy, '__module__', '?')}.{name}"


def collect_rollouts(
    environment: str | Environments,
    policy: str | PolicyFn,
    num_rollouts: int,
    parallelism: int,
    max_steps: int,
    out_dir: str | None = None,
    out_format: str = "pickle",
    seed: int | None = None,
    ray_address: str | None = None,
    compression: str | None = None,
    rollouts_per_shard: int | None = None,
    validation_fraction: float = 0.05,
    out_name: str = "rollouts",
    max_retries: int = 3,
    progress: bool = True,
    run_flags: dict | None = None,
    rollout_timeout: float | None = None,
    controller_dir: str | None = None,
    random_action_prob: float = 0.0,
    deterministic: bool | None = None,
    policy_kwargs: dict | None = None,
    use_ray: bool | None = None,
) -> CollectionSummary:
    """Collects exactly `num_rollouts` rollouts and writes them to `out_dir`.

    Args:
      environment: an `Environments` name, e.g. "CAR_RACING".
      policy: a `--policy` name (`rl755.policies.policy_names(environment)`), e.g.
        "RandomPolicy", or "controller": the trained controller in `controller_dir`, taking a
        uniform random action with probability `random_action_prob` each step (iterative
        World Models data); or a policy constructor (`PolicyFn`, picklable for Ray).
      policy_kwargs: constructor arguments of a named policy (`--policy_kwargs`), e.g.
        {"min_repeat": 20, "max_repeat": 200} for RepeatRandomPolicy; they are part of the
        rollouts' run tag, so other arguments are other rollouts.
      num_rollouts: rollouts to make, exactly this many (positive).
      parallelism: rollouts at once (positive).
      max_steps: step limit per rollout (positive).
      use_ray: run on `parallelism` Ray workers (True) or in this process (False); None:
        `rl755.data_gen.rollout_tasks.runs_on_ray` decides (a small run, or parallelism 1,
        stays in this process unless a Ray session is connected or `ray_address` is given).
      out_dir: default `default_out_dir(environment, out_format)`.
      out_format: "pickle" or "tfrecord".
      seed: base seed (rollout i uses `rollout_seed(seed, i)`); None draws a fresh one (logged
        and recorded in the run record).
      compression (tfrecord): "none", "GZIP" (default) or "ZLIB".
      rollouts_per_shard (tfrecord): default `shards.default_rollouts_per_shard`.
      validation_fraction (tfrecord): share of rollouts in the "validation" split.
      out_name (tfrecord): shard name prefix (the dataset builders read "rollouts").
      max_retries: Ray retries of a task whose worker process died or that timed out.
      rollout_timeout: seconds per rollout after which a Ray task (a pickle or a shard) is
        killed and retried; None or 0: no limit. Ignored in-process (parallelism 1).
      run_flags: flags recorded in `<out_dir>/runs/` (see rl755.common.run_record).
      deterministic: `rl755.common.determinism.configure` (None: on without a GPU). Rollout
        i is a function of its seed whether or not (its environment permitting); it matters
        for policies that run networks (`--policy=controller`).
    Returns:
      A `CollectionSummary` (`summary.rollouts`, `summary.out_dir`, ...).
    """
    start = time.monotonic()
    try:
        env_enum = Environments.from_name(environment)
    except ValueError as e:
        raise BadInput(f"--environment: {e}") from e
    _check_flags(
        num_rollouts, parallelism, max_steps, rollout_timeout, out_format, compression,
        rollouts_per_shard, out_name, validation_fraction,
    )  # fmt: skip
    compression = sharded_io.normalize_compression("GZIP" if compression is None else compression)
    if not rollouts_per_shard:
        rollouts_per_shard = shards.default_rollouts_per_shard(num_rollouts)
    policy_fn, key = _policy(env_enum, policy, controller_dir, random_action_prob, policy_kwargs)
    out_dir = out_dir or default_out_dir(env_enum, out_format)
    shards.check_out_dir(out_dir)

    if seed is None:
        seed = random_base_seed()
        log.info("Base seed %d (pass --seed=%d to reproduce this run).", seed, seed)
    determinism.configure(seed, deterministic)
    # The tag's first part names the rollouts (seed and what shapes them), the second the
    # shard layout; the same rollouts in another layout would be duplicates in the dataset.
    tag = run_tag(env=env_enum.name, policy=key, max_steps=max_steps, seed=seed)[:6]
    if out_format == "tfrecord":
        layout = run_tag(
            num_rollouts=num_rollouts,
            rollouts_per_shard=rollouts_per_shard,
            validation_fraction=validation_fraction,
        )[:4]
        _check_no_other_layout(out_dir, out_name, tag, layout, seed)
        tag = f"{tag}-{layout}"
    tasks = plan_tasks(
        out_format, num_rollouts, seed, tag, out_name, rollouts_per_shard, validation_fraction
    )
    if out_format == "tfrecord":
        shards.write_raw_dataset_info(
            out_dir,
            shards.dataset_info(
                env_enum.name,
                env_enum.observation_shape,
                env_enum.action_shape[0],
                compression,
                producer="collect_rollouts",
            ),
        )
        sink: RolloutSink = TFRecordShardSink(out_dir, compression)
    else:
        sink = PickleSink(out_dir, metadata={"environment": env_enum.name, "policy": key})

    from rl755.common import run_record

    flags = dict(run_flags or {})
    timings: dict = {}
    with run_record.record_run(out_dir, flags, stage="collect_rollouts") as record:
        record.data["resolved"] = {
            "seed": seed,
            "tag": tag,
            "rollouts_per_shard": rollouts_per_shard,
        }
        record.write()
        results = run_rollout_tasks(
            env_enum.make_fn(),
            policy_fn,
            tasks,
            max_steps,
            parallelism=parallelism,
            sink=sink,
            ray_address=ray_address,
            max_retries=max_retries,
            progress=progress,
            rollout_timeout=rollout_timeout,
            use_ray=use_ray,
            timings=timings,
        )
    done = [r for r in results if r is not None]
    return CollectionSummary(
        out_dir=out_dir,
        seed=seed,
        tag=tag,
        files=[os.path.join(out_dir, t.key) for t in tasks],
        written=len(done),
        skipped=len(results) - len(done),
        rollouts=sum(r["rollouts"] for r in done),
        frames=sum(r["frames"] for r in done),
        bytes=sum(r["bytes"] for r in done),
        cpu_seconds=sum(r.get("cpu_seconds", 0.0) for r in done),
        seconds=time.monotonic() - start,
        ray=timings.get("ray", False),
        ray_start_s=timings.get("ray_start_s"),
        workers_ready_s=timings.get("workers_ready_s"),
    )


def _check_flags(
    num_rollouts, parallelism, max_steps, rollout_timeout, out_format, compression,
    rollouts_per_shard, out_name, validation_fraction,
) -> None:  # fmt: skip
    shards.check_positive(num_rollouts=num_rollouts, parallelism=parallelism, max_steps=max_steps)
    if rollout_timeout is not None and rollout_timeout < 0:
        raise BadInput(
            f"--rollout_timeout must be >= 0 seconds (0: no limit), got {rollout_timeout}."
        )
    if out_format not in OUT_FORMATS:
        raise BadInput(f"--out_format={out_format!r}; valid: {', '.join(OUT_FORMATS)}.")
    if out_format == "pickle" and (compression is not None or rollouts_per_shard):
        raise BadInput(
            "--compression and --rollouts_per_shard apply to --out_format=tfrecord only "
            "(pickles are converted with convert_pickles_to_tfrecords.py)."
        )
    if not out_name or os.sep in out_name or out_name.startswith("."):
        raise BadInput(f"--out_name={out_name!r} must be a plain, non-hidden file name prefix.")
    if not 0.0 <= validation_fraction < 1.0:
        raise BadInput(f"--validation_fraction must be in [0, 1), got {validation_fraction}.")
    if rollouts_per_shard is not None and rollouts_per_shard != 0:
        shards.check_positive(rollouts_per_shard=rollouts_per_shard)


def parse_policy_kwargs(pairs: list[str]) -> dict:
    """`--policy_kwargs` ["name=value", ...] -> {name: value}; values that read as an int, a
    float or true/false become one, anything else stays text."""
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise BadInput(
                f"--policy_kwargs: {pair!r} is not name=value (e.g. --policy_kwargs=max_repeat=200)."
            )
        value = text.strip()
        if value.lower() in ("true", "false"):
            value = value.lower() == "true"
        else:
            for kind in (int, float):
                try:
                    value = kind(value)
                    break
                except ValueError:
                    pass
        out[name.strip()] = value
    return out


def _policy(
    env_enum: Environments,
    policy: str | PolicyFn,
    controller_dir: str | None,
    random_action_prob: float,
    policy_kwargs: dict | None = None,
) -> tuple[PolicyFn, str]:
    """(constructor, stable key for run tags and metadata) of the --policy flags."""
    if policy_kwargs:
        if not isinstance(policy, str) or policy == CONTROLLER:
            raise BadInput(
                "--policy_kwargs are constructor arguments of a named --policy (e.g. "
                "--policy=RepeatRandomPolicy --policy_kwargs=max_repeat=200); --policy=controller "
                "takes --controller_dir and --random_action_prob instead."
            )
        if controller_dir or random_action_prob:
            raise BadInput("--controller_dir and --random_action_prob need --policy=controller.")
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(policy_kwargs.items()))
        return resolve_policy(env_enum, policy, **policy_kwargs), f"{policy}({args})"
    if policy == CONTROLLER:
        policy_fn = resolve_policy(
            env_enum,
            CONTROLLER,
            controller_dir=controller_dir,
            random_action_prob=random_action_prob,
        )
        return policy_fn, f"controller:{os.path.abspath(controller_dir)}:{random_action_prob:g}"
    if controller_dir or random_action_prob:
        raise BadInput("--controller_dir and --random_action_prob need --policy=controller.")
    if isinstance(policy, str):
        return resolve_policy(env_enum, policy), policy
    if not callable(policy):
        raise BadInput(f"policy must be a name or a policy constructor, got {policy!r}.")
    return policy, policy_key(policy)
