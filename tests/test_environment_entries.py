"""Environment entries: the blocks of docs/guides/new-environment.md run literally; constructor
entries with the old gym API (adapter, seeding, time limit, lazy import); strict validation."""

import collections
import dataclasses
import os
import pickle
import re
import sys

import gymnasium as gym
import numpy as np
import pytest

from rl755.common.errors import BadInput
from rl755.data import registry
from rl755.environments import (
    Environments,
    EnvironmentSpec,
    ModelPresets,
    OldGymApi,
    OneHotBox,
)
from rl755.environments.wrappers import to_gymnasium_space
from rl755.models import catalogue
from rl755.testing.old_api_env import OldApiDots, OldBox

OLD_API = "rl755.testing.old_api_env:OldApiDots"


def _guide_entry_blocks(repo_root) -> list[str]:
    with open(os.path.join(repo_root, "docs/guides/new-environment.md")) as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return [b for b in blocks if b.startswith("EnvironmentSpec(")]


@pytest.fixture
def registered():
    """register(spec) for the test; unregistered afterwards."""
    names = []

    def register(spec):
        names.append(spec.name)
        return Environments.register(spec)

    yield register
    for name in names:
        Environments.unregister(name)


def _play(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    frames, rewards = [obs], []
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        frames.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return np.stack(frames), rewards, terminated, truncated
    return np.stack(frames), rewards, False, False


def test_old_gym_api_adapter_converts_spaces_steps_and_seeding():
    env = OldGymApi(OldApiDots(size=8, max_steps=3, plain_spaces=True))
    assert env.observation_space == gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    assert env.action_space == gym.spaces.Discrete(3)
    first, info = env.reset(seed=11)
    assert info == {} and first.shape == (8, 8, 3)
    again, _ = env.reset(seed=11)  # reset(seed=) seeds the old object through seed()
    np.testing.assert_array_equal(first, again)
    results = [env.step(0) for _ in range(3)]
    assert all(len(r) == 5 for r in results)
    obs, reward, terminated, truncated, info = results[-1]
    assert truncated and not terminated and "TimeLimit.truncated" not in info
    assert not any(r[2] or r[3] for r in results[:-1])
    # Old-style space objects (attributes only) and unreadable ones.
    old = OldApiDots(size=8)
    assert OldGymApi(old).observation_space == gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    box = to_gymnasium_space(OldBox(-1.0, [1.0, 2.0], (2,), np.float32), "action_space")
    np.testing.assert_array_equal(box.high, [1.0, 2.0])
    assert (box.low == -1.0).all() and box.dtype == np.float32
    with pytest.raises(TypeError, match="Cannot read action_space"):
        to_gymnasium_space(object(), "action_space")


def test_old_gym_api_adapter_passes_reset_options_through():
    class DotsWithOptions(OldApiDots):
        def reset(self, options=None):
            self.options = options
            return super().reset()

    dots = DotsWithOptions(size=8)
    env = OldGymApi(dots)
    env.reset(seed=1, options={"start": 3})
    assert dots.options == {"start": 3}
    env.reset(seed=1)  # no options: the old reset() is called without any
    assert dots.options is None


def test_make_keyword_arguments_override_the_entrys(registered):
    member = registered(
        EnvironmentSpec(
            name="SIZED_DOTS",
            constructor=OLD_API,
            observation_shape=(8, 8, 3),
            num_discrete_actions=3,
            make_kwargs=(("size", 8), ("max_steps", 5)),
        )
    )
    assert member.make().reset(seed=0)[0].shape == (8, 8, 3)
    env = member.make(max_steps=2)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(2)] == [False, True]  # the override's limit
    assert Environments.from_name(" sized_dots ") is member
    # An override that makes other frames than the entry declares fails, naming both.
    with pytest.raises(BadInput, match=r"declares observation_shape=\(8, 8, 3\), but .*12, 12"):
        member.make(size=12)


def test_a_constructor_is_imported_only_when_made(registered):
    sys.modules.pop("rl755.testing.old_api_env", None)
    spec = EnvironmentSpec(
        name="LAZY_DOTS", constructor=OLD_API, observation_shape=(16, 16, 3), num_discrete_actions=3
    )
    member = registered(spec)
    catalogue.build(member, "mdn_rnn.mdn_rnn")  # models and datasets do not import it either
    registry.raw_rollouts_class(member)
    assert "rl755.testing.old_api_env" not in sys.modules
    member.make().close()
    assert "rl755.testing.old_api_env" in sys.modules


def test_runtime_entries_pickle_into_a_process_that_does_not_know_them(registered):
    spec = EnvironmentSpec(
        name="SHIPPED_DOTS",
        constructor=OLD_API,
        observation_shape=(16, 16, 3),
        num_discrete_actions=3,
    )
    data = pickle.dumps(registered(spec).make_fn())
    Environments.unregister("SHIPPED_DOTS")  # as in a fresh Ray worker
    env = pickle.loads(data)()  # registers the pickled entry again
    assert Environments.from_name("SHIPPED_DOTS").spec == spec
    assert env.reset(seed=0)[0].shape == (16, 16, 3)


# ---- entries are checked --------------------------------------------------------------------------
def test_entries_derive_defaults_and_reject_mistakes(registered):
    spec = EnvironmentSpec(
        name="DOTS", constructor=OLD_API, observation_shape=[16, 16, 3], num_discrete_actions=3
    )
    assert spec.folder_name == "dots" and spec.action_shape == (3,)
    assert spec.action_low == (0.0,) * 3 and spec.action_high == (1.0,) * 3
    assert spec.observation_shape == (16, 16, 3) and spec.presets == ModelPresets()
    presets = spec.presets
    assert presets.transformer_size("small") == dict(presets.transformer_sizes)["small"]
    with pytest.raises(LookupError) as info:
        presets.transformer_size("huge")
    names = ", ".join(name for name, _ in presets.transformer_sizes)
    assert str(info.value) == f"Unknown transformer preset 'huge'; valid: {names}."
    box = EnvironmentSpec(
        name="BOX",
        open_ai_name="x",
        observation_shape=(4,),
        action_low=(-1, -1),
        action_high=(1, 1),
    )
    assert box.action_shape == (2,)
    with pytest.raises(ValueError, match="exactly one of open_ai_name"):
        EnvironmentSpec(name="BOTH", open_ai_name="x", constructor=OLD_API, observation_shape=(1,))
    with pytest.raises(ValueError, match="exactly one of open_ai_name"):
        EnvironmentSpec(name="NEITHER", observation_shape=(1,), num_discrete_actions=2)
    with pytest.raises(ValueError, match="upper-case"):
        EnvironmentSpec(name="dots", constructor=OLD_API, observation_shape=(1,))
    with pytest.raises(ValueError, match="num_discrete_actions, or action_low"):
        EnvironmentSpec(name="NO_ACTIONS", constructor=OLD_API, observation_shape=(1,))
    with pytest.raises(ValueError, match="already registered differently"):
        Environments.register(
            dataclasses.replace(Environments.CAR_RACING.spec, max_episode_steps=5)
        )
    with pytest.raises(ValueError, match="cannot be removed"):
        Environments.unregister("CAR_RACING")
    missing_module = registered(dataclasses.replace(spec, name="NO_MODULE", constructor="nope.x:Y"))
    with pytest.raises(LookupError, match="no module 'nope'"):
        missing_module.make()
    missing_class = registered(
        dataclasses.replace(spec, name="NO_CLASS", constructor="rl755.testing.old_api_env:Nope")
    )
    with pytest.raises(LookupError, match="OldApiDots"):
        missing_class.make()
    with pytest.raises(ValueError, match="Valid --environment values: CAR_RACING"):
        Environments.from_name("NOPE")


# ---- replaying an episode from its seed ----------------------------------------------------------
@pytest.mark.parametrize("env_enum", list(Environments), ids=lambda e: e.name)
def test_every_environment_replays_an_episode_from_its_seed(env_enum):
    """reset(seed) + the same actions -> the same frames and rewards, unless the entry
    declares otherwise (then this says so, as a skip with its reason)."""
    from rl755.testing import replay

    reason = replay.unreproducible_reason(env_enum)
    if reason:
        pytest.skip(reason)
    env = env_enum.make()
    env.action_space.seed(0)
    actions = [env.action_space.sample() for _ in range(15)]
    env.close()
    diff = replay.replay_difference(env_enum.make_fn(), seed=3, actions=actions)
    assert diff is None, (
        f"{env_enum.name}: reset(seed=3) and the same 15 actions gave two episodes: {diff}. "
        "Declare reproducible_reset=False in its EnvironmentSpec if it cannot replay one."
    )


def test_an_unreproducible_reset_is_said_in_words(registered):
    """The same entry with and without the declaration: a short sentence either way."""
    from rl755.testing import replay

    base = EnvironmentSpec(
        name="UNSEEDED",
        constructor="rl755.testing.fake_env:UnseededPixelEnv",
        observation_shape=(16, 16, 3),
        action_low=(-1.0, 0.0, 0.0),
        action_high=(1.0, 1.0, 1.0),
        max_episode_steps=24,
    )
    undeclared = registered(base)
    actions = [np.array([0.5, 1.0, 0.0], np.float32)] * 5
    got, want = (replay.play(undeclared.make_fn(), 7, actions) for _ in range(2))
    assert replay.unreproducible_reason(undeclared) is None
    with pytest.raises(AssertionError) as e:
        replay.assert_same_episode(undeclared, got, want, "two replays")
    msg = str(e.value)
    assert msg.startswith("UNSEEDED: two replays: the same seed and actions gave another episode")
    # Two fresh random starts can draw the same first frame (x is drawn on a 16-pixel frame),
    # so the first differing step is 0 or a later one (CI once saw step 1), and when they draw
    # the same x the frames agree and only the (random) rewards differ.
    assert re.search(r"(frames|rewards) differ from step \d+ on", msg), msg
    assert "reproducible_reset=False" in msg
    assert len(msg) < 400  # words, not arrays
    declared = registered(
        dataclasses.replace(base, name="UNSEEDED_DECLARED", reproducible_reset=False)
    )
    assert "UNSEEDED_DECLARED declares reproducible_reset=False" in replay.unreproducible_reason(
        declared
    )
    assert replay.replay_difference(Environments.FAKE_PIXELS.make_fn(), 7, actions) is None


def test_replay_keeps_each_frame_when_the_env_reuses_its_buffer():
    """An environment may hand back the same observation array every step (written in
    place); the replay check must still see each step's frame, not the last one T times."""
    from rl755.testing import replay

    class InPlace:
        def __init__(self):
            self.obs = np.zeros((2, 2, 3), np.uint8)

        def reset(self, seed=None):
            self.obs[:] = 0
            return self.obs, {}

        def step(self, action):
            self.obs += 1
            return self.obs, 1.0, False, False, {}

        def close(self):
            pass

    frames, rewards = replay.play(InPlace, seed=0, actions=[0, 0, 0])
    assert [int(f[0, 0, 0]) for f in frames] == [0, 1, 2, 3] and rewards == [1.0] * 3


# ---- duck-typed spaces, declared spaces, seeds ---------------------------------------------------
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
