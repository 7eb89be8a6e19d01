"""CI that cannot pass by skipping: .ci/run fails without SLURM when CI=true, SLURM tests fail
instead of skipping there, and every skip is listed with its reason at the end of the output."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.dirname(os.path.abspath(__file__))


def _executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _ci_copy(tmp_path, slurm_starts: bool):
    """.ci/run in a scratch tree whose start_slurm.sh succeeds or fails and whose `make`
    only records its arguments."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(os.path.join(REPO, ".ci", "run"), tmp_path / ".ci" / "run")
    _executable(tmp_path / ".ci" / "start_slurm.sh", f"exit {0 if slurm_starts else 1}\n")
    _executable(tmp_path / ".ci" / "stop_slurm.sh", "exit 0\n")
    (tmp_path / "bin").mkdir()
    _executable(tmp_path / "bin" / "make", f'echo "$@" >> {tmp_path}/make_calls\n')
    _executable(tmp_path / "bin" / "chromium", "exit 0\n")  # (so nothing is installed)
    return tmp_path


def _run_ci(tree, **env):
    # (without the caller's CI and PYTEST_ARGS: .ci/run passes PYTEST_ARGS on to make)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ARGS")}
    environ.update(env, PATH=f"{tree}/bin:{os.environ['PATH']}")
    proc = subprocess.run(
        ["bash", str(tree / ".ci" / "run")], capture_output=True, text=True, env=environ
    )
    calls = (tree / "make_calls").read_text().splitlines() if (tree / "make_calls").exists() else []
    return proc, calls


# What .ci/run asks of make, in order: install, lint, the docs built and opened in a browser,
# the README's test command, the benchmark guard.
STEPS = ["venv", "lint", "docs", "docs-check", "test PYTEST_ARGS=", "bench BENCH_ARGS=--check"]


def test_ci_fails_when_slurm_does_not_start(tmp_path):
    proc, calls = _run_ci(_ci_copy(tmp_path, slurm_starts=False), CI="true")
    assert proc.returncode == 1 and calls == []
    assert "in CI (CI=true) the tests marked 'slurm' must run" in proc.stderr


def test_outside_ci_a_missing_slurm_only_skips(tmp_path):
    proc, calls = _run_ci(_ci_copy(tmp_path, slurm_starts=False))
    assert proc.returncode == 0, proc.stderr
    assert "will be skipped (listed at the end)" in proc.stderr
    assert calls == STEPS


def test_ci_runs_everything_when_slurm_starts(tmp_path):
    proc, calls = _run_ci(_ci_copy(tmp_path, slurm_starts=True), CI="true")
    assert proc.returncode == 0, proc.stderr
    assert calls == STEPS


def _pytest_on(tmp_path, code, *args, **env):
    """Runs pytest with the project's configuration (and `args`) on test files, without
    SLURM: `code` is test_probe.py's text, or {file name: text}."""
    files = code if isinstance(code, dict) else {"test_probe.py": code}
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    shutil.copy(os.path.join(TESTS, "conftest.py"), tmp_path / "conftest.py")
    # (not the outer run's CI or xdist worker name)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    # No sbatch on PATH: only the Python that runs pytest.
    environ.update(
        env, PATH=os.path.dirname(sys.executable), PYTHONPATH=os.pathsep.join([TESTS, REPO])
    )
    environ.setdefault("RL755_TESTS_COLD", "1")  # (probes start no scripts: no warm server)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", os.path.join(REPO, "pyproject.toml"),
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", *args, str(tmp_path)],
        capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300,
    )  # fmt: skip


PROBE = """
    import pytest
    from slurm_helpers import needs_slurm

    @pytest.mark.skip(reason="a reason that must show")
    def test_skipped():
        pass

    pytestmark = []

    @needs_slurm[0]
    @needs_slurm[1]
    @needs_slurm[2]
    def test_needs_slurm():
        pass
"""


def test_skips_are_listed_with_their_reasons_at_the_end(tmp_path):
    proc = _pytest_on(tmp_path, PROBE)
    assert proc.returncode == 0, proc.stdout
    summary = proc.stdout[proc.stdout.index("short test summary info") :]
    assert "SKIPPED [1] test_probe.py" in summary and "a reason that must show" in summary
    assert "sbatch is not on PATH" in summary  # the SLURM test skipped, saying why


def test_in_ci_a_slurm_test_without_slurm_fails(tmp_path):
    proc = _pytest_on(tmp_path, PROBE, CI="true")
    assert proc.returncode == 1, proc.stdout
    assert "SLURM is required here (CI=true) but unavailable: sbatch is not on PATH" in proc.stdout
    assert "1 error" in proc.stdout or "1 failed" in proc.stdout


def test_tests_that_must_share_a_worker_are_grouped_together(request):
    """Under `make test` (pytest-xdist, --dist loadgroup) the session's tiny pipeline run is
    built once and the one-node SLURM serves one test at a time only if every test using
    `tiny_local_run` and every `slurm` test carry the same xdist group; other tests are
    grouped by module."""
    from conftest import SHARED_GROUP

    def group(item):
        marker = item.get_closest_marker("xdist_group")
        assert marker is not None, f"{item.nodeid} has no xdist_group"
        return marker.args[0] if marker.args else marker.kwargs["name"]

    shared = [
        item
        for item in request.session.items
        if "tiny_local_run" in item.fixturenames or item.get_closest_marker("slurm")
    ]
    for item in request.session.items:
        if item in shared:
            assert group(item) == SHARED_GROUP, item.nodeid
        else:
            assert group(item) == item.nodeid.split("::")[0], item.nodeid
    assert group(request.node) == "tests/test_ci.py"


GROUPED_PROBE = """
    import os
    import pytest

    @pytest.fixture
    def tiny_local_run():  # stands in for the session's tiny run: only its name counts
        return None

    def _record(name):
        with open(os.path.join({out!r}, name), "w") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "none"))

    def test_shared_{k}(tiny_local_run):
        _record("shared_{k}")

    @pytest.mark.parametrize("i", range(3))
    def test_other_{k}(i):
        _record(f"module_{k}_{i}")
"""


def test_grouped_tests_run_on_one_worker_under_xdist(tmp_path):
    """What the grouping is for, run as `make test` runs it (-n 2 --dist loadgroup): every
    test using `tiny_local_run` on one worker, each module's tests on one worker. (pytest 9.2
    renamed the node id that pytest-xdist 3.8 tags with the group, so every test became its
    own group and the tiny run was built on both workers; requirements.txt pins a pytest
    that works, and this fails with one that does not.)"""
    out = tmp_path / "workers"
    out.mkdir()
    files = {
        f"test_probe{k}.py": GROUPED_PROBE.replace("{k}", str(k)).replace("{out!r}", repr(str(out)))
        for k in range(4)
    }
    proc = _pytest_on(tmp_path, files, "-n", "2", "--dist", "loadgroup")
    assert proc.returncode == 0, proc.stdout[-3000:]
    worker = {p.name: p.read_text() for p in out.iterdir()}
    assert len(worker) == 16 and set(worker.values()) <= {"gw0", "gw1"}, worker
    assert len({worker[f"shared_{k}"] for k in range(4)}) == 1, worker
    for k in range(4):
        assert len({worker[f"module_{k}_{i}"] for i in range(3)}) == 1, worker


def test_ci_fails_when_the_benchmark_guard_fails(tmp_path):
    """The guard runs after the tests, and its failure (a ratio below half its target) fails
    the run."""
    tree = _ci_copy(tmp_path, slurm_starts=True)
    _executable(
        tree / "bin" / "make",
        f'echo "$@" >> {tmp_path}/make_calls\ncase "$1" in bench) exit 1;; esac\n',
    )
    proc, calls = _run_ci(tree, CI="true")
    assert proc.returncode != 0
    assert calls == STEPS
