"""Environment entries' spaces and seeds: duck-typed and declared spaces, namedtuple spaces,
how an entry's object is seeded, old resets and frame sizes."""

import collections

import gymnasium as gym
import numpy as np
import pytest

from rl755.common.errors import BadInput
from rl755.environments import (
    Environments,
    EnvironmentSpec,
    OldGymApi,
    OneHotBox,
)
from rl755.environments.wrappers import to_gymnasium_space
from rl755.testing.old_api_env import OldApiDots

Discrete = collections.namedtuple("Discrete", ["n"])
Box = collections.namedtuple("Box", ["low", "high", "shape", "dtype"])
CATCH = "rl755.testing.old_gym_catch:Catch"


def test_namedtuple_objects_and_ints_read_as_the_spaces_they_describe():
    """A namedtuple Discrete(n=17) is also a tuple of ints: it must read as Discrete(17)."""
    assert to_gymnasium_space(Discrete(17), "action_space") == gym.spaces.Discrete(17)
    assert to_gymnasium_space(17, "action_space") == gym.spaces.Discrete(17)
    assert to_gymnasium_space(OldDiscreteStart(), "action_space") == gym.spaces.Discrete(4, start=1)
    frames = to_gymnasium_space(Box(0, 255, (64, 64, 3), np.uint8), "observation_space")
    assert frames == gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    box = to_gymnasium_space(Box(-1.0, 1.0, (2,), None), "action_space")  # no dtype: float32
    assert box == gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    # Plain shapes: uint8 frames for observations, unbounded float32 for actions.
    assert to_gymnasium_space((8, 8, 3), "observation_space") == gym.spaces.Box(
        0, 255, (8, 8, 3), np.uint8
    )
    assert to_gymnasium_space([2], "action_space") == gym.spaces.Box(
        -np.inf, np.inf, (2,), np.float32
    )


class OldDiscreteStart:
    n, start = 4, 1


def test_catch_is_one_entry_with_namedtuple_spaces_and_a_constructor_seed():
    """The suite's new environment: old gym API, namedtuple spaces, the seed a constructor
    argument (no seed() method), in the table by its constructor string alone."""
    from rl755.testing import old_gym_catch, replay

    catch = Environments.CATCH
    spec = catch.spec
    assert (spec.constructor, spec.seed_argument) == (CATCH, "seed") and spec.open_ai_name is None
    raw = old_gym_catch.Catch()
    assert isinstance(raw.action_space, tuple) and not hasattr(raw, "seed")
    env = catch.make()
    assert isinstance(env.action_space, OneHotBox) and env.action_space.shape == (3,)
    assert env.observation_space == gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
    env.close()
    moves = [catch.from_env_action(i) for i in np.random.default_rng(0).integers(0, 3, 40)]
    a, b = replay.play(catch.make_fn(), 5, moves), replay.play(catch.make_fn(), 5, moves)
    assert replay.episode_difference(a[0], b[0], a[1], b[1]) is None
    # Each seed is its own episode: the ball's first column is the constructor seed's draw.
    columns = [
        int(np.flatnonzero(catch.make().reset(seed=s)[0][0, :, 0] == 255)[0]) for s in range(8)
    ]
    assert columns == [int(np.random.RandomState(s).randint(16)) for s in range(8)]
    assert len(set(columns)) > 4


def _entry(name, **fields):
    base = dict(
        name=name,
        constructor=CATCH,
        seed_argument="seed",
        observation_shape=(16, 16, 3),
        num_discrete_actions=3,
        max_episode_steps=60,
    )
    return EnvironmentSpec(**{**base, **fields})


def test_declared_spaces_are_checked_when_made_naming_both(registered):
    cases = {
        "MORE_ACTIONS": (
            dict(num_discrete_actions=17),
            r"MORE_ACTIONS declares num_discrete_actions=17, but .*Catch reports action_space "
            r"Discrete\(3\)",
        ),
        "BOX_ACTIONS": (
            dict(num_discrete_actions=None, action_low=(-1.0,), action_high=(1.0,)),
            r"BOX_ACTIONS declares continuous actions of shape \(1,\), but .* Discrete\(3\)",
        ),
        "BIGGER_FRAMES": (
            dict(observation_shape=(64, 64, 3)),
            r"BIGGER_FRAMES declares observation_shape=\(64, 64, 3\), but .*\(16, 16, 3\)",
        ),
    }
    for name, (fields, message) in cases.items():
        member = registered(_entry(name, **fields))
        with pytest.raises(BadInput, match=message):
            member.make()


def test_an_entry_says_how_its_object_is_seeded(registered):
    from rl755.testing import replay

    moves = [np.eye(3, dtype=np.float32)[i] for i in np.random.default_rng(1).integers(0, 3, 30)]
    # By attribute: reset(seed=s) sets it before the object's reset().
    by_attribute = registered(
        _entry(
            "BY_ATTRIBUTE",
            constructor="rl755.testing.old_gym_catch:AttributeSeededCatch",
            seed_argument=None,
            seed_attribute="seed_value",
        )
    )
    a, b, c = (replay.play(by_attribute.make_fn(), s, moves) for s in (1, 1, 2))
    assert replay.episode_difference(a[0], b[0], a[1], b[1]) is None
    assert replay.episode_difference(a[0], c[0]) is not None
    # Nothing could seed it and nothing is declared: construction fails saying what to declare.
    silent = registered(_entry("SILENT", seed_argument=None))
    with pytest.raises(BadInput) as e:
        silent.make()
    msg = str(e.value)
    assert msg.startswith("SILENT: rl755.testing.old_gym_catch:Catch has no seed() method")
    assert 'seed_argument="seed"' in msg and "reproducible_reset=False" in msg
    # Declared not reproducible: it is made, and the replay tests skip it saying why.
    declared = registered(_entry("DECLARED", seed_argument=None, reproducible_reset=False))
    assert declared.make().reset(seed=0)[0].shape == (16, 16, 3)
    assert "DECLARED declares reproducible_reset=False" in replay.unreproducible_reason(declared)
    # A seed argument the constructor does not take fails when made.
    wrong = registered(_entry("WRONG_ARGUMENT", seed_argument="random_state"))
    with pytest.raises(BadInput, match="takes no argument 'random_state'"):
        wrong.make()
    # The declared argument is what seeds it: two seeds, two episodes; one seed, one episode.
    member = Environments.CATCH
    a, b = (replay.play(member.make_fn(), s, moves) for s in (1, 2))
    assert replay.episode_difference(a[0], b[0]) is not None
    with pytest.raises(ValueError, match="at most one of seed_argument and seed_attribute"):
        _entry("BOTH", seed_attribute="x")
    with pytest.raises(ValueError, match="are for constructor entries"):
        EnvironmentSpec(
            name="GYM_SEED",
            open_ai_name="CartPole-v1",
            observation_shape=(4,),
            num_discrete_actions=2,
            seed_argument="seed",
        )


def test_an_entry_written_with_lists_holds_tuples_and_compares_as_one():
    """Shapes and squashes given as lists (as from a JSON config) are stored as tuples, so
    that entries compare equal and hash: the same entry, however written."""
    box = dict(open_ai_name="X-v0", action_low=(0.0, 0.0), action_high=(1.0, 1.0))
    listed = EnvironmentSpec("TWO_D", observation_shape=[16, 16, 3], action_shape=[2],
                             controller_squash=["scaled", "clipped"], **box)  # fmt: skip
    as_tuples = EnvironmentSpec("TWO_D", observation_shape=(16, 16, 3), action_shape=(2,),
                                controller_squash=("scaled", "clipped"), **box)  # fmt: skip
    assert listed.action_shape == (2,) and listed.observation_shape == (16, 16, 3)
    assert listed.controller_squash == ("scaled", "clipped")
    assert listed == as_tuples and hash(listed) == hash(as_tuples)


def test_an_old_env_whose_reset_gives_obs_and_info_is_passed_through():
    """Some old-API environments already return (obs, info) from reset: kept as they are,
    not wrapped a second time."""
    dots = OldApiDots(size=8, max_steps=3)
    plain_reset = dots.reset
    dots.reset = lambda: (plain_reset(), {"lives": 3})
    obs, info = OldGymApi(dots).reset(seed=1)
    assert obs.shape == (8, 8, 3) and info == {"lives": 3}
    obs, info = OldGymApi(OldApiDots(size=8, max_steps=3)).reset(seed=1)
    assert obs.shape == (8, 8, 3) and info == {}


def test_frames_of_the_right_size_pass_as_uint8_and_others_are_resized():
    from rl755.environments.wrappers import FrameObservation

    env = OldGymApi(OldApiDots(size=8, max_steps=3))
    same = FrameObservation(env)
    assert same.observation_space == gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    frame = np.full((8, 8, 3), 7, np.int64)
    out = same.observation(frame)
    assert out.dtype == np.uint8 and np.all(out == 7)
    assert FrameObservation(env, size=(8, 8)).observation(frame).dtype == np.uint8
    small = FrameObservation(env, size=(4, 4))
    assert small.observation_space == gym.spaces.Box(0, 255, (4, 4, 3), np.uint8)
    assert small.observation(frame).shape == (4, 4, 3)
