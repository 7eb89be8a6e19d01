"""Trained BREAKOUT models (the original interface): one no-argument function per rl755.zoo row
of BREAKOUT; help(<function>) shows how each was trained.

Generated from rl755/zoo/rows.py by `python scripts/dev/zoo_table.py --write`; do not edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rl755 import zoo

if TYPE_CHECKING:
    from rl755.models.common.encoder import ObservationEncoder
    from rl755.models.common.sequential import SequentialModel


def raw_rollout_vae_32ld() -> ObservationEncoder:
    r"""ConvVAE on 64x64 frames, Z = 32.

    Trained on the RepeatRandomPolicy raw rollouts
    (`<data_dir>/breakout/raw_rollouts/rollouts-train*.tfrecord-*`).

    Trained with:

        python scripts/models/train_obs_encoder.py --environment=BREAKOUT --model=vae.Vae \
            --model_dir=<models_dir>/breakout/raw_rollout_vae_32ld --train_steps=3000 \
            --batch_size=100 --representation_size=32 --save_every_n_steps=500 \
            --obs_sampled_per_rollout=100 --learning_rate=1e-3

    Loads the newest complete checkpoint of `<models_dir>/breakout/raw_rollout_vae_32ld/`, or
    without one the shipped copy `rl755/zoo/shipped/breakout/raw_rollout_vae_32ld/` (float16
    weights) if there is one (`rl755.zoo.get('BREAKOUT', 'raw_rollout_vae_32ld')()`) and returns
    an ObservationEncoder (rl755.models.common.encoder), weights loaded; the exact flags, data
    and git commit of the run are in its runs/*.json. A missing model fails with the command
    above. Rollouts it encodes (scripts/data_gen/encode_raw_rollouts.py
    --model=raw_rollout_vae_32ld) are `--rollouts_dataset=RawRolloutVae32ld`.
    """
    return zoo.get("BREAKOUT", "raw_rollout_vae_32ld").load()


def mdn_rnn_32ld() -> SequentialModel:
    r"""MDN-RNN (LSTM 256, 5 Gaussians per latent dimension) with reward and episode-end heads.

    Trained with:

        python scripts/models/train_sequential_model.py --environment=BREAKOUT \
            --model=mdn_rnn.mdn_rnn_with_heads --model_dir=<models_dir>/breakout/mdn_rnn_32ld \
            --rollouts_dataset=RawRolloutVae32ld --train_steps=2000 --batch_size=32 \
            --sequence_length=100 --learning_rate=1e-3

    Loads the newest complete checkpoint of `<models_dir>/breakout/mdn_rnn_32ld/`, or without
    one the shipped copy `rl755/zoo/shipped/breakout/mdn_rnn_32ld/` (float16 weights) if there
    is one (`rl755.zoo.get('BREAKOUT', 'mdn_rnn_32ld')()`) and returns a SequentialModel
    (rl755.models.common.sequential), weights loaded; the exact flags, data and git commit of
    the run are in its runs/*.json. A missing model fails with the command above.
    """
    return zoo.get("BREAKOUT", "mdn_rnn_32ld").load()
