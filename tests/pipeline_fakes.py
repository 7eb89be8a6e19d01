"""Fakes for the runner tests: a clock, run records as a stage writes them, and a launcher
that records what it was asked and writes what a finished stage writes."""

import json
import os
import types

from rl755.common import run_record
from rl755.slurm import launcher


class Clock:
    """A stand-in for time.time: each launched stage takes a known number of seconds."""

    def __init__(self):
        self.now = 1_000_000.0

    def time(self):
        return self.now


def write_record(directory, flags, stage, seconds=90.5, commit="c0ffee", status="completed"):
    """A run record as a stage writes it, `seconds` long, made with `commit`."""
    record = run_record.RunRecord(directory, flags, stage)
    record.data.update(
        status=status,
        start_time="2026-01-01T00:00:00.000+00:00",
        end_time=f"2026-01-01T00:{int(seconds) // 60:02d}:{seconds % 60:06.3f}+00:00",
        git={"commit": commit, "dirty": False},
    )
    record.write()


class FakeLauncher:
    """launcher.launch and launcher.check_stage: records what was asked, in order."""

    def __init__(self, monkeypatch, clock=None, fail=None, bad_flags=None, records=False):
        self.events, self.clock, self.fail, self.bad_flags = [], clock, fail, bad_flags
        self.records = records
        monkeypatch.setattr(launcher, "launch", self.launch)
        monkeypatch.setattr(launcher, "check_stage", self.check_stage)

    def check_stage(self, script, flags, python=None):
        self.events.append(("check", os.path.basename(script), dict(flags)))
        if self.bad_flags and self.bad_flags in flags:
            raise ValueError(f"{script} rejects its flags")

    def launch(self, script, flags, local, job_name, python, check):
        assert local is True and check is False
        self.events.append(("launch", job_name))
        launched = sum(e[0] == "launch" for e in self.events)
        if self.clock:
            self.clock.now += 10.0 * launched
        if job_name == self.fail:
            return types.SimpleNamespace(returncode=3)
        if self.records:
            write_record(launcher.default_out_dir(flags), flags, job_name, seconds=10 * launched)
            if job_name.startswith("evaluate"):
                with open(os.path.join(flags["out_dir"], "evaluation.json"), "w") as f:
                    json.dump(
                        {
                            "returns": [1.0, 2.0, 6.0],
                            "seeds": [1000, 1001, 1002],
                            "random_policy": {"returns": [0.0, 1.0]},
                        },
                        f,
                    )
        return types.SimpleNamespace(returncode=0)

    def launched(self):
        return [e[1] for e in self.events if e[0] == "launch"]
