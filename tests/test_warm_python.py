"""rl755.testing.warm_python: a script forked from the suite's warm interpreter behaves as
the same script in a fresh one (output, exit, signals, environment), and what it cannot
serve runs cold."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rl755.testing import warm_python

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(REPO, "tests", "warm_python_probe.py")


@pytest.fixture
def server(_warm_python):
    if _warm_python is None:
        pytest.skip("RL755_TESTS_COLD=1: no warm interpreter in this session")
    return _warm_python


def _run(python, *args, env=None, cwd=None, **kwargs):
    proc = subprocess.run(
        [python, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or REPO,
        env=env or os.environ,
        **kwargs,
    )
    first = proc.stdout.splitlines()[0] if proc.stdout else "{}"
    return proc, json.loads(first)


@pytest.mark.parametrize("where", ["relative path", "another directory"])
def test_a_forked_script_sees_what_a_fresh_interpreter_gives_it(server, tmp_path, where):
    env = {**os.environ, "PROBE_VAR": "x y", "PYTHONPATH": str(tmp_path)}
    script, cwd = ("tests/warm_python_probe.py", REPO)
    if where == "another directory":
        script, cwd = PROBE, str(tmp_path)
    args = (script, "--flag=1", "--stdin", "--atexit", "--exit=3")
    warm, w = _run(server.shim, *args, env=env, cwd=cwd, input="piped in")
    cold, c = _run(server.real_python, *args, env=env, cwd=cwd, input="piped in")
    assert w.pop("preloaded") is True and c.pop("preloaded") is False
    for key in ("random", "np_random", "pid"):
        assert w.pop(key) != c.pop(key)
    assert w == c
    assert w["argv"] == list(args) and w["main"] == "__main__"
    assert w["cwd"] == cwd and w["probe_var"] == "x y" and w["stdin"] == "piped in"
    assert w["path0"] == os.path.join(REPO, "tests")
    assert warm.returncode == cold.returncode == 3
    assert warm.stdout.splitlines()[1:] == cold.stdout.splitlines()[1:] == ["atexit ran"]
    assert warm.stderr == cold.stderr == "to stderr\n"


def test_an_uncaught_exception_prints_its_traceback_and_exits_1(server):
    proc, _ = _run(server.shim, PROBE, "--raise")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    assert proc.stderr.rstrip().endswith("RuntimeError: the probe failed on purpose")


def test_forked_scripts_draw_fresh_random_numbers(server):
    draws = [_run(server.shim, PROBE)[1] for _ in range(2)]
    assert all(d["preloaded"] for d in draws)
    assert draws[0]["random"] != draws[1]["random"]
    assert draws[0]["np_random"] != draws[1]["np_random"]


def _gone(pid, timeout=10.0):
    """The process ended within `timeout` (a zombie not yet reaped by the server counts)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signal_to_the_caller_ends_the_script(server, signum):
    """SIGTERM and SIGINT are passed on and the caller ends as the script did (the probe's
    SIGTERM handler exits 7; KeyboardInterrupt ends a fresh interpreter by SIGINT); SIGKILL
    cannot be passed on, so the script ends when it sees the caller gone."""
    proc = subprocess.Popen(
        [server.shim, PROBE, "--sleep"], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    report = json.loads(proc.stdout.readline())
    assert report["preloaded"] and proc.stdout.readline() == "sleeping\n"
    proc.send_signal(signum)
    code = proc.wait(timeout=30)
    assert _gone(report["pid"])
    rest = proc.stdout.read()
    if signum == signal.SIGTERM:
        assert (code, rest) == (7, "caught SIGTERM\n")
    else:
        assert (code, rest) == (-signum, "")


@pytest.mark.parametrize(
    "how",
    ["python -c", "import-time variable", "script outside the repository", "SLURM job"],
)
def test_what_the_server_cannot_serve_runs_in_a_fresh_interpreter(server, tmp_path, how):
    env, args = dict(os.environ), [PROBE]
    if how == "python -c":
        code = "import sys, json; print(json.dumps({'preloaded': 'tensorflow' in sys.modules}))"
        args = ["-c", code]
    elif how == "import-time variable":
        env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    elif how == "script outside the repository":
        args = [str(tmp_path / "probe.py")]
        (tmp_path / "probe.py").write_text(open(PROBE).read())
    else:
        env["SLURM_JOB_ID"] = "1"
    proc, report = _run(server.shim, *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert report["preloaded"] is False


def test_without_a_server_the_shim_runs_the_real_interpreter(tmp_path, _warm_python):
    real = _warm_python.real_python if _warm_python else sys.executable
    server = warm_python.start(str(tmp_path / "warm"), python=real)
    server.stop()
    os.makedirs(os.path.dirname(server.socket_path), exist_ok=True)
    proc, report = _run(server.shim, PROBE, "--exit=4")
    assert proc.returncode == 4 and report["preloaded"] is False
    assert report["argv"] == [PROBE, "--exit=4"]
    # ... and the shim's directory is the interpreter's (tests put it on PATH).
    names = set(os.listdir(os.path.dirname(server.shim)))
    assert set(os.listdir(os.path.dirname(real))) - names == set()
