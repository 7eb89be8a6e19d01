"""Rollout policies for BREAKOUT (`--policy=RandomPolicy` / `--policy=RepeatRandomPolicy`).

Actions are one-hot float32 [4] over (NOOP, FIRE, RIGHT, LEFT); ALE already repeats each
action for 4 frames (frameskip 4) and makes 25% of them sticky.

    RandomPolicy()          a uniformly random action every step
    RepeatRandomPolicy()    a random action held for a random 1..4 steps: the paddle
                            travels further, so the frames show it all over the screen
"""

from __future__ import annotations

from rl755.data_gen.discrete_policies import DiscreteRandomPolicy, RepeatedDiscreteRandomPolicy


class RandomPolicy(DiscreteRandomPolicy):
    """A uniformly random action every step (one-hot float32 [4])."""


class RepeatRandomPolicy(RepeatedDiscreteRandomPolicy):
    """A uniformly random action held for `min_repeat..max_repeat` steps (default 1..4)."""

    def __init__(self, min_repeat: int = 1, max_repeat: int = 4):
        super().__init__(min_repeat=min_repeat, max_repeat=max_repeat)
