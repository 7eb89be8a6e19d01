"""Importing rl755, or collecting the tests, leaves TensorFlow's runtime unstarted.

A tensor made at import time starts the runtime: logical devices (tests and `srun` shells
that split a CPU or GPU) can then no longer be configured, and a process forked after the
import (mutmut's fork server collects the tests, then forks one child per mutant) hangs at
its first TensorFlow op.
"""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHECK = """
import importlib, os, pkgutil, sys
sys.path[:0] = ["tests", "."]
import rl755
names = [m.name for m in pkgutil.walk_packages(rl755.__path__, "rl755.")]
names += sorted(f[:-3] for f in os.listdir("tests") if f.endswith(".py") and f != "conftest.py")
from tensorflow.python.eager import context
for name in names:
    importlib.import_module(name)
    if context.context()._context_handle is not None:
        sys.exit(f"importing {name} started TensorFlow's runtime")
print(len(names))
"""


def test_no_module_of_rl755_or_of_the_tests_starts_tensorflow_when_imported():
    proc = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=REPO, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) > 200  # every module was imported
