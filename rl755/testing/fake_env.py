"""A tiny, deterministic pixel environment registered as `rl755/FakePixels-v0`.

A bright 2-pixel-wide column sits at horizontal position `x` in [0, 1] on a 16x16 frame;
a dim row at the bottom shows the speed. Actions have CarRacing's layout
[steering in [-1, 1], gas in [0, 1], brake in [0, 1]]:

    x_{t+1} = clip(x_t + 0.25 * steering, 0, 1)
    reward_t = 1 - 2 * |x_{t+1} - 0.5| + 0.1 * (gas - brake)

so a good controller steers the column to the middle while pressing gas. Episodes last
24 steps (truncated) unless the column sits at an edge for 4 steps in a row
(terminated). Everything is a pure function of the seed and the actions, so a model can
learn the dynamics exactly. Frames come from `reset`/`step`; `render()` returns the same
frame (render_mode "rgb_array").
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

ENV_ID = "rl755/FakePixels-v0"
SIZE = 16
MAX_STEPS = 24


class FakePixelEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None, size: int = SIZE):
        self.size = size
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = gym.spaces.Box(
            np.array([-1.0, 0.0, 0.0], np.float32), np.array([1.0, 1.0, 1.0], np.float32)
        )
        self._x = 0.5
        self._speed = 0.0
        self._edge_steps = 0

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        col = int(round(self._x * (self.size - 2)))
        frame[: self.size - 2, col : col + 2, 0] = 255
        frame[: self.size - 2, col : col + 2, 1] = 128
        speed_px = int(round(self._speed * (self.size - 1)))
        frame[self.size - 1, : speed_px + 1, 2] = 200
        return frame

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._x = float(self.np_random.uniform(0.0, 1.0))
        self._speed = 0.0
        self._edge_steps = 0
        return self._frame(), {}

    def step(self, action):
        action = np.clip(
            np.asarray(action, np.float32), self.action_space.low, self.action_space.high
        )
        steer, gas, brake = (float(a) for a in action)
        self._x = float(np.clip(self._x + 0.25 * steer, 0.0, 1.0))
        self._speed = float(np.clip(0.5 * self._speed + 0.5 * (gas - brake), 0.0, 1.0))
        reward = 1.0 - 2.0 * abs(self._x - 0.5) + 0.1 * (gas - brake)
        at_edge = self._x <= 0.0 or self._x >= 1.0
        self._edge_steps = self._edge_steps + 1 if at_edge else 0
        terminated = self._edge_steps >= 4
        return self._frame(), float(reward), terminated, False, {}

    def render(self):
        return self._frame()


class UnseededPixelEnv(FakePixelEnv):
    """FakePixelEnv whose reset ignores its seed (a simulator that cannot replay an episode):
    the start x comes from fresh entropy. For the `reproducible_reset=False` tests."""

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=None)
        self._x = float(np.random.default_rng().uniform(0.0, 1.0))
        return self._frame(), {}


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=FakePixelEnv, max_episode_steps=MAX_STEPS)
