"""`--rollouts_dataset` classes of CAR_RACING (seed interface), made by rl755.data.registry from the zoo."""

from rl755.data.registry import encoded_rollouts_classes

globals().update(encoded_rollouts_classes("CAR_RACING"))
