"""Which `--policy` names exist for an environment, and the strict resolver.

    resolve_policy("CAR_RACING", "HastingsRandomPolicy")          # -> a PolicyFn (no-arg constructor)
    resolve_policy("BREAKOUT", "RepeatRandomPolicy", max_repeat=8)  # kwargs go to the constructor
    resolve_policy("DOOM_TAKE_COVER", "controller", controller_dir=d, random_action_prob=0.2)
    policy_names("CAR_RACING")   # ['HastingsRandomPolicy', 'RandomPolicy', ..., 'controller']

The names of an environment are
  - the generic policies for its kind of actions (`GENERIC_CONTINUOUS` or `GENERIC_DISCRETE`:
    `RandomPolicy` is the uniform one of either kind), available to every environment;
  - the environment's tuned policies (`TUNED[<Environments name>]`): a class of its own where
    its code really differs (car_racing.HastingsRandomPolicy), otherwise a generic policy with
    other settings, written as data (a `functools.partial`), not as a file;
  - "controller": a trained controller (`rl755.policies.learned`, imported only when asked for).
An unknown name fails at once with the list of valid names. A new environment gets the generic
names with no code; to tune one, add a row to `TUNED` (and, for new code, a class in
`rl755/policies/<env folder>.py`).
"""

from __future__ import annotations

import functools

from rl755.common.errors import BadInput
from rl755.environments import Environments
from rl755.policies import car_racing, generic
from rl755.policies.base import PolicyFn, build_policy

CONTROLLER = "controller"

GENERIC_CONTINUOUS: dict[str, PolicyFn] = {
    "RandomPolicy": generic.UniformRandomPolicy,
    "UniformRandomPolicy": generic.UniformRandomPolicy,
    "SmoothNoisePolicy": generic.SmoothNoisePolicy,
}
GENERIC_DISCRETE: dict[str, PolicyFn] = {
    "RandomPolicy": generic.DiscreteRandomPolicy,
    "DiscreteRandomPolicy": generic.DiscreteRandomPolicy,
    "RepeatedDiscreteRandomPolicy": generic.RepeatedDiscreteRandomPolicy,
}

TUNED: dict[str, dict[str, PolicyFn]] = {
    # Smooth Perlin-noise driving that follows the track (see car_racing.py).
    "CAR_RACING": {"HastingsRandomPolicy": car_racing.HastingsRandomPolicy},
    # Smooth steering (period ~8 steps: the fake episodes last 24) with gas ~0.5.
    "FAKE_PIXELS": {
        "HastingsRandomPolicy": functools.partial(
            generic.SmoothNoisePolicy,
            center=(0.0, 0.5, 0.0),
            scale=(1.0, 0.3, 0.1),
            period=(8.0, 12.0, 12.0),
        )
    },
    # A random action held 1..4 steps (ALE already repeats each one 4 frames): the paddle
    # travels further, so the frames show it all over the screen.
    "BREAKOUT": {
        "RepeatRandomPolicy": functools.partial(
            generic.RepeatedDiscreteRandomPolicy, min_repeat=1, max_repeat=4
        )
    },
    # A random action held 1..10 steps: the agent moves across the room instead of jittering
    # in place. (RandomPolicy is World Models' random baseline: 210 +- 108 steps survived;
    # rl755 measures ~250 +- 130.)
    "DOOM_TAKE_COVER": {
        "RepeatRandomPolicy": functools.partial(
            generic.RepeatedDiscreteRandomPolicy, min_repeat=1, max_repeat=10
        )
    },
}


def _environment(environment: str | Environments) -> Environments:
    try:
        return Environments.from_name(environment)
    except ValueError as e:
        raise BadInput(f"--environment: {e}") from e


def available_policies(environment: str | Environments) -> dict[str, PolicyFn]:
    """{name: constructor} of the generic and tuned policies of `environment` ("controller",
    which needs a trained controller, is not in it)."""
    env = _environment(environment)
    generic_ = GENERIC_DISCRETE if env.is_discrete else GENERIC_CONTINUOUS
    return {**generic_, **TUNED.get(env.name, {})}


def exploration_policy(environment: str | Environments) -> str:
    """The `--policy` that explores `environment` by default: its first tuned policy
    (`TUNED`), else the generic uniform `RandomPolicy` (any environment has it)."""
    env = _environment(environment)
    return next(iter(TUNED.get(env.name, {})), "RandomPolicy")


def policy_names(environment: str | Environments) -> list[str]:
    """The valid `--policy` values for `environment`, sorted, then "controller"."""
    return [*sorted(available_policies(environment)), CONTROLLER]


def resolve_policy(environment: str | Environments, name: str, **kwargs) -> PolicyFn:
    """The no-argument constructor that `--policy=<name>` names for `environment`, strictly.

    Args:
      environment: an `Environments` member or name, e.g. "CAR_RACING".
      name: a generic or tuned policy name (see `policy_names`), or "controller".
      **kwargs: constructor arguments (e.g. track_pull=0.0); for "controller":
        controller_dir (a train_controller model dir) and random_action_prob (default 0).
    Returns:
      A picklable PolicyFn; it has been called once here, so a bad name or argument fails
      now (BadInput listing the valid names), not in a worker.
    """
    env = _environment(environment)
    if name == CONTROLLER:
        from rl755.policies.learned import controller_policy

        unknown = set(kwargs) - {"controller_dir", "random_action_prob"}
        if unknown:
            raise BadInput(
                f"--policy=controller takes controller_dir and random_action_prob, not "
                f"{', '.join(sorted(unknown))}."
            )
        return controller_policy(env, **kwargs)
    choices = available_policies(env)
    if name not in choices:
        raise BadInput(
            f"Unknown --policy {name!r} for {env.name}. Valid --policy values for {env.name}: "
            f"{', '.join(sorted(choices))}. Or --policy=controller with "
            "--controller_dir=<a trained controller>."
        )
    policy_fn = functools.partial(choices[name], **kwargs) if kwargs else choices[name]
    try:
        build_policy(policy_fn)  # fails now if the arguments are wrong or it builds no Policy
    except (TypeError, ValueError) as e:
        raise BadInput(f"--policy={name}: {e}") from e
    return policy_fn
