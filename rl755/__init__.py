"""rl755: a TensorFlow 2 toolkit for model-based reinforcement learning research.

Stages (World Models): collect rollouts (`rl755.data_gen`), train an observation encoder
(`rl755.models.common.encoder`), re-encode rollouts, train a sequential model
(`rl755.models.common.sequential`) and train a controller with CMA-ES.
"""

__version__ = "0.1.0"

from rl755.common import tf_setup as _tf_setup  # noqa: E402

_tf_setup.quiet()  # TensorFlow's start-up chatter, here and in every Ray worker (tf_setup)
