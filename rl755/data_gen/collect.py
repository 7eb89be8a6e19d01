"""Stage 1: collect rollouts of a policy and store them as pickles or TFRecord shards.

    collect_rollouts("CAR_RACING", "HastingsRandomPolicy", num_rollouts=100, parallelism=2,
                     max_steps=1000, out_format="tfrecord")   # -> <data_dir>/car_racing/raw_rollouts

`scripts/data_gen/car_racing/parallel_rollout_main.py` is the command-line face of this.

Output formats:
  pickle    one `<out_dir>/rollout-<tag>-<index>.pickle` per rollout holding `[Rollout]` (the
            original project's format; convert with rollout_pickles_to_tfrecords.py).
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

import hashlib
import json
import logging
import os

from rl755.common import config, lookup
from rl755.common.errors import BadInput
from rl755.data_gen import gym_rollouts
from rl755.data_gen import tfrecords as tfr
from rl755.environments import Environments

log = logging.getLogger(__name__)

OUT_FORMATS = ("pickle", "tfrecord")


def resolve_policy(environment: Environments, name: str) -> gym_rollouts.PolicyFn:
    """`rl755.models.<env folder>.policies.<name>`, strictly (LookupError lists valid names)."""
    package = f"{environment.folder_module('models')}.policies"
    try:
        policy_fn = lookup.resolve(package, name, base_class=gym_rollouts.Policy, what="policy")
    except LookupError as e:
        raise BadInput(
            f"--policy: {e} Or --policy=controller with --controller_dir=<a trained controller>."
        ) from e
    if not callable(policy_fn):
        raise BadInput(f"--policy={name} resolves to {policy_fn!r}, which is not callable.")
    try:
        gym_rollouts.build_policy(policy_fn)  # fails now if it does not build a Policy
    except TypeError as e:
        raise BadInput(f"--policy: {e}") from e
    return policy_fn


CONTROLLER_POLICY = "controller"


def controller_policy(
    environment: Environments, controller_dir: str | None, random_action_prob: float
) -> gym_rollouts.PolicyFn:
    """`--policy=controller`: a trained controller (`WorldModelPolicy`) from `controller_dir`,
    taking a uniform random action with probability `random_action_prob` each step. Loads
    its models once here, so a missing or mismatched one fails before any rollout."""
    import functools

    if not controller_dir:
        raise BadInput("--policy=controller needs --controller_dir (a train_controller model dir).")
    if not 0.0 <= random_action_prob <= 1.0:
        raise BadInput(f"--random_action_prob must be in [0, 1], got {random_action_prob}.")
    from rl755.controller.policy import WorldModelPolicy

    try:
        policy = WorldModelPolicy.from_controller_dir(controller_dir, random_action_prob)
    except (FileNotFoundError, LookupError, ValueError) as e:
        raise BadInput(f"--controller_dir={controller_dir}: {e}") from e
    if policy.spec.env != environment:
        raise BadInput(
            f"--controller_dir={controller_dir} holds a controller for {policy.spec.env.name}, "
            f"not --environment={environment.name}."
        )
    policy.spec.build()  # loads the encoder and sequential model: fail now, not in a worker
    return functools.partial(
        WorldModelPolicy.from_controller_dir,
        os.path.abspath(controller_dir),
        random_action_prob,
    )


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
        for p in tfr.sharded_io.list_shards(pattern)
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
) -> list[gym_rollouts.RolloutTask]:
    """The tasks of a run: rollout i (seed `rollout_seed(base_seed, i)`) appears exactly once."""
    items = [(i, gym_rollouts.rollout_seed(base_seed, i)) for i in range(num_rollouts)]
    if out_format == "pickle":
        return [
            gym_rollouts.RolloutTask(key=f"rollout-{tag}-{i:06d}{tfr.PICKLE_SUFFIX}", items=(it,))
            for i, it in enumerate(items)
        ]
    val = tfr.validation_indices(num_rollouts, validation_fraction)
    tasks = []
    for split in tfr.SPLITS:
        split_items = [it for it in items if (it[0] in val) == (split == "validation")]
        groups = tfr.chunk(split_items, rollouts_per_shard)
        for j, group in enumerate(groups):
            name = tfr.split_shard_name(out_name, split, j, len(groups), tag=tag)
            tasks.append(gym_rollouts.RolloutTask(key=name, items=tuple(group)))
    return tasks


def collect_rollouts(
    environment: str | Environments,
    policy: str,
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
) -> dict:
    """Collects exactly `num_rollouts` rollouts and writes them to `out_dir`.

    Args:
      environment: an `Environments` name, e.g. "CAR_RACING".
      policy: a name in `rl755.models.<env folder>.policies`, e.g. "RandomPolicy", or
        "controller": the trained controller in `controller_dir`, taking a uniform random
        action with probability `random_action_prob` each step (iterative World Models data).
      num_rollouts, parallelism, max_steps: positive counts; parallelism 1 without
        `ray_address` runs in this process, otherwise on Ray.
      out_dir: default `default_out_dir(environment, out_format)`.
      out_format: "pickle" or "tfrecord".
      seed: base seed (rollout i uses `rollout_seed(seed, i)`); None draws a fresh one (logged
        and recorded in the run record).
      compression (tfrecord): "none", "GZIP" (default) or "ZLIB".
      rollouts_per_shard (tfrecord): default `tfrecords.default_rollouts_per_shard`.
      validation_fraction (tfrecord): share of rollouts in the "validation" split.
      out_name (tfrecord): shard name prefix (the dataset builders read "rollouts").
      max_retries: Ray retries of a task whose worker process died or that timed out.
      rollout_timeout: seconds per rollout after which a Ray task (a pickle or a shard) is
        killed and retried; None or 0: no limit. Ignored in-process (parallelism 1).
      run_flags: flags recorded in `<out_dir>/runs/` (see rl755.common.run_record).
    Returns:
      {"out_dir", "seed", "tag", "files": [paths], "written", "skipped", "rollouts", "frames",
       "bytes", "cpu_seconds" (of the workers' rollout tasks)}
    """
    try:
        env_enum = Environments.from_name(environment)
    except ValueError as e:
        raise BadInput(f"--environment: {e}") from e
    tfr.check_positive(num_rollouts=num_rollouts, parallelism=parallelism, max_steps=max_steps)
    if rollout_timeout is not None and rollout_timeout < 0:
        raise BadInput(
            f"--rollout_timeout must be >= 0 seconds (0: no limit), got {rollout_timeout}."
        )
    if out_format not in OUT_FORMATS:
        raise BadInput(f"--out_format={out_format!r}; valid: {', '.join(OUT_FORMATS)}.")
    if out_format == "pickle" and (compression is not None or rollouts_per_shard):
        raise BadInput(
            "--compression and --rollouts_per_shard apply to --out_format=tfrecord only "
            "(pickles are converted with rollout_pickles_to_tfrecords.py)."
        )
    compression = tfr.sharded_io.normalize_compression(
        "GZIP" if compression is None else compression
    )
    if not out_name or os.sep in out_name or out_name.startswith("."):
        raise BadInput(f"--out_name={out_name!r} must be a plain, non-hidden file name prefix.")
    if not 0.0 <= validation_fraction < 1.0:
        raise BadInput(f"--validation_fraction must be in [0, 1), got {validation_fraction}.")
    if rollouts_per_shard is None or rollouts_per_shard == 0:
        rollouts_per_shard = tfr.default_rollouts_per_shard(num_rollouts)
    tfr.check_positive(rollouts_per_shard=rollouts_per_shard)
    if policy == CONTROLLER_POLICY:
        policy_fn = controller_policy(env_enum, controller_dir, random_action_prob)
        policy_key = f"controller:{os.path.abspath(controller_dir)}:{random_action_prob:g}"
    else:
        if controller_dir or random_action_prob:
            raise BadInput("--controller_dir and --random_action_prob need --policy=controller.")
        policy_fn = resolve_policy(env_enum, policy)
        policy_key = policy
    out_dir = out_dir or default_out_dir(env_enum, out_format)
    tfr.check_out_dir(out_dir)

    if seed is None:
        seed = gym_rollouts.random_base_seed()
        log.info("Base seed %d (pass --seed=%d to reproduce this run).", seed, seed)
    # The tag's first part names the rollouts (seed and what shapes them), the second the
    # shard layout; the same rollouts in another layout would be duplicates in the dataset.
    tag = run_tag(env=env_enum.name, policy=policy_key, max_steps=max_steps, seed=seed)[:6]
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
        tfr.write_raw_dataset_info(
            out_dir,
            tfr.dataset_info(
                env_enum.name,
                env_enum.observation_shape,
                env_enum.action_shape[0],
                compression,
                producer="parallel_rollout_main",
            ),
        )
        sink: gym_rollouts.RolloutSink = tfr.TFRecordShardSink(out_dir, compression)
    else:
        sink = _EnvTaggingPickleSink(out_dir, env_enum.name, policy)

    from rl755.common import run_record

    flags = dict(run_flags or {})
    with run_record.record_run(out_dir, flags, stage="parallel_rollout_main") as record:
        record.data["resolved"] = {
            "seed": seed,
            "tag": tag,
            "rollouts_per_shard": rollouts_per_shard,
        }
        record.write()
        results = gym_rollouts.run_rollout_tasks(
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
        )
    done = [r for r in results if r is not None]
    return {
        "out_dir": out_dir,
        "seed": seed,
        "tag": tag,
        "files": [os.path.join(out_dir, t.key) for t in tasks],
        "written": len(done),
        "skipped": len(results) - len(done),
        "rollouts": sum(r["rollouts"] for r in done),
        "frames": sum(r["frames"] for r in done),
        "bytes": sum(r["bytes"] for r in done),
        "cpu_seconds": sum(r.get("cpu_seconds", 0.0) for r in done),
    }


class _EnvTaggingPickleSink(tfr.PickleSink):
    """A PickleSink that adds the environment and policy names to each rollout's metadata."""

    def __init__(self, out_dir: str, environment: str, policy: str):
        super().__init__(out_dir)
        self.environment, self.policy = environment, policy

    def write(self, task, rollouts):
        def tagged():
            for r in rollouts:
                r.metadata.update(environment=self.environment, policy=self.policy)
                yield r

        return super().write(task, tagged())
