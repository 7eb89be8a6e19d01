"""Rollout policies for DOOM_TAKE_COVER (`--policy=RandomPolicy` / `--policy=RepeatRandomPolicy`).

Actions are one-hot float32 [3] over (NOOP, MOVE_RIGHT, MOVE_LEFT).

    RandomPolicy()          a uniformly random action every step (World Models' random
                            baseline: 210 +- 108 steps survived; rl755 measures ~250 +- 130)
    RepeatRandomPolicy()    a random action held for a random 1..10 steps: the agent moves
                            across the room instead of jittering in place
"""

from __future__ import annotations

from rl755.data_gen.discrete_policies import DiscreteRandomPolicy, RepeatedDiscreteRandomPolicy


class RandomPolicy(DiscreteRandomPolicy):
    """A uniformly random action every step (one-hot float32 [3])."""


class RepeatRandomPolicy(RepeatedDiscreteRandomPolicy):
    """A uniformly random action held for `min_repeat..max_repeat` steps (default 1..10)."""

    def __init__(self, min_repeat: int = 1, max_repeat: int = 10):
        super().__init__(min_repeat=min_repeat, max_repeat=max_repeat)
