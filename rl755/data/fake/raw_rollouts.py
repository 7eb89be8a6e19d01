"""`RawRollouts` of FAKE_PIXELS (seed interface), made by rl755.data.registry from the environment table."""

from rl755.data.registry import raw_rollouts_class

RawRollouts = raw_rollouts_class("FAKE_PIXELS")
