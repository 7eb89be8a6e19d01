"""Rollout datasets at their default places under the data dir, the bases of rl755.data.registry.

    RawRollouts = type("RawRollouts", (RawRolloutsInDirectory,), {"ENVIRONMENT": env})
    RawRollouts().rollouts_ds("train")       # <data_dir>/<env folder>/raw_rollouts/rollouts-train*

Any of them also takes `tfrecords_pattern=` to read data somewhere else.
"""

from __future__ import annotations

import os

from rl755.common import config, sharded_io
from rl755.data.common.rollout_datasets import (
    EncodedRolloutDatasetBuilder,
    RawImageRolloutDatasetBuilder,
)
from rl755.environments import Environments


class RawRolloutsInDirectory(RawImageRolloutDatasetBuilder):
    """Raw rollouts of `ENVIRONMENT` under `<data_dir>/<env folder>/raw_rollouts/` (stage 1's
    default output), or wherever `tfrecords_pattern=` points."""

    ENVIRONMENT: Environments

    def _environment(self) -> Environments:
        return self.ENVIRONMENT

    def _tfrecords_pattern(self) -> str:
        folder = self.environment.folder_name
        return str(config.env_data_dir(folder) / "raw_rollouts" / "rollouts-{split}*.tfrecord-*")


class EncodedRolloutsInDirectory(EncodedRolloutDatasetBuilder):
    """Encoded rollouts under `<data_dir>/<env folder>/encoded_rollouts/<subdir>/`.

    Subclasses set `ENVIRONMENT` and `SUBDIR` (and optionally `OUT_NAME`,
    `REPRESENTATION_SIZE`). The representation size comes from the directory's
    `dataset_info.json` (written by scripts/data_gen/encode_raw_rollouts.py) unless given.
    """

    ENVIRONMENT: Environments
    SUBDIR: str = "vae"
    OUT_NAME: str = "encoded"
    REPRESENTATION_SIZE: int | None = None

    def __init__(
        self, tfrecords_pattern: str | None = None, representation_size: int | None = None
    ):
        super().__init__(tfrecords_pattern)
        self._representation_size = representation_size or self.REPRESENTATION_SIZE

    def _environment(self) -> Environments:
        return self.ENVIRONMENT

    def directory(self) -> str:
        return str(
            config.env_data_dir(self.environment.folder_name) / "encoded_rollouts" / self.SUBDIR
        )

    def _tfrecords_pattern(self) -> str:
        return os.path.join(self.directory(), self.OUT_NAME + "-{split}*.tfrecord-*")

    def representation_size(self) -> int:
        if self._representation_size is None:
            pattern_dir = os.path.dirname(self.tfrecords_pattern())
            info = sharded_io.read_dataset_info(pattern_dir) or {}
            size = info.get("representation_size")
            if size is None:
                raise FileNotFoundError(
                    f"{type(self).__name__}: no representation_size known: {pattern_dir} has no "
                    "dataset_info.json. Encode rollouts there first "
                    "(scripts/data_gen/encode_raw_rollouts.py) or pass representation_size=."
                )
            self._representation_size = int(size)
        return self._representation_size

    def _has_std_devs(self) -> bool:
        pattern_dir = os.path.dirname(self.tfrecords_pattern())
        info = sharded_io.read_dataset_info(pattern_dir) or {}
        return bool(info.get("has_std_devs", True))
