"""SLURM's commands as small programs on PATH, for tests of the code that runs them.

    slurm = FakeSlurm(tmp_path / "bin", monkeypatch)     # sbatch, scancel, scontrol, ... on PATH
    slurm.answer("sbatch", stdout="4242;cluster\\n", match="--parsable")
    job = sbatch.submit(path)
    assert slurm.calls("sbatch") == [["sbatch", "--parsable", path]]

Each call is logged (its argv, one JSON line) and answered from the answers the test gave
for that command: the first whose `match` is a word of the call's argv (or that has no
`match`); with none, the command prints nothing and exits 0. The real tests against a
running SLURM are in the test files marked `slurm`.
"""

from __future__ import annotations

import json
import os
import stat
import sys

COMMANDS = ("sbatch", "scancel", "scontrol", "sacct", "sinfo", "squeue")

_PROGRAM = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
name = os.path.basename(sys.argv[0])
with open(os.path.join(here, "calls.jsonl"), "a") as f:
    f.write(json.dumps([name] + sys.argv[1:]) + "\\n")
try:
    with open(os.path.join(here, name + ".answers.json")) as f:
        answers = json.load(f)
except FileNotFoundError:
    answers = []
for a in answers:
    if a.get("match") is None or a["match"] in sys.argv[1:]:
        sys.stdout.write(a.get("stdout", ""))
        sys.stderr.write(a.get("stderr", ""))
        sys.exit(a.get("returncode", 0))
"""


class FakeSlurm:
    """Fake SLURM commands in `directory`, put first on PATH for the test."""

    def __init__(self, directory, monkeypatch):
        self.dir = str(directory)
        os.makedirs(self.dir, exist_ok=True)
        for name in COMMANDS:
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write(_PROGRAM.format(python=sys.executable))
            os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", self.dir + os.pathsep + os.environ.get("PATH", ""))

    def answer(self, command, stdout="", stderr="", returncode=0, match=None):
        """Adds an answer of `command` (after those given before)."""
        path = os.path.join(self.dir, command + ".answers.json")
        answers = []
        if os.path.exists(path):
            with open(path) as f:
                answers = json.load(f)
        answers.append(dict(stdout=stdout, stderr=stderr, returncode=returncode, match=match))
        with open(path, "w") as f:
            json.dump(answers, f)

    def calls(self, command=None):
        """The argv of every call so far (of `command` only, if given), in order."""
        try:
            with open(os.path.join(self.dir, "calls.jsonl")) as f:
                calls = [json.loads(line) for line in f]
        except FileNotFoundError:
            return []
        return [c for c in calls if command is None or c[0] == command]
