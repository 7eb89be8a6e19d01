"""Encoded rollouts of DOOM_TAKE_COVER (stage 3 output), for training sequential models.

Each class reads `<data_dir>/doom_take_cover/encoded_rollouts/<SUBDIR>/encoded-{split}*.tfrecord-*`
as written by scripts/data_gen/encode_raw_rollouts.py, whose default --out_dir for
`--model=<saved model>` is `.../encoded_rollouts/<saved model>`:

    --rollouts_dataset=RawRolloutVae64ld   # encoded with saved_models.raw_rollout_vae_64ld
    --rollouts_dataset=VaeEncodedRollouts  # .../encoded_rollouts/vae (an --out_dir you chose)

Elements: see rl755.data.common.rollout_datasets (observations = VAE means [T, 64],
observation_std_devs = posterior std devs [T, 64]; actions one-hot [T, A]).
"""

from rl755.data.common.rollout_datasets import EncodedRolloutsInDirectory
from rl755.environments import Environments


class VaeEncodedRollouts(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by the VAE (mean as observation, posterior std devs kept)."""

    ENVIRONMENT = Environments.DOOM_TAKE_COVER
    SUBDIR = "vae"
    OUT_NAME = "encoded"


class RawRolloutVae64ld(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by `saved_models.raw_rollout_vae_64ld` (Z = 64):

    python scripts/data_gen/encode_raw_rollouts_multi.py --environment=DOOM_TAKE_COVER \
        --model=raw_rollout_vae_64ld --split=train --num_sub_shards=4   # and --split=validation
    """

    ENVIRONMENT = Environments.DOOM_TAKE_COVER
    SUBDIR = "raw_rollout_vae_64ld"
    OUT_NAME = "encoded"
    REPRESENTATION_SIZE = 64
