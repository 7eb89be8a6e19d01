"""Encoded rollouts of BREAKOUT (stage 3 output), for training sequential models.

`--rollouts_dataset=VaeEncodedRollouts` reads
`<data_dir>/breakout/encoded_rollouts/vae/encoded-{split}*.tfrecord-*`.
"""

from rl755.data.common.rollout_datasets import EncodedRolloutsInDirectory
from rl755.environments import Environments


class VaeEncodedRollouts(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by the VAE (mean as observation, posterior std devs kept)."""

    ENVIRONMENT = Environments.BREAKOUT
    SUBDIR = "vae"
    OUT_NAME = "encoded"
