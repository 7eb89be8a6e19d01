"""Fault injection for tests of the evaluation pool: environments that crash or hang once.

    make_env = FaultyEnvFactory("FAKE_PIXELS", marker_path=tmp/"fault", mode="crash", after_steps=5)

The first environment (in any process) to reach `after_steps` steps creates `marker_path`
(atomically, O_EXCL) and then kills its own process with SIGKILL ("crash", as if the OOM
killer or a segfault took the worker), sleeps for an hour ("hang"), or does so every time
("crash_always", ignoring the marker). Every other environment behaves normally, so a run
that survives the fault must produce exactly the fault-free results.
"""

from __future__ import annotations

import os
import signal
import time

import gymnasium as gym

from rl755.environments import Environments

MODES = ("crash", "hang", "crash_always")


def _claim(marker_path: str) -> bool:
    try:
        fd = os.open(marker_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


class FaultyEnv(gym.Wrapper):
    def __init__(self, env, marker_path: str, mode: str, after_steps: int):
        super().__init__(env)
        self.marker_path, self.mode, self.after_steps = marker_path, mode, after_steps
        self._steps = 0

    def step(self, action):
        self._steps += 1
        if self._steps == self.after_steps and (
            self.mode == "crash_always" or _claim(self.marker_path)
        ):
            if self.mode == "hang":
                time.sleep(3600)
            os.kill(os.getpid(), signal.SIGKILL)
        return self.env.step(action)


class FaultyEnvFactory:
    """Picklable constructor of a `FaultyEnv` around `Environments[env_name]`."""

    def __init__(self, env_name: str, marker_path: str, mode: str = "crash", after_steps: int = 5):
        if mode not in MODES:
            raise ValueError(f"Unknown fault mode {mode!r}; valid: {', '.join(MODES)}.")
        self.env_name, self.marker_path = env_name, str(marker_path)
        self.mode, self.after_steps = mode, after_steps

    def __call__(self):
        return FaultyEnv(
            Environments[self.env_name].make(), self.marker_path, self.mode, self.after_steps
        )
