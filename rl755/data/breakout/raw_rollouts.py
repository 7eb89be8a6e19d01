"""Raw rollouts of BREAKOUT as collected by scripts/data_gen/car_racing/parallel_rollout_main.py
(`--environment=BREAKOUT`).

Location: `<data_dir>/breakout/raw_rollouts/rollouts-{split}*.tfrecord-*` (see rl755.common.config).
Observations are the 64x64 frames `Environments.BREAKOUT.make()` returns; actions are one-hot
float32 [4] (see rl755.environments).
"""

from rl755.common import config
from rl755.data.common.rollout_datasets import RawImageRolloutDatasetBuilder
from rl755.environments import Environments


class RawRollouts(RawImageRolloutDatasetBuilder):
    """Random-policy rollouts of BREAKOUT; observations uint8 [T, 64, 64, 3]."""

    def _environment(self):
        return Environments.BREAKOUT

    def _tfrecords_pattern(self):
        return str(
            config.env_data_dir("breakout") / "raw_rollouts" / "rollouts-{split}*.tfrecord-*"
        )
