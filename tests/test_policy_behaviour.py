"""What the policies of rl755.policies do step by step: the held discrete actions, the Hastings
defaults, and --policy=controller's constructor (its checks, and what each rollout plays)."""

import types

import gymnasium as gym
import numpy as np
import pytest

from rl755.common.errors import BadInput
from rl755.controller.cma_train import CmaConfig, PoolConfig, train_controller
from rl755.data_gen import episodes
from rl755.environments import Environments
from rl755.policies.car_racing import HastingsRandomPolicy
from rl755.policies.generic import RepeatedDiscreteRandomPolicy, SmoothNoisePolicy
from rl755.policies.learned import WorldModelPolicy, controller_policy

FAKE = Environments.FAKE_PIXELS


def _one_hot_env(num_actions):
    return types.SimpleNamespace(action_space=gym.spaces.Box(0.0, 1.0, (num_actions,)))


def _held_actions(policy, steps, seed, num_actions=1000):
    policy.initialize(_one_hot_env(num_actions), max_steps=steps, seed=seed)
    actions = np.stack([policy.sample_action(None, t, None) for t in range(steps)])
    assert actions.shape == (steps, num_actions) and np.all(actions.sum(axis=1) == 1)
    return actions.argmax(axis=1)


def _run_lengths(indices):
    """Lengths of the runs of equal consecutive values (the last, maybe cut short, dropped)."""
    changes = np.flatnonzero(np.diff(indices)) + 1
    return np.diff(np.concatenate([[0], changes]))


def test_repeated_discrete_policy_holds_each_action_for_its_drawn_count():
    # 1000 actions: two consecutive draws of the same action (which would merge two runs)
    # do not happen on these seeds, so each run is one held action.
    lengths = _run_lengths(_held_actions(RepeatedDiscreteRandomPolicy(2, 4), 600, seed=1))
    assert set(lengths) == {2, 3, 4}, sorted(set(lengths))
    exact = _run_lengths(_held_actions(RepeatedDiscreteRandomPolicy(3, 3), 300, seed=2))
    assert set(exact) == {3}
    # The defaults hold 1..10 steps, every count of the range drawn in a long run.
    default = RepeatedDiscreteRandomPolicy()
    assert (default.min_repeat, default.max_repeat) == (1, 10)
    assert set(_run_lengths(_held_actions(default, 3000, seed=3))) == set(range(1, 11))
    # Seeded: the same seed replays the same actions, another seed does not.
    again = [_held_actions(RepeatedDiscreteRandomPolicy(), 200, seed=s) for s in (5, 5, 6)]
    np.testing.assert_array_equal(again[0], again[1])
    assert np.any(again[0] != again[2])
    # A second initialize starts afresh: no count left over from the last episode.
    policy = RepeatedDiscreteRandomPolicy(5, 5)
    _held_actions(policy, 3, seed=7)
    fresh = _held_actions(RepeatedDiscreteRandomPolicy(5, 5), 20, seed=7)
    np.testing.assert_array_equal(_held_actions(policy, 20, seed=7), fresh)


@pytest.mark.parametrize("low, high", [(0, 3), (4, 3), (-1, 1)])
def test_repeated_discrete_policy_refuses_an_empty_or_nonpositive_range(low, high):
    with pytest.raises(ValueError, match=f"min_repeat={low}, max_repeat={high}"):
        RepeatedDiscreteRandomPolicy(low, high)


def test_hastings_defaults_are_the_documented_noise():
    """Without road in sight (a black frame) the default Hastings policy is Perlin noise:
    steering amplitude 0.6 at period 40, gas 0.3 +- 0.2 at period 80, no brake."""
    env = types.SimpleNamespace(action_space=gym.spaces.Box(-1.0, 1.0, (3,)))
    black = np.zeros((96, 96, 3), np.uint8)

    def actions(policy):
        policy.initialize(env, max_steps=300, seed=4)
        return np.stack([policy.sample_action(black, t, None) for t in range(300)])

    expected = SmoothNoisePolicy(center=[0, 0.3, 0], scale=[0.6, 0.2, 0], period=[40, 80, 80])
    np.testing.assert_array_equal(actions(HastingsRandomPolicy()), actions(expected))
    assert HastingsRandomPolicy().track_pull == 1.5


@pytest.fixture(scope="module")
def controller_dir(tmp_path_factory):
    """A controller trained one tiny generation on FAKE_PIXELS."""
    path = str(tmp_path_factory.mktemp("policy") / "controller")
    cfg = CmaConfig(mode="real", population_size=4, trials_per_member=1, generations=1,
                    rollout_max_steps=12, sigma=0.5, seed=3, eval_every=0)  # fmt: skip
    train_controller(
        environment=FAKE.name, model_dir=path, cma_config=cfg, pool=PoolConfig(parallelism=0)
    )
    return path


def test_controller_policy_builds_the_saved_controller_with_its_exploration(controller_dir):
    saved = WorldModelPolicy.from_controller_dir(controller_dir)
    for prob in (0.0, 0.4, 1.0):  # both ends of [0, 1] are valid
        policy = controller_policy(FAKE, controller_dir, prob)()
        assert isinstance(policy, WorldModelPolicy)
        assert policy.random_action_prob == prob
        assert policy.spec.env == FAKE
        np.testing.assert_array_equal(policy.params, saved.params)
    assert controller_policy(FAKE, controller_dir)().random_action_prob == 0.0


def test_controller_policy_refuses_bad_flags_naming_them(controller_dir):
    with pytest.raises(BadInput, match="needs --controller_dir"):
        controller_policy(FAKE, None)
    with pytest.raises(BadInput, match="needs --controller_dir"):
        controller_policy(FAKE, "")
    for prob in (-0.01, 1.01):
        with pytest.raises(
            BadInput, match=rf"--random_action_prob must be in \[0, 1\], got {prob}"
        ):
            controller_policy(FAKE, controller_dir, prob)
    with pytest.raises(BadInput, match=r"controller for FAKE_PIXELS, not --environment=CAR_RACING"):
        controller_policy(Environments.CAR_RACING, controller_dir)
    with pytest.raises(BadInput, match="--controller_dir=.*nope"):
        controller_policy(FAKE, controller_dir + "-nope")


def test_always_exploring_controller_plays_the_seeded_action_space(controller_dir):
    """At random_action_prob=1 every action is the action space's own draw, seeded by the
    rollout's seed + 1; the controller's actions differ from them."""
    policy_fn = controller_policy(FAKE, controller_dir, 1.0)
    rollout = episodes.single_rollout(FAKE.make_fn(), policy_fn(), max_steps=10, seed=8)
    space = FAKE.make().action_space
    space.seed(9)
    expected = np.stack([space.sample() for _ in range(len(rollout.action_l))])
    np.testing.assert_allclose(np.stack(rollout.action_l), expected, atol=1e-6)
    assert {a.dtype for a in rollout.action_l} == {np.dtype(np.float32)}  # as any policy's
    own = episodes.single_rollout(FAKE.make_fn(), controller_policy(FAKE, controller_dir)(),
                                  max_steps=10, seed=8)  # fmt: skip
    assert np.any(np.abs(np.stack(own.action_l) - expected[: len(own.action_l)]) > 1e-3)


def test_perlin_octaves_add_up_each_at_half_the_period_and_amplitude():
    """Two octaves are the first octave plus half of one at half the period (same draws),
    scaled by the amplitudes' sum."""
    from rl755.policies.generic import perlin_noise_1d

    rng = np.random.default_rng(3)
    first = perlin_noise_1d(rng, 50, 8.0, octaves=1) / 2.0  # each alone is scaled by 2 / 1
    second = perlin_noise_1d(rng, 50, 4.0, octaves=1) / 2.0
    both = perlin_noise_1d(np.random.default_rng(3), 50, 8.0, octaves=2)
    np.testing.assert_allclose(both, 2.0 * (first + 0.5 * second) / 1.5, rtol=1e-5, atol=1e-6)
