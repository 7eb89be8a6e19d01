"""The notebooks in notebooks/ run top to bottom (nbclient, a fresh kernel from this venv).

Any cell error fails the test with the cell and its traceback. The quickstart always runs (fake
environment, tiny models, ~1 min); the world-model tour runs on the CarRacing models shipped in
the repository, as on a fresh clone (`rl755.pipeline.find_world_model`'s last resort). Committed
notebooks carry no outputs (the nbstripout pre-commit hook strips them).
"""

from __future__ import annotations

import os
import re
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(REPO_ROOT, "notebooks")
ANSI_COLOR = r"\x1b\[[0-9;]*m"
# The user's environment as it was before conftest pointed RL755_* at tmp_path: the tour looks
# for the user's trained models.
USER_ENV = dict(os.environ)


def run_notebook(name: str, env: dict, timeout: int = 600):
    """Executes notebooks/<name> in its folder; returns the executed notebook."""
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    env = dict(env)
    # The kernel imports this checkout's rl755 (also from a git worktree of another checkout).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": NOTEBOOKS}},
    )
    try:
        client.execute(env=env)
    except nbclient.exceptions.CellExecutionError as e:  # the cell and its traceback, uncoloured
        pytest.fail(f"{name}: {re.sub(ANSI_COLOR, '', str(e))}", pytrace=False)
    return nb


def _errors(nb) -> list[str]:
    return [
        f"{o.get('ename')}: {o.get('evalue')}"
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def _kinds(nb) -> set[str]:
    return {
        key
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        for key in o.get("data", {})
    }


@pytest.mark.parametrize("name", ["quickstart.ipynb", "world_model_tour.ipynb"])
def test_notebooks_are_committed_without_outputs(name):
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, cell.source[:80]


@pytest.mark.slow
def test_quickstart_runs_top_to_bottom(tmp_path):
    env = dict(os.environ, RL755_QUICKSTART_DIR=str(tmp_path / "quickstart"))
    nb = run_notebook("quickstart.ipynb", env)
    assert not _errors(nb)
    kinds = _kinds(nb)
    assert "image/png" in kinds and "text/html" in kinds  # frames, reconstructions; animations
    made = {p.name for p in (tmp_path / "quickstart" / "models" / "fake").iterdir()}
    assert {"raw_rollout_vae_4ld", "mdn_rnn_vae_4ld", "linear_controller_vae_mdn_rnn"} <= made


def test_a_failing_cell_fails_the_run(tmp_path):
    """What the quickstart test relies on: a cell that raises stops the run with its error."""
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_code_cell("raise ValueError('broken on purpose')"),
            nbformat.v4.new_code_cell("y = 2"),
        ]
    )
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, str(path))
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3")
    with pytest.raises(nbclient.exceptions.CellExecutionError, match="broken on purpose"):
        client.execute()
    assert nb.cells[2].execution_count is None  # nothing after the broken cell ran


@pytest.mark.slow
def test_world_model_tour_runs_top_to_bottom_on_the_shipped_models(tmp_path):
    """As on a fresh clone: no registry, no demo run, so the tour opens the models shipped in
    the repository (rl755.pipeline.find_world_model's last resort)."""
    env = {k: v for k, v in USER_ENV.items() if k != "RL755_SHIPPED_DIR"}
    env.update(
        RL755_DATA_DIR=str(tmp_path / "data"),
        RL755_MODELS_DIR=str(tmp_path / "models"),
        RL755_CONFIG=str(tmp_path / "no_config.json"),
        RL755_TOUR_RUN_DIR=str(tmp_path / "no_run"),
        RL755_TOUR_TMP=str(tmp_path),
        RL755_TOUR_EPISODE_STEPS="300",
    )
    nb = run_notebook("world_model_tour.ipynb", env, timeout=900)
    assert not _errors(nb)
    text = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "models shipped in the repository" in text and "real_controller" in text, text[:500]
    assert {"image/png", "text/html"} <= _kinds(nb)  # pictures; the dream and episode animations
    assert (tmp_path / "evaluation" / "episode.gif").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
