"""The house's limits: no library, script, benchmark or test file over MAX_LINES lines, and an
experiments/ folder a clone can carry (EXPERIMENTS_CAP bytes)."""

from __future__ import annotations

import os

MAX_LINES = 400
EXPERIMENTS_CAP = 5 * 1024 * 1024


def _files(repo_root, folder):
    """{path from the root: bytes} of every file under `folder` (caches aside)."""
    out = {}
    for parent, dirs, names in os.walk(os.path.join(repo_root, folder)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            path = os.path.join(parent, name)
            out[os.path.relpath(path, repo_root)] = os.path.getsize(path)
    return out


CAPPED = ("rl755", "scripts", "benchmarks", "tests")


def test_no_library_script_or_benchmark_file_is_over_the_line_cap(repo_root):
    too_long = {}
    for top in CAPPED:
        for path in _files(repo_root, top):
            if path.endswith(".py"):
                with open(os.path.join(repo_root, path)) as f:
                    lines = sum(1 for _ in f)
                if lines > MAX_LINES:
                    too_long[path] = lines
    assert not too_long, (
        f"Files in {', '.join(CAPPED)} over {MAX_LINES} lines: {too_long}. Split each by job "
        "(one module per thing it does; data such as lists of cases in data files), and move "
        "long explanations to docs/architecture.md."
    )


def test_experiments_stay_under_their_cap(repo_root):
    sizes = _files(repo_root, "experiments")
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total <= EXPERIMENTS_CAP, (
        f"experiments/ holds {total / 2**20:.1f} MB, over its "
        f"{EXPERIMENTS_CAP / 2**20:.0f} MB cap; the largest: {largest}. Commit what a reader "
        "or a shipped row needs (run records, evaluations, curves, pictures, READMEs); "
        "ship a model the zoo loads with scripts/dev/ship_model.py (rl755/zoo/shipped/); leave "
        "optimizer states, CMA-ES pickles and other checkpoints out of the tree (git rm), and "
        "say in the experiment's README which commit holds them."
    )
