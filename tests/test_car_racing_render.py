"""rl755's CarRacing (rl755.environments.car_racing) plays CarRacing-v3 exactly, drawing less."""

import gymnasium as gym
import numpy as np

from rl755.environments import Environments, car_racing


def _play(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    frames, rewards, ends = [obs], [], []
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        frames.append(obs)
        rewards.append(reward)
        ends.append((terminated, truncated))
        if terminated or truncated:
            break
    return np.stack(frames), np.array(rewards), ends


def test_frames_rewards_and_ends_are_car_racing_v3s_pixel_for_pixel(monkeypatch):
    """Random driving spins the car off the road and across the grass, so the camera turns
    through many angles; the zoom-in of the first second is included."""
    rng = np.random.default_rng(0)
    actions = rng.uniform([-1, 0, 0], [1, 1, 0.3], size=(250, 3)).astype(np.float32)
    actions[:60, 1], actions[:60, 2] = 1.0, 0.0  # full gas first: reach the track's far parts
    drawn = {"fast": 0, "original": 0}
    parent = car_racing._gym_car_racing.CarRacing._draw_colored_polygon

    def counting(self, *args, **kwargs):
        drawn["fast" if isinstance(self, car_racing.CarRacing) else "original"] += 1
        return parent(self, *args, **kwargs)

    monkeypatch.setattr(car_racing._gym_car_racing.CarRacing, "_draw_colored_polygon", counting)
    fast_env = Environments.CAR_RACING.make()
    assert isinstance(fast_env.unwrapped, car_racing.CarRacing)
    original_env = gym.make(car_racing.ORIGINAL_ID)
    assert type(original_env.unwrapped) is car_racing._gym_car_racing.CarRacing
    for seed in (3, 11):
        fast = _play(fast_env, seed, actions)
        original = _play(original_env, seed, actions)
        assert fast[0].shape == original[0].shape and len(fast[0]) > 100
        for t, (a, b) in enumerate(zip(fast[0], original[0])):
            assert np.array_equal(a, b), f"seed {seed}: frame {t} differs"
        np.testing.assert_array_equal(fast[1], original[1])
        assert fast[2] == original[2]
    # It draws what CarRacing-v3 draws and hands gymnasium far fewer polygons to test.
    assert 0 < drawn["fast"] < drawn["original"] / 3, drawn
    assert gym.spec(car_racing.ID).max_episode_steps == gym.spec("CarRacing-v3").max_episode_steps
