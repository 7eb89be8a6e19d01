"""`RawRollouts` of CAR_RACING (seed interface), made by rl755.data.registry from the environment table."""

from rl755.data.registry import raw_rollouts_class

RawRollouts = raw_rollouts_class("CAR_RACING")
