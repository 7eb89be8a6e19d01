"""A tiny environment written against the OLD gym API, for testing the adapter (no `gym` needed).

    env = OldApiDots()
    env.seed(3)
    obs = env.reset()                              # uint8 [16, 16, 3]
    obs, reward, done, info = env.step(2)          # 0 NOOP, 1 LEFT, 2 RIGHT

A dot moves left/right on a 16x16 frame; a target column is drawn too. Reward 1 when the dot
is on the target column, else 0. The episode ends (`done`) when the dot hits the target or
after `max_steps` steps (then `info["TimeLimit.truncated"]` is True, as old gym did). Its
spaces are old-style objects (`OldBox`, `OldDiscrete`: attributes only), or with
`plain_spaces=True` a shape tuple and an action count.
"""

from __future__ import annotations

import numpy as np


class OldBox:
    """What gym 0.21's Box looked like to a reader: low, high, shape, dtype."""

    def __init__(self, low, high, shape, dtype):
        self.low, self.high, self.shape, self.dtype = low, high, tuple(shape), np.dtype(dtype)


class OldDiscrete:
    """What gym 0.21's Discrete looked like: n."""

    def __init__(self, n: int):
        self.n = n


class OldApiDots:
    """See the module docstring."""

    metadata = {"render.modes": ["rgb_array"]}

    def __init__(self, size: int = 16, max_steps: int = 40, plain_spaces: bool = False):
        self.size = size
        self.max_steps = max_steps
        shape = (size, size, 3)
        self.observation_space = shape if plain_spaces else OldBox(0, 255, shape, np.uint8)
        self.action_space = 3 if plain_spaces else OldDiscrete(3)
        self._rng = np.random.RandomState(0)
        self._dot = self._target = self._t = 0

    def seed(self, seed=None):
        self._rng = np.random.RandomState(seed)
        return [seed]

    def reset(self):
        self._dot, self._target = self._rng.choice(self.size, 2, replace=False)
        self._t = 0
        return self._frame()

    def step(self, action):
        self._dot = int(np.clip(self._dot + (0, -1, 1)[int(action)], 0, self.size - 1))
        self._t += 1
        hit = self._dot == self._target
        info = {}
        if not hit and self._t >= self.max_steps:
            info["TimeLimit.truncated"] = True
        return self._frame(), float(hit), bool(hit or info), info

    def render(self, mode="rgb_array"):
        return self._frame()

    def close(self):
        pass

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        frame[:, self._target, 1] = 120
        frame[self.size // 2 - 1 : self.size // 2 + 1, self._dot, 0] = 255
        return frame
