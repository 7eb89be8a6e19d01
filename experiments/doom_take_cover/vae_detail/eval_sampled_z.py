"""evaluate_controller.py with the real game's z sampled from the VAE posterior
(mean + Z_NOISE_SCALE x std x N(0, 1)), as World Models' encode_obs does; the flags are
evaluate_controller.py's. A lab patch (section 1 of README.md), not a toolkit option; run it
from the repository's root."""

import os
import runpy
import sys

import tensorflow as tf

from rl755.controller import agent as agent_mod

SCALE = float(os.environ.get("Z_NOISE_SCALE", "1.0"))


def _encode(self, obs):
    mean, extras = self.encoder.compute_full_representation(obs)
    return mean + SCALE * extras["std_devs"] * tf.random.normal(tf.shape(mean))


agent_mod.WorldModelAgent._encode = _encode
sys.argv = ["scripts/models/evaluate_controller.py"] + sys.argv[1:]
runpy.run_path("scripts/models/evaluate_controller.py", run_name="__main__")
