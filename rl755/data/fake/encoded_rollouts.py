"""Encoded rollouts of FAKE_PIXELS (stage 3 output), for training sequential models.

Each class reads `<data_dir>/fake/encoded_rollouts/<SUBDIR>/encoded-{split}*.tfrecord-*` as
written by scripts/data_gen/encode_raw_rollouts.py (default --out_dir for
`--model=<saved model>`: `.../encoded_rollouts/<saved model>`).
"""

from rl755.data.common.rollout_datasets import EncodedRolloutsInDirectory
from rl755.environments import Environments


class VaeEncodedRollouts(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by the VAE (mean as observation, posterior std devs kept)."""

    ENVIRONMENT = Environments.FAKE_PIXELS
    SUBDIR = "vae"
    OUT_NAME = "encoded"


class RawRolloutVae4ld(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by `saved_models.raw_rollout_vae_4ld` (Z = 4):

    python scripts/data_gen/encode_raw_rollouts_multi.py --environment=FAKE_PIXELS \
        --model=raw_rollout_vae_4ld --split=train
    """

    ENVIRONMENT = Environments.FAKE_PIXELS
    SUBDIR = "raw_rollout_vae_4ld"
    OUT_NAME = "encoded"
    REPRESENTATION_SIZE = 4
