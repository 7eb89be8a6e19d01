"""DOOM_TAKE_COVER and BREAKOUT: real steps through stage 1 and the dataset readers, the
discrete-action conversions, and every environment resolving every model and dataset by name."""

import os
import pickle

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from rl755.data_gen.episodes import single_rollout
from rl755.environments import Environments
from rl755.environments.wrappers import FrameObservation, OneHotActions
from rl755.policies import resolve_policy

DISCRETE = [Environments.DOOM_TAKE_COVER, Environments.BREAKOUT]


def _folder_module(env, package, name):
    import importlib

    return importlib.import_module(f"{env.folder_module(package)}.{name}")


# ---- environments ----------------------------------------------------------------------------
@pytest.mark.parametrize("env_enum", DISCRETE, ids=lambda e: e.name)
def test_spec_is_what_the_environment_returns(env_enum):
    env = pickle.loads(pickle.dumps(env_enum.make_fn()))()  # as a Ray worker builds it
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == env_enum.observation_shape == (64, 64, 3)
        assert obs.dtype == np.uint8
        assert env.observation_space.shape == env_enum.observation_shape
        assert env.action_space.shape == env_enum.action_shape
        assert env_enum.is_discrete
        n = env_enum.num_discrete_actions
        assert env.unwrapped.action_space.n == n == len(env_enum.spec.action_meanings)
        a = env.action_space.sample()  # one-hot
        assert a.dtype == np.float32 and a.sum() == 1.0 and set(np.unique(a)) <= {0.0, 1.0}
        obs, reward, terminated, truncated, _ = env.step(a)
        assert obs.shape == env_enum.observation_shape and np.isfinite(reward)
        assert obs.std() > 0  # a real frame, not a blank one
    finally:
        env.close()


def test_one_hot_actions_play_the_same_game_as_indices():
    """The wrapper plays argmax(one-hot): same seed + same actions -> same frames."""
    env_enum = Environments.DOOM_TAKE_COVER
    indices = np.random.default_rng(0).integers(0, 3, 30)
    env = env_enum.make()
    try:
        env.reset(seed=7)
        by_vector = [env.step(env_enum.from_env_action(i))[0] for i in indices]
        env.reset(seed=7)
        by_index = [env.step(int(i))[0] for i in indices]
    finally:
        env.close()
    np.testing.assert_array_equal(np.stack(by_vector), np.stack(by_index))
    assert not all(np.array_equal(by_vector[0], f) for f in by_vector[1:])  # the view moved


def test_doom_episode_cap_is_world_models_2100_steps():
    env = Environments.DOOM_TAKE_COVER.make()
    try:
        assert env.spec.max_episode_steps == Environments.DOOM_TAKE_COVER.max_episode_steps == 2100
    finally:
        env.close()


# ---- discrete action conversions -------------------------------------------------------------
@pytest.mark.parametrize("env_enum", DISCRETE, ids=lambda e: e.name)
def test_discrete_action_round_trip(env_enum):
    n = env_enum.num_discrete_actions
    assert env_enum.action_shape == (n,) and env_enum.action_size == n
    for i in range(n):
        stored = env_enum.from_env_action(i)
        assert stored.dtype == np.float32 and stored.shape == (n,)
        np.testing.assert_array_equal(stored, np.eye(n)[i])
        assert env_enum.to_env_action(stored) == i
    with pytest.raises(ValueError, match="actions 0.."):
        env_enum.from_env_action(n)
    with pytest.raises(ValueError, match="shape"):
        env_enum.to_env_action(np.zeros(n + 1))
    # Controller outputs -> one-hot of the argmax, in numpy and in TF, batched.
    outputs = np.random.default_rng(1).uniform(0, 1, (5, 2, n)).astype(np.float32)
    stored = env_enum.to_stored_action(outputs)
    np.testing.assert_array_equal(stored, np.eye(n)[outputs.argmax(-1)])
    np.testing.assert_array_equal(env_enum.to_stored_action(tf.constant(outputs)).numpy(), stored)
    assert env_enum.to_env_action(outputs[0, 0]) == int(outputs[0, 0].argmax())


def test_continuous_environments_keep_their_actions():
    env_enum = Environments.CAR_RACING
    assert not env_enum.is_discrete and env_enum.num_discrete_actions is None
    a = np.array([0.3, 0.5, 0.1], np.float32)
    np.testing.assert_array_equal(env_enum.to_env_action(a), a)
    np.testing.assert_array_equal(env_enum.from_env_action(a), a)
    out = np.array([2.0, -1.0, 0.5], np.float32)
    np.testing.assert_allclose(env_enum.to_stored_action(out), [1.0, 0.0, 0.5])
    np.testing.assert_allclose(env_enum.to_stored_action(tf.constant(out)).numpy(), [1.0, 0.0, 0.5])


# ---- the wrappers make() puts around an environment ---------------------------------------------
class _Checkerboard(gym.Env):
    """16x16 frames of alternating black and white pixels; actions Discrete(3, start=1)."""

    observation_space = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
    action_space = gym.spaces.Discrete(3, start=1)

    def __init__(self):
        self.played = []
        board = (np.indices((16, 16)).sum(0) % 2 * 255).astype(np.uint8)
        self.frame = np.repeat(board[..., None], 3, axis=-1)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.frame, {}

    def step(self, action):
        self.played.append(action)
        return self.frame, 0.0, False, False, {}


def test_one_hot_actions_play_the_discrete_spaces_own_indices():
    """Discrete(3, start=1) plays 1, 2, 3: one-hot entry i is action start + i."""
    env = OneHotActions(_Checkerboard())
    assert env.action_space.shape == (3,)
    env.reset(seed=0)
    for i in range(3):
        env.step(np.eye(3, dtype=np.float32)[i])
    env.step(np.array([0.1, 0.2, 0.9], np.float32))
    env.step(2)  # an index passes through
    assert env.unwrapped.played == [1, 2, 3, 3, 2]


def test_frames_are_resized_with_an_antialiased_filter():
    """Halving a black/white checkerboard averages it to grey (nearest neighbour would keep
    black and white pixels)."""
    env = FrameObservation(_Checkerboard(), size=(8, 8))
    assert env.observation_space.shape == (8, 8, 3)
    frame, _ = env.reset(seed=0)
    assert frame.shape == (8, 8, 3) and frame.dtype == np.uint8
    assert 50 < frame.min() and frame.max() < 205, frame[..., 0]
    assert abs(frame.mean() - 127.5) < 8


def test_make_seed_seeds_the_action_space():
    def samples(seed):
        space = Environments.FAKE_PIXELS.make(seed=seed).action_space
        return np.stack([space.sample() for _ in range(5)])

    np.testing.assert_array_equal(samples(3), samples(3))
    assert not np.array_equal(samples(3), samples(4))


# ---- policies ----------------------------------------------------------------------------------
@pytest.mark.parametrize("env_enum", DISCRETE, ids=lambda e: e.name)
def test_random_policies_are_one_hot_and_seeded(env_enum):
    n = env_enum.num_discrete_actions
    env = env_enum.make()
    try:
        for cls in [resolve_policy(env_enum, k) for k in ("RandomPolicy", "RepeatRandomPolicy")]:
            runs = []
            for _ in range(2):
                p = cls()
                p.initialize(env, 200, seed=4)
                runs.append(np.stack([p.sample_action(None, t, None) for t in range(200)]))
            np.testing.assert_array_equal(runs[0], runs[1])
            acts = runs[0]
            assert acts.shape == (200, n) and np.all(acts.sum(-1) == 1.0)
            assert len(np.unique(acts.argmax(-1))) == n  # every action shows up
    finally:
        env.close()


def test_repeat_random_policy_holds_each_action_k_steps():
    RepeatRandomPolicy = resolve_policy("DOOM_TAKE_COVER", "RepeatRandomPolicy")

    env = Environments.DOOM_TAKE_COVER.make()
    try:
        p = RepeatRandomPolicy(min_repeat=5, max_repeat=5)
        p.initialize(env, 100, seed=0)
        idx = np.array([p.sample_action(None, t, None).argmax() for t in range(100)])
    finally:
        env.close()
    blocks = idx.reshape(20, 5)
    assert np.all(blocks == blocks[:, :1])  # constant within each block of 5
    with pytest.raises(ValueError, match="min_repeat"):
        RepeatRandomPolicy(min_repeat=3, max_repeat=2)


# ---- stage 1 and the dataset readers ----------------------------------------------------------
@pytest.mark.parametrize("env_enum", DISCRETE, ids=lambda e: e.name)
def test_real_rollouts_through_stage_1_and_raw_rollouts(env_enum):
    """collect_rollouts (stage 1, tfrecord) -> the environment's RawRollouts reader."""
    from rl755.data_gen.collect import collect_rollouts
    from rl755.data_gen.episodes import rollout_seed

    raw_rollouts = _folder_module(env_enum, "data", "raw_rollouts")
    out = collect_rollouts(
        env_enum.name,
        "RepeatRandomPolicy",
        num_rollouts=2,
        parallelism=1,
        max_steps=12,
        out_format="tfrecord",
        seed=0,
        validation_fraction=0.0,
        progress=False,
    )
    assert out["rollouts"] == 2 and out["frames"] == 24
    # Written where the default RawRollouts() reads (conftest points the data dir at tmp_path).
    builder = raw_rollouts.RawRollouts()
    assert os.path.dirname(builder.tfrecords_pattern()) == out["out_dir"]
    read = list(builder.rollouts_ds("train", shuffle_files=False).as_numpy_iterator())
    assert len(read) == 2
    n = env_enum.num_discrete_actions
    for r in read:
        assert r["observations"].shape == (12, 64, 64, 3) and r["observations"].dtype == np.uint8
        assert r["actions"].shape == (12, n) and r["actions"].dtype == np.float32
        assert np.all(r["actions"].sum(-1) == 1.0)  # one-hot
        assert r["rewards"].shape == (12,) and r["rewards"].dtype == np.float32
        assert r["done"].dtype == bool
    # Same seed, same policy -> the same game, replayed here in-process.
    from rl755.testing import replay

    if replay.unreproducible_reason(env_enum):
        pytest.skip(replay.unreproducible_reason(env_enum))
    want = single_rollout(
        env_enum.make_fn(),
        resolve_policy(env_enum, "RepeatRandomPolicy"),
        max_steps=12,
        seed=rollout_seed(0, 0),
    )
    got = [r for r in read if np.array_equal(r["actions"], np.stack(want.action_l))]
    assert got, "rollout 0 of the run is not in the shards"
    replay.assert_same_episode(
        env_enum,
        (got[0]["observations"], got[0]["rewards"].tolist()),
        (want.obs_l, np.float32(want.reward_l).tolist()),
        "stage 1's rollout 0 and its replay",
    )
    frames = list(builder.random_rollout_observations(obs_sampled_per_rollout=5, repeat=False))
    assert len(frames) == 10 and frames[0].shape == (64, 64, 3) and frames[0].dtype == tf.uint8


# ---- per-environment code only where something differs -------------------------------------------
# What may still live in an environment's folder: tuned policies and the seed's shims.
ALLOWED = {
    "models": {"__init__.py", "policies.py", "saved_models.py"},
    "data": {"__init__.py", "raw_rollouts.py", "encoded_rollouts.py"},
}


@pytest.mark.parametrize("env_enum", list(Environments), ids=lambda e: e.name)
def test_every_environment_resolves_every_catalogue_model_and_its_datasets(env_enum):
    """An environment is its table entry: models, datasets and trained models resolve by name."""
    from rl755 import zoo
    from rl755.data import registry
    from rl755.models import catalogue

    for name in catalogue.names():
        model = catalogue.build(env_enum, name)
        if catalogue.kind_of(name) == catalogue.INFILLING:  # a frame model: no Z
            assert model.frame_shape == env_enum.observation_shape, name
            continue
        assert model.representation_size == env_enum.presets.representation_size, name
        if catalogue.kind_of(name) == catalogue.SEQUENTIAL:
            assert model.action_size == env_enum.action_size, name
    raw = registry.raw_rollouts_class(env_enum)()
    assert raw.environment is env_enum
    assert f"/{env_enum.folder_name}/raw_rollouts/" in raw.tfrecords_pattern()
    datasets = registry.encoded_rollouts_classes(env_enum)
    for kind in (zoo.ENCODER, zoo.SEQUENTIAL):  # encoders' own datasets, sequential models' inputs
        for row in zoo.rows(env_enum, kind):
            assert row.dataset in datasets, row.name


@pytest.mark.parametrize("package", ["data", "models"])
def test_environment_folders_hold_no_copied_code(package):
    root = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rl755", package
    )
    folders = {e.folder_name for e in Environments}
    for d in sorted(os.listdir(root)):
        path = os.path.join(root, d)
        if not os.path.isdir(path) or d in ("common", "__pycache__"):
            continue
        assert d in folders, f"rl755/{package}/{d} belongs to no environment of the table"
        files = {f for f in os.listdir(path) if f.endswith(".py")}
        assert files <= ALLOWED[package], (
            f"rl755/{package}/{d} has {sorted(files - ALLOWED[package])}: per-environment sizes "
            "are presets in rl755/environments/table.py, models are in rl755/models/catalogue.py"
        )


# ---- controllers act with one-hot actions -----------------------------------------------------
def _recording(model):
    """Wraps model.step so every action it receives is recorded (eager only)."""
    seen = []
    step = model.step

    def recording_step(z, a, state):
        seen.append(np.asarray(a))
        return step(z, a, state)

    model.step = recording_step
    return seen


def test_agent_and_dream_feed_the_model_one_hot_actions():
    from rl755.controller.agent import AgentSpec, WorldModelAgent
    from rl755.controller.dream_eval import DreamEvaluator
    from rl755.controller.networks import make_controller
    from rl755.models.encoders.conv_vae import ConvVae
    from rl755.models.sequential.models import mdn_rnn

    env_enum = Environments.DOOM_TAKE_COVER
    assert AgentSpec("DOOM_TAKE_COVER", "LinearController").action_fn is not None
    assert AgentSpec("CAR_RACING", "LinearController").action_fn is None
    action_fn = AgentSpec("DOOM_TAKE_COVER", "LinearController").action_fn

    encoder = ConvVae(
        (64, 64, 3),
        4,
        encoder_filters=(4, 4, 4, 4),
        decoder_dense_size=8,
        decoder_filters=(4, 4, 4),
    )
    seq = mdn_rnn(4, 3, units=8, num_components=2, predict_reward=True, predict_done=True)
    controller = make_controller("LinearController", 4 + 8, environment=env_enum)
    params = np.random.default_rng(0).normal(0, 1, (2, controller.num_params)).astype(np.float32)

    seen = _recording(seq)
    agent = WorldModelAgent(controller, encoder, seq, use_tf_function=False, action_fn=action_fn)
    agent.reset(2)
    frames = np.random.default_rng(1).integers(0, 255, (2, 64, 64, 3), dtype=np.uint8)
    actions = agent.act(frames, params)
    assert actions.shape == (2, 3) and np.all(actions.sum(-1) == 1.0)
    np.testing.assert_array_equal(seen[-1], actions)

    dream = DreamEvaluator(seq, controller, np.zeros((1, 4), np.float32), 3, 1.15, action_fn)
    seen.clear()
    dream._rollout(tf.constant(params), tf.zeros([2, 4]), tf.constant([0, 1]))  # eager
    assert seen and all(np.all(a.sum(-1) == 1.0) and set(np.unique(a)) <= {0, 1} for a in seen)
