"""A script tests/test_warm_python.py runs forked from the warm interpreter and in a fresh
one: prints what it sees as JSON on stdout, then does what its arguments ask."""

import atexit
import json
import os
import random
import signal
import sys
import time

preloaded = "tensorflow" in sys.modules  # before this script imports anything heavy
import numpy as np  # noqa: E402

report = {
    "preloaded": preloaded,
    "argv": sys.argv,
    "cwd": os.getcwd(),
    "probe_var": os.environ.get("PROBE_VAR"),
    "path0": sys.path[0],
    "main": __name__,
    "random": random.random(),
    "np_random": float(np.random.rand()),
    "pid": os.getpid(),
}
args = sys.argv[1:]
if "--stdin" in args:
    report["stdin"] = sys.stdin.read()
print(json.dumps(report), flush=True)
print("to stderr", file=sys.stderr)
if "--atexit" in args:
    atexit.register(lambda: print("atexit ran", flush=True))
if "--sleep" in args:
    signal.signal(signal.SIGTERM, lambda *_: (print("caught SIGTERM", flush=True), sys.exit(7)))
    print("sleeping", flush=True)
    time.sleep(600)
if "--raise" in args:
    raise RuntimeError("the probe failed on purpose")
for a in args:
    if a.startswith("--exit="):
        sys.exit(int(a.split("=")[1]))
