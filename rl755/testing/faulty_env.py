"""Fault injection for tests of the evaluation pool: environments that crash or hang on demand.

    make_env = FaultyEnvFactory("FAKE_PIXELS", control_dir, after_steps=5)
    arm(control_dir, "crash")     # the next env (any process) reaching step 5 kills its process

Every environment checks `control_dir` when its episode reaches `after_steps` steps:
- "crash": the first to claim the armed file (an atomic rename, so exactly one wins)
  kills its own process with SIGKILL, as if the OOM killer or a segfault took the worker;
- "hang": the first to claim it sleeps for an hour;
- "crash_always": every environment reaching that step kills its process (until `disarm`).
Claimed files are renamed to `<mode>.claimed-<pid>` (`claimed_pids` reads them). All other
environments behave normally, so a run that survives the fault must give the fault-free results.
"""

from __future__ import annotations

import os
import signal
import time

import gymnasium as gym

from rl755.environments import Environments

MODES = ("crash", "hang", "crash_always")


def arm(control_dir, mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"Unknown fault mode {mode!r}; valid: {', '.join(MODES)}.")
    os.makedirs(control_dir, exist_ok=True)
    open(os.path.join(control_dir, mode), "w").close()


def disarm(control_dir, mode: str) -> None:
    try:
        os.remove(os.path.join(control_dir, mode))
    except FileNotFoundError:
        pass


def claimed_pids(control_dir, mode: str) -> list[int]:
    prefix = f"{mode}.claimed-"
    return [int(n[len(prefix) :]) for n in os.listdir(control_dir) if n.startswith(prefix)]


def _claim(control_dir: str, mode: str) -> bool:
    try:
        os.rename(
            os.path.join(control_dir, mode),
            os.path.join(control_dir, f"{mode}.claimed-{os.getpid()}"),
        )
    except FileNotFoundError:
        return False
    return True


class FaultyEnv(gym.Wrapper):
    def __init__(self, env, control_dir: str, after_steps: int):
        super().__init__(env)
        self.control_dir, self.after_steps = control_dir, after_steps
        self._steps = 0

    def reset(self, **kwargs):
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        self._steps += 1
        if self._steps == self.after_steps:
            if os.path.exists(os.path.join(self.control_dir, "crash_always")):
                os.kill(os.getpid(), signal.SIGKILL)
            if _claim(self.control_dir, "hang"):
                time.sleep(3600)
            if _claim(self.control_dir, "crash"):
                os.kill(os.getpid(), signal.SIGKILL)
        return self.env.step(action)


class FaultyEnvFactory:
    """Picklable constructor of a `FaultyEnv` around `Environments[env_name]`."""

    def __init__(self, env_name: str, control_dir, after_steps: int = 5):
        self.env_name, self.control_dir = env_name, str(control_dir)
        self.after_steps = after_steps

    def __call__(self):
        return FaultyEnv(Environments[self.env_name].make(), self.control_dir, self.after_steps)
