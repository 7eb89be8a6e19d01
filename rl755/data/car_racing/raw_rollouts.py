"""Raw rollouts of CAR_RACING as collected by scripts/data_gen/car_racing/parallel_rollout_main.py.

Location: `<data_dir>/car_racing/raw_rollouts/rollouts-{split}*.tfrecord-*` (see rl755.common.config).
"""

from rl755.common import config
from rl755.data.common.rollout_datasets import RawImageRolloutDatasetBuilder
from rl755.environments import Environments


class RawRollouts(RawImageRolloutDatasetBuilder):
    """Random-policy rollouts of CAR_RACING; observations uint8 [T, *observation_shape]."""

    def _environment(self):
        return Environments.CAR_RACING

    def _tfrecords_pattern(self):
        return str(
            config.env_data_dir("car_racing") / "raw_rollouts" / "rollouts-{split}*.tfrecord-*"
        )
