"""Catch, a tiny game with the OLD gym API from outside gymnasium: the suite's new environment.

It is what a new user brings: no `gym` or gymnasium import, spaces that are namedtuples
(`Discrete(n=3)` is a tuple of ints; `Box(low, high, shape, dtype)`), a 4-tuple `step`, and a
seed taken by the constructor (no `seed()` method). Its table entry (`CATCH` in
rl755/environments/table.py, docs/guides/new-environment.md) is all rl755 needs:

    env = Catch(seed=3)
    obs = env.reset()                               # uint8 [16, 16, 3]
    obs, reward, done, info = env.step(2)           # 0 LEFT, 1 STAY, 2 RIGHT

A ball falls one row a step from a random column; a 3-pixel paddle moves along the bottom row.
Reward +1 when the paddle catches the ball (then a new ball drops), -1 when it misses (the
episode ends, `done`). After `max_steps` steps the episode is cut (`done` with
`info["TimeLimit.truncated"]`, as old gym did). Everything is a function of the constructor's
seed and the actions.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

Discrete = namedtuple("Discrete", ["n"])
Box = namedtuple("Box", ["low", "high", "shape", "dtype"])
ACTIONS = ("LEFT", "STAY", "RIGHT")


class Catch:
    """See the module docstring. `size`: the frame side; `seed`: the ball columns' seed."""

    metadata = {"render.modes": ["rgb_array"]}

    def __init__(self, size: int = 16, max_steps: int = 60, seed: int = 0):
        self.size, self.max_steps = int(size), int(max_steps)
        self.observation_space = Box(0, 255, (self.size, self.size, 3), np.uint8)
        self.action_space = Discrete(len(ACTIONS))
        self._rng = np.random.RandomState(seed)
        self._ball = (0, 0)
        self._paddle = self._t = 0

    def reset(self):
        self._paddle = self.size // 2
        self._t = 0
        self._drop()
        return self._frame()

    def step(self, action):
        self._paddle = int(np.clip(self._paddle + int(action) - 1, 1, self.size - 2))
        row, col = self._ball
        self._ball = (row + 1, col)
        self._t += 1
        reward, done = 0.0, False
        if row + 1 == self.size - 1:  # the paddle's row
            if abs(col - self._paddle) <= 1:
                reward = 1.0
                self._drop()
            else:
                reward, done = -1.0, True
        info = {}
        if not done and self._t >= self.max_steps:
            done, info["TimeLimit.truncated"] = True, True
        return self._frame(), reward, done, info

    def render(self, mode="rgb_array"):
        return self._frame()

    def close(self):
        pass

    def _drop(self):
        self._ball = (0, int(self._rng.randint(self.size)))

    def _frame(self) -> np.ndarray:
        frame = np.zeros((self.size, self.size, 3), np.uint8)
        row, col = self._ball
        frame[row, col] = (255, 255, 255)
        frame[self.size - 1, self._paddle - 1 : self._paddle + 2, 1] = 200
        return frame


class AttributeSeededCatch(Catch):
    """Catch seeded through an attribute: `reset()` draws from `seed_value` when it was set
    since the last reset (for entries with `seed_attribute="seed_value"`)."""

    seed_value: int | None = None

    def reset(self):
        if self.seed_value is not None:
            self._rng = np.random.RandomState(self.seed_value)
            self.seed_value = None
        return super().reset()
