"""Shared fixtures. Tests use tmp_path only, a tiny fake environment and tiny models."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import pytest  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def environ(monkeypatch):
    """The pipeline's runners export the stages' environment into os.environ: undone after
    the test."""
    from rl755 import pipeline

    for key in pipeline.stage_environ("/x"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def registered():
    """register(spec) of rl755.environments for the test; unregistered afterwards."""
    from rl755.environments import Environments

    names = []

    def register(spec):
        names.append(spec.name)
        return Environments.register(spec)

    yield register
    for name in names:
        Environments.unregister(name)


@pytest.fixture(autouse=True)
def _isolated_user_config(tmp_path, monkeypatch):
    """Points rl755's data/models dirs and config file at the test's tmp_path."""
    monkeypatch.setenv("RL755_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RL755_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("RL755_CONFIG", str(tmp_path / "rl755_config.json"))
    yield


@pytest.fixture(autouse=True)
def _fresh_determinism():
    """Stages turn TF op determinism on for their process (rl755.common.determinism); in this
    one process each test starts from a fresh state again."""
    yield
    import sys

    if "rl755.common.determinism" in sys.modules:
        sys.modules["rl755.common.determinism"].reset()


# Under pytest-xdist (`make test` runs `-n 2 --dist loadgroup`) a group runs on one worker:
# the session's tiny pipeline run and every SLURM test share one (the run is built once, and
# the one-node cluster serves one test at a time), and each other test module gets one (its
# module fixtures are built once). pytest-xdist 3.8 applies the groups only with pytest < 9.2
# (requirements.txt pins 9.1.1; tests/test_ci.py checks where the tests actually run).
SHARED_GROUP = "tiny_run_and_slurm"


def xdist_group_of(item) -> str:
    if "tiny_local_run" in item.fixturenames or item.get_closest_marker("slurm"):
        return SHARED_GROUP
    return item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(xdist_group_of(item)))


@pytest.fixture(scope="session", autouse=True)
def _warm_python(tmp_path_factory):
    """Stage scripts the tests start with sys.executable run as forks of a process that has
    imported TensorFlow, Keras, TFP and Ray once (rl755.testing.warm_python): about 5 s less
    per script. RL755_TESTS_COLD=1 runs every script in a fresh interpreter instead."""
    import sys

    if os.environ.get("RL755_TESTS_COLD") == "1":
        yield None
        return
    from rl755.testing import warm_python

    real = sys.executable
    server = warm_python.start(str(tmp_path_factory.mktemp("warm_python")))
    warm_python.wait_until_ready(server)  # (else the first scripts run cold)
    sys.executable = server.shim
    try:
        yield server
    finally:
        sys.executable = real
        server.stop()


@pytest.fixture
def cold_python(monkeypatch, _warm_python):
    """For tests of what only a fresh interpreter shows (start-up output, str hash seeds):
    sys.executable is the real interpreter during the test."""
    if _warm_python is not None:
        monkeypatch.setattr("sys.executable", _warm_python.real_python)


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_local_run(tmp_path_factory):
    """The tiny preset run here once per session (scripts/pipeline.py); its out_dir.

    Shared by the local pipeline test, the SLURM one, which compares its outputs, and the
    determinism test, which runs the same command once more (TINY_RUN_FLAGS) and compares."""
    from pipeline_helpers import TINY_RUN_FLAGS, run_pipeline

    out = tmp_path_factory.mktemp("tiny_local") / "tiny"
    env = dict(os.environ, RL755_CONFIG=str(out.parent / "no_config.json"))
    proc = run_pipeline("tiny", out, *TINY_RUN_FLAGS, env=env)
    return out, proc.stdout


@pytest.fixture
def slurm_or_fail():
    """Used by `slurm_helpers.needs_slurm`: where SLURM tests are not skipped for want of
    SLURM (CI=true), a missing SLURM fails them with the reason."""
    from slurm_helpers import slurm_unavailable_reason

    reason = slurm_unavailable_reason()
    if reason:
        pytest.fail(f"SLURM is required here (CI=true) but unavailable: {reason}", pytrace=False)
