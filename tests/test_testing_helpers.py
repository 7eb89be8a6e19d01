"""rl755.testing, the fakes other tests trust: the analytic encoder, the fault injector, the
old-API environment and the words episode_difference gives. A broken fake would let the tests
that use it pass for the wrong reason."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from rl755.environments import Environments
from rl755.testing import faulty_env, replay
from rl755.testing.fake_world_model import FakeLatentEncoder
from rl755.testing.old_api_env import OldApiDots

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_fake_encoder_called_gives_z_and_refuses_training():
    env = Environments.FAKE_PIXELS.make()
    frames = np.stack([env.reset(seed=s)[0] for s in range(3)])
    enc = FakeLatentEncoder()
    z, extra = enc.compute_full_representation(frames)
    np.testing.assert_array_equal(enc(frames).numpy(), z.numpy())
    assert z.shape == (3, 2) and np.all(extra["std_devs"].numpy() == 0)
    with pytest.raises(NotImplementedError, match="^FakeLatentEncoder is analytic"):
        enc.get_loss_fn()


# A child process steps a FaultyEnv (after_steps=3) 6 times, printing each step it finished.
CHILD = """
import sys
from rl755.testing.faulty_env import FaultyEnvFactory
env = FaultyEnvFactory("FAKE_PIXELS", sys.argv[1], after_steps=3)()
env.reset(seed=0)
for t in range(1, 7):
    env.step(env.action_space.sample())
    print(t, flush=True)
"""


def _child(control_dir):
    env = dict(os.environ, PYTHONPATH=REPO)
    return subprocess.run([sys.executable, "-c", CHILD, str(control_dir)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_faulty_env_kills_its_process_at_the_armed_step(tmp_path):
    ok = _child(tmp_path)
    assert ok.returncode == 0 and ok.stdout.split() == ["1", "2", "3", "4", "5", "6"]
    faulty_env.arm(tmp_path, "crash_always")
    for _ in range(2):  # every environment, until disarmed: SIGKILL on reaching step 3
        out = _child(tmp_path)
        assert out.returncode == -9 and out.stdout.split() == ["1", "2"], out
    faulty_env.disarm(tmp_path, "crash_always")
    faulty_env.disarm(tmp_path, "crash_always")  # disarming twice is fine
    faulty_env.arm(tmp_path, "crash")  # the first to claim it dies; the next plays on
    first, second = _child(tmp_path), _child(tmp_path)
    assert first.returncode == -9 and first.stdout.split() == ["1", "2"]
    assert second.returncode == 0 and len(second.stdout.split()) == 6
    assert len(faulty_env.claimed_pids(tmp_path, "crash")) == 1
    assert faulty_env.claimed_pids(tmp_path, "hang") == []
    with pytest.raises(ValueError, match="Unknown fault mode 'boom'; valid: crash, hang"):
        faulty_env.arm(tmp_path, "boom")


def _dot(frame):
    return int(np.flatnonzero(frame[frame.shape[0] // 2, :, 0] == 255)[0])


def test_old_api_dot_stops_at_both_edges():
    """The dot walks to the frame's edge away from the target and stays there."""
    for action, edge in ((1, 0), (2, 7)):
        for seed in range(20):
            env = OldApiDots(size=8, max_steps=40)
            env.seed(seed)
            frame = env.reset()
            target = int(np.flatnonzero(frame[0, :, 1] == 120)[0])
            if (target - _dot(frame)) * (edge - _dot(frame)) <= 0:  # target not on the way
                break
        for _ in range(10):
            frame, reward, done, _ = env.step(action)
            assert reward == 0.0 and not done
        assert _dot(frame) == edge


def test_episode_difference_says_where_episodes_part():
    a = [np.zeros((2, 2)), np.zeros((2, 2))]
    assert replay.episode_difference(a, a, [0.0, 1.0], [0.0, 1.0]) is None
    b = [np.zeros((2, 2)), np.array([[0.0, 1.0], [1.0, 1.0]])]
    assert replay.episode_difference(a, b) == (
        "frames differ from step 1 on (3 of 4 values at step 1)"
    )
    # Frames of another shape count every value as different (no broadcasting).
    assert replay.episode_difference(a, [np.zeros(4), np.zeros(4)]) == (
        "frames differ from step 0 on (4 of 4 values at step 0)"
    )
    assert replay.episode_difference(a, a[:1], [0.0, 1.0], [0.0, 2.0]) == (
        "lengths differ (2 vs 1 frames); rewards differ from step 1 on (1.0 vs 2.0)"
    )


def test_fake_encoder_reads_the_cars_place_and_speed_to_within_a_pixel():
    env = Environments.FAKE_PIXELS.make()
    frame, _ = env.reset(seed=1)
    inner = env.unwrapped
    frames, states = [frame], [(inner._x, inner._speed)]
    for t in range(12):  # full gas, then a brake: speeds from 0 to about 1 and back
        frame, *_ = env.step([0.1, 1.0, 0.0] if t < 10 else [0.0, 0.0, 1.0])
        frames.append(frame)
        states.append((inner._x, inner._speed))
    z = FakeLatentEncoder().compute_full_representation(np.stack(frames))[0].numpy()
    size = inner.size
    x, speed = np.array(states).T
    assert np.all(np.abs(z[:, 0] - x) <= 0.5 / (size - 2) + 1e-6)
    assert np.all(np.abs(z[:, 1] - speed) <= 0.5 / (size - 1) + 1e-6)
    assert speed.max() > 0.99  # the whole speed range was read


def test_the_fake_env_pays_for_staying_central_and_the_model_snaps_z_to_its_pixels():
    """The env's reward is 1 - 2 |x - 0.5| + 0.1 (gas - brake); the exact model's next z is
    its state read off the pixel grid, as the encoder reads a frame."""
    from rl755.testing.fake_world_model import FakeDynamicsModel

    env = Environments.FAKE_PIXELS.make()
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    for _ in range(8):
        action = np.array([rng.uniform(-1, 1), rng.uniform(0, 1), rng.uniform(0, 0.3)], np.float32)
        _, reward, *_ = env.step(action)
        x = env.unwrapped._x
        assert reward == pytest.approx(1.0 - 2.0 * abs(x - 0.5) + 0.1 * (action[1] - action[2]))
    model = FakeDynamicsModel()
    size = model.size
    nxt = model.sample_next(tf.constant([[0.31, 0.5, 0.2, 0.0]]))
    expected = [round(0.31 * (size - 2)) / (size - 2), round(0.5 * (size - 1)) / (size - 1)]
    np.testing.assert_allclose(nxt["z"].numpy()[0], expected, rtol=1e-6)
    assert (float(nxt["reward"][0]), float(nxt["done_prob"][0])) == pytest.approx((0.2, 0.0))
