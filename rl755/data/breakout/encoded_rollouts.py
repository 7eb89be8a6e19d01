"""Encoded rollouts of BREAKOUT (stage 3 output), for training sequential models.

Each class reads `<data_dir>/breakout/encoded_rollouts/<SUBDIR>/encoded-{split}*.tfrecord-*`
as written by scripts/data_gen/encode_raw_rollouts.py, whose default --out_dir for
`--model=<saved model>` is `.../encoded_rollouts/<saved model>`:

    --rollouts_dataset=RawRolloutVae32ld   # encoded with saved_models.raw_rollout_vae_32ld
    --rollouts_dataset=VaeEncodedRollouts  # .../encoded_rollouts/vae (an --out_dir you chose)

Elements: see rl755.data.common.rollout_datasets (observations = VAE means [T, 32],
observation_std_devs = posterior std devs [T, 32]; actions one-hot [T, A]).
"""

from rl755.data.common.rollout_datasets import EncodedRolloutsInDirectory
from rl755.environments import Environments


class VaeEncodedRollouts(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by the VAE (mean as observation, posterior std devs kept)."""

    ENVIRONMENT = Environments.BREAKOUT
    SUBDIR = "vae"
    OUT_NAME = "encoded"


class RawRolloutVae32ld(EncodedRolloutsInDirectory):
    """Raw rollouts encoded by `saved_models.raw_rollout_vae_32ld` (Z = 32):

    python scripts/data_gen/encode_raw_rollouts_multi.py --environment=BREAKOUT \
        --model=raw_rollout_vae_32ld --split=train --num_sub_shards=4   # and --split=validation
    """

    ENVIRONMENT = Environments.BREAKOUT
    SUBDIR = "raw_rollout_vae_32ld"
    OUT_NAME = "encoded"
    REPRESENTATION_SIZE = 32
