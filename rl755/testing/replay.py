"""Replaying an episode from its seed, and saying in words where two episodes part.

    diff = replay_difference(Environments.CAR_RACING.make_fn(), seed=3, actions=actions)
    # None, or e.g. "frames differ from step 4 on (1,234 of 27,648 values at step 4); rewards
    # differ from step 5 on (0.1 vs 0.2)"
    assert_same_episode(env_enum, got, want, "collected vs replayed")  # AssertionError in words

An environment whose EnvironmentSpec says `reproducible_reset=False` cannot be checked this
way: `unreproducible_reason(env)` says so (tests skip with it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def unreproducible_reason(environment) -> str | None:
    """Why `environment` (Environments member or name) cannot replay episodes, or None."""
    from rl755.environments import Environments

    env = Environments.from_name(environment)
    if env.spec.reproducible_reset:
        return None
    return (
        f"{env.name} declares reproducible_reset=False in its EnvironmentSpec: its "
        "reset(seed) does not replay an episode, so bit-exact replays are not checked."
    )


def episode_difference(
    frames_a: Sequence, frames_b: Sequence, rewards_a=None, rewards_b=None
) -> str | None:
    """None if the episodes are identical, else where their frames / rewards / lengths part."""
    out = []
    if len(frames_a) != len(frames_b):
        out.append(f"lengths differ ({len(frames_a)} vs {len(frames_b)} frames)")
    for t, (a, b) in enumerate(zip(frames_a, frames_b)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or not np.array_equal(a, b):
            n = int(np.sum(a != b)) if a.shape == b.shape else a.size
            out.append(f"frames differ from step {t} on ({n:,} of {a.size:,} values at step {t})")
            break
    if rewards_a is not None and rewards_b is not None:
        for t, (a, b) in enumerate(zip(rewards_a, rewards_b)):
            if a != b:
                out.append(f"rewards differ from step {t} on ({a!r} vs {b!r})")
                break
    return "; ".join(out) or None


def play(make_env: Callable, seed: int, actions) -> tuple[list, list]:
    """(frames [T + 1], rewards [T]) of `actions` from reset(seed=seed); stops at episode end."""
    env = make_env()
    try:
        obs, _ = env.reset(seed=int(seed))
        frames, rewards = [np.array(obs)], []  # (copies: an env may reuse its buffer)
        for a in actions:
            obs, reward, terminated, truncated, _ = env.step(a)
            frames.append(np.array(obs))
            rewards.append(float(reward))
            if terminated or truncated:
                break
    finally:
        env.close()
    return frames, rewards


def replay_difference(make_env: Callable, seed: int, actions) -> str | None:
    """Plays `actions` twice from reset(seed=seed): None if identical, else the difference."""
    a, b = play(make_env, seed, actions), play(make_env, seed, actions)
    return episode_difference(a[0], b[0], a[1], b[1])


def assert_same_episode(environment, got, want, what: str) -> None:
    """AssertionError in words when episodes `got` and `want` ((frames, rewards) each) differ;
    for an environment that declares an unreproducible reset, the words say that."""
    diff = episode_difference(got[0], want[0], got[1], want[1])
    if diff is None:
        return
    from rl755.environments import Environments

    env = Environments.from_name(environment)
    raise AssertionError(
        f"{env.name}: {what}: the same seed and actions gave another episode: {diff}. If "
        "this environment's reset(seed) cannot replay an episode, declare "
        "reproducible_reset=False in its EnvironmentSpec."
    )
