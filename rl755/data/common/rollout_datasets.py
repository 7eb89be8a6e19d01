"""tf.data access to sharded rollout datasets, streamed (never the whole dataset in memory).

    RawRollouts = rl755.data.registry.raw_rollouts_class("CAR_RACING")
    ds = RawRollouts().random_rollout_observations(obs_sampled_per_rollout=100)   # uint8 [96, 96, 3]
    ds = RawRollouts().rollouts_ds("validation")     # {"observations": uint8 [T, 96, 96, 3], ...}

A concrete dataset names its environment and a tfrecords glob pattern with a `{split}`
placeholder ("train" or "validation"); rl755.data.common.directories has the default places.
Stages call `check_shards(split)` before spending compute and read inside
`naming_bad_shards(split)`, which names the file of a DataLossError. Each method's docstring
gives its elements' shapes.
"""

from __future__ import annotations

import abc
import glob
import os

import tensorflow as tf

from rl755.common import config, determinism, shard_checks, sharded_io
from rl755.common.errors import MissingData
from rl755.common.structs import decode_frames, parse_rollout_tensors
from rl755.environments import Environments

SPLITS = ("train", "validation")


SLICE_STARTS = ("uniform", "episode_start")  # where get_autoregressive_slices starts a slice


def rollout_fingerprint(observations: tf.Tensor) -> tf.Tensor:
    """int64 []: a fingerprint of a rollout's observations [T, ...] (farmhash of their bytes;
    0 is never used by a real rollout in practice and means "no rollout")."""
    fp = tf.fingerprint(tf.reshape(observations, [1, -1]))  # uint8 [1, 8]
    return tf.bitcast(fp[0], tf.int64)


class RolloutDatasetBuilder(abc.ABC):
    """Base class: a sharded TFRecord dataset of rollouts of one environment."""

    def __init__(self, tfrecords_pattern: str | None = None):
        self._pattern_override = tfrecords_pattern

    # ---- what subclasses define ---------------------------------------------------------------
    @abc.abstractmethod
    def _environment(self) -> Environments:
        """The environment the rollouts come from, e.g. `Environments.CAR_RACING`."""

    @abc.abstractmethod
    def _tfrecords_pattern(self) -> str:
        """A glob pattern with a `{split}` placeholder."""

    @abc.abstractmethod
    def _observation_shape(self) -> tuple[int, ...]:
        """Shape of one stored observation."""

    @abc.abstractmethod
    def _observation_dtype(self) -> tf.DType:
        """tf.uint8 for frames, tf.float32 for representations."""

    def _has_std_devs(self) -> bool:
        return False

    # ---- public API ---------------------------------------------------------------------------
    @property
    def environment(self) -> Environments:
        return Environments.from_name(self._environment())

    @property
    def action_size(self) -> int:
        return int(self.environment.action_shape[0])

    def tfrecords_pattern(self) -> str:
        pattern = self._pattern_override or self._tfrecords_pattern()
        if "{split}" not in pattern:
            raise ValueError(
                f"tfrecords pattern {pattern!r} has no '{{split}}' placeholder; "
                "expected e.g. '/data/rollouts-{split}*.tfrecord-*'."
            )
        return os.path.expanduser(str(pattern))

    def get_tfrecord_files(self, split: str = "train") -> list[str]:
        """Sorted complete shard files of `split`; raises FileNotFoundError if there are none."""
        if split not in SPLITS:
            raise ValueError(f"Unknown split {split!r}; valid: {', '.join(SPLITS)}.")
        pattern = self.tfrecords_pattern().format(split=split)
        files = sharded_io.list_shards(pattern)
        if not files:
            raise MissingData(
                f"{type(self).__name__}: no '{split}' shards match {pattern}. "
                f"{self._missing_data_hint()} Data locations come from $RL755_DATA_DIR or "
                "~/.config/rl755/config.json (python -m rl755.common.config shows them)."
            )
        self._check_dataset_info(files)
        return files

    def check_shards(self, split: str = "train") -> list[str]:
        """`get_tfrecord_files(split)`, after checking that each reads to the end: a BadInput
        names every truncated or damaged file (rl755.common.shard_checks)."""
        files = self.get_tfrecord_files(split)
        shard_checks.check_shards(files, self.tfrecords_pattern().format(split=split))
        return files

    def naming_bad_shards(self, *splits: str):
        """A context in which TensorFlow's DataLossError (it names no file) while reading
        `splits` becomes a BadInput naming the file (rl755.common.shard_checks)."""
        files = [f for s in splits for f in self.get_tfrecord_files(s)]
        pattern = self.tfrecords_pattern().format(split=splits[0] if len(splits) == 1 else "*")
        return shard_checks.naming_bad_shards(files, pattern)

    def rollouts_ds(
        self, split: str = "train", repeat: bool = False, shuffle_files: bool = True
    ) -> tf.data.Dataset:
        """Whole rollouts, read in parallel from all shards: {"observations": uint8
        [T, H, W, C] (raw) or float32 [T, Z] (encoded), "actions": float32 [T, A], "rewards":
        float32 [T], "done": bool [], "observation_std_devs": float32 [T, Z] (encoded datasets
        that have them)}. With `shuffle_files=False` the order is fixed on any machine: one
        rollout of each of up to 8 shards in turn (in file order), then the next."""
        return self._raw_rollouts_ds(split, repeat, shuffle_files).map(
            self._parser(), num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle_files
        )

    def random_rollout_slices_ds(
        self,
        slice_size: int,
        split: str = "train",
        repeat: bool = False,
        shuffle_files: bool = True,
    ) -> tf.data.Dataset:
        """One random contiguous slice of `slice_size` = L steps from each rollout: the keys of
        `rollouts_ds` with T = L, "done" dropped (rollouts shorter than L are skipped)."""
        _check_positive(slice_size=slice_size)

        def take_slice(r):
            r = dict(r)
            r.pop("done")
            n = tf.shape(r["actions"])[0]
            start = tf.random.uniform([], 0, n - slice_size + 1, dtype=tf.int32)
            return {k: v[start : start + slice_size] for k, v in r.items()}

        ds = self.rollouts_ds(split, repeat, shuffle_files)
        ds = ds.filter(lambda r: tf.shape(r["actions"])[0] >= slice_size)
        return ds.map(take_slice, **determinism.random_map_options())

    # ---- internals ----------------------------------------------------------------------------
    def _missing_data_hint(self) -> str:
        return "Create the dataset first (see docs/stages/index.md)."

    def _dataset_dirs(self, files: list[str]) -> list[str]:
        return sorted({os.path.dirname(f) for f in files})

    def _check_dataset_info(self, files: list[str]) -> None:
        """Fails fast when a sidecar says the data is of another environment or shape."""
        for d in self._dataset_dirs(files):
            info = sharded_io.read_dataset_info(d)
            if not info:
                continue
            env = info.get("environment")
            if env is not None and env != self.environment.name:
                raise ValueError(
                    f"{type(self).__name__} reads {self.environment.name} rollouts but {d} holds "
                    f"{env} rollouts (dataset_info.json). Point it at the right directory."
                )
            shape = info.get("observation_shape")
            if shape is not None and tuple(shape) != tuple(self._observation_shape()):
                raise ValueError(
                    f"{type(self).__name__} expects observations of shape "
                    f"{tuple(self._observation_shape())} but {d} holds {tuple(shape)} "
                    "(dataset_info.json)."
                )

    def _raw_rollouts_ds(self, split: str, repeat: bool, shuffle_files: bool) -> tf.data.Dataset:
        files = self.get_tfrecord_files(split)
        files_ds = tf.data.Dataset.from_tensor_slices(
            (files, [sharded_io.detect_compression(f) for f in files])
        )
        if shuffle_files:
            files_ds = files_ds.shuffle(len(files), reshuffle_each_iteration=True)
        if repeat:
            files_ds = files_ds.repeat()
        return files_ds.interleave(
            lambda f, c: tf.data.TFRecordDataset(f, compression_type=c),
            cycle_length=min(len(files), 8),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=not shuffle_files,
        )

    def _parser(self, decode_observations: bool = True):
        """A parse function for `ds.map`; sizes and sidecar facts are read once, here."""
        shape = self._observation_shape()
        action_size = self.action_size
        dtype = self._observation_dtype()
        with_std_devs = self._has_std_devs()

        def parse(serialized: tf.Tensor) -> dict:
            return parse_rollout_tensors(
                serialized,
                shape,
                action_size,
                observation_dtype=dtype,
                with_std_devs=with_std_devs,
                decode_observations=decode_observations,
            )

        return parse


class RawImageRolloutDatasetBuilder(RolloutDatasetBuilder):
    """Rollouts whose observations are the environment's uint8 frames."""

    def _observation_shape(self) -> tuple[int, ...]:
        return tuple(self.environment.observation_shape)

    def _observation_dtype(self) -> tf.DType:
        return tf.uint8

    def _missing_data_hint(self) -> str:
        return (
            "Collect rollouts first: python scripts/data_gen/collect_rollouts.py "
            f"--environment={self.environment.name} --out_format=tfrecord ..."
        )

    def random_rollout_observations(
        self,
        split: str = "train",
        obs_sampled_per_rollout: int = 100,
        repeat: bool = True,
        shuffle_files: bool = True,
    ) -> tf.data.Dataset:
        """Single observations, uint8 [H, W, C], `obs_sampled_per_rollout` from each rollout.

        Observations are drawn without replacement (all of them if the rollout is
        shorter); only the sampled frames are decoded. Shuffle downstream (the frames of one
        rollout arrive together).
        """
        _check_positive(obs_sampled_per_rollout=obs_sampled_per_rollout)
        shape = self._observation_shape()
        parse = self._parser(decode_observations=False)

        def sample(serialized):
            raw = parse(serialized)["observations"]
            n = tf.shape(raw)[0]
            k = tf.minimum(n, obs_sampled_per_rollout)
            idx = tf.random.shuffle(tf.range(n))[:k]
            return decode_frames(tf.gather(raw, idx), shape)

        ds = self._raw_rollouts_ds(split, repeat, shuffle_files)
        ds = ds.map(sample, **determinism.random_map_options(deterministic=not shuffle_files))
        return ds.unbatch()


class EncodedRolloutDatasetBuilder(RolloutDatasetBuilder):
    """Rollouts whose observations are an encoder's representations, float32 [T, Z]."""

    @abc.abstractmethod
    def representation_size(self) -> int:
        """Z."""

    def _observation_shape(self) -> tuple[int, ...]:
        return (int(self.representation_size()),)

    def _observation_dtype(self) -> tf.DType:
        return tf.float32

    def _has_std_devs(self) -> bool:
        """True when the rollouts store "observation_std_devs" (VAE posteriors do)."""
        return True

    def _missing_data_hint(self) -> str:
        env = self.environment
        root = config.env_data_dir(env.folder_name) / "encoded_rollouts"
        found = sorted({os.path.dirname(f) for f in glob.glob(str(root / "*" / "*.tfrecord-*"))})
        where = (
            f" Encoded shards are in {', '.join(found)}: pass --rollouts_pattern="
            f"'{os.path.join(found[0], 'encoded-{split}*.tfrecord-*')}' to read them."
            if found
            else ""
        )
        return (
            "Encode raw rollouts first: python scripts/data_gen/encode_raw_rollouts.py "
            f"--environment={env.name} ... (with --model_dir=D it writes to {root}/<D's name>/), "
            "or point --rollouts_pattern at encoded shards (a glob with '{split}')." + where
        )

    def get_autoregressive_slices(
        self,
        sequence_length: int,
        split: str = "train",
        sample_observations: bool = False,
        difference_targets: bool = False,
        repeat: bool = True,
        shuffle_files: bool = True,
        slice_start: str = "uniform",
        rollout_ids: bool = False,
    ) -> tf.data.Dataset:
        """Teacher-forcing slices for sequential models, L = `sequence_length`:
        {"inputs": float32 [L, Z + A] concat(z_t, a_t), "targets": float32 [L, Z] z_{t+1} (or
        z_{t+1} - z_t), "rewards" [L] reward_t, "dones" [L] 1.0 where the episode terminated
        after step t, "mask" [L] 1.0 where step t exists, "target_mask" [L] 1.0 where z_{t+1}
        exists}; with `rollout_ids` also "rollout_id": int64 [] (`rollout_fingerprint`).

        One slice of up to `sequence_length` steps per rollout, padded (mask 0) where it runs
        past the end. `slice_start="episode_start"` starts every slice at the rollout's first
        step (the model learns from the state dreams start in, over the whole episode when L is
        at least its length: World Models' Doom MDN-RNN trained on whole episodes); the default
        "uniform" starts it uniformly over all of the rollout's steps. So every step
        from the L-th on is equally likely to be trained on, the last one included (the only
        step with an episode-end target; starting only where a whole slice fits would show it
        L times less often than the others). With `sample_observations`, each
        z_t is a sample mean + std * eps of the stored posterior (one sample per step, shared
        by the input at t and the target at t - 1); without stored std devs it has no effect.
        With `difference_targets`, targets are z_{t+1} - z_t (in the same, possibly sampled,
        representation space).
        """
        _check_positive(sequence_length=sequence_length)
        if slice_start not in SLICE_STARTS:
            raise ValueError(
                f"Unknown slice_start {slice_start!r}; valid: {', '.join(SLICE_STARTS)}."
            )
        from_start = slice_start == "episode_start"
        L = sequence_length
        has_std = self._has_std_devs()
        z_size = self.representation_size()

        def make_slice(r):
            z_all, a_all = r["observations"], r["actions"]
            n = tf.shape(a_all)[0]
            start = tf.constant(0) if from_start else tf.random.uniform([], 0, n, dtype=tf.int32)
            z = z_all[start : start + L + 1]
            if sample_observations and has_std:
                std = r["observation_std_devs"][start : start + L + 1]
                z = z + std * tf.random.normal(tf.shape(z))
            steps = tf.minimum(L, n - start)
            z_in, z_next = z[:steps], z[1 : steps + 1]
            n_targets = tf.shape(z_next)[0]
            targets = z_next - z_in[:n_targets] if difference_targets else z_next
            a = a_all[start : start + steps]
            rewards = r["rewards"][start : start + steps]
            is_last = tf.equal(tf.range(start, start + steps), n - 1)
            dones = tf.cast(tf.logical_and(is_last, r["done"]), tf.float32)

            def pad(x, length):
                paddings = [[0, L - length]] + [[0, 0]] * (len(x.shape) - 1)
                return tf.pad(x, paddings)

            out = {
                "inputs": pad(tf.concat([z_in, a], axis=-1), steps),
                "targets": pad(targets, n_targets),
                "rewards": pad(rewards, steps),
                "dones": pad(dones, steps),
                "mask": pad(tf.ones([steps]), steps),
                "target_mask": pad(tf.ones([n_targets]), n_targets),
            }
            shapes = {
                "inputs": [L, z_size + self.action_size],
                "targets": [L, z_size],
                "rollout_id": [],
            }
            if rollout_ids:
                out["rollout_id"] = rollout_fingerprint(z_all)
            return {k: tf.ensure_shape(v, shapes.get(k, [L])) for k, v in out.items()}

        ds = self.rollouts_ds(split, repeat, shuffle_files)
        return ds.map(make_slice, **determinism.random_map_options())


def _check_positive(**values) -> None:
    for name, value in values.items():
        if int(value) <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value}.")
