"""Raw rollouts of FAKE_PIXELS as collected by scripts/data_gen/car_racing/parallel_rollout_main.py.

Location: `<data_dir>/fake/raw_rollouts/rollouts-{split}*.tfrecord-*` (see rl755.common.config).
"""

from rl755.common import config
from rl755.data.common.rollout_datasets import RawImageRolloutDatasetBuilder
from rl755.environments import Environments


class RawRollouts(RawImageRolloutDatasetBuilder):
    """Random-policy rollouts of FAKE_PIXELS; observations uint8 [T, *observation_shape]."""

    def _environment(self):
        return Environments.FAKE_PIXELS

    def _tfrecords_pattern(self):
        return str(config.env_data_dir("fake") / "raw_rollouts" / "rollouts-{split}*.tfrecord-*")
