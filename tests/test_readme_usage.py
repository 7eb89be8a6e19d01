"""The Python snippets of the docs run as written, so they cannot drift from the API.

Pages and what runs (`SNIPPET_PAGES`): every ```python block of docs/getting-started/python.md
runs, in order, in one fresh Python process (a scratch directory, this checkout's rl755); so
does each block after `<!-- docs-snippet: runs -->` on the other pages (a new policy). A block
right after `<!-- readme-usage: imports only (...) -->`, and the README's tour, need what a test
cannot have (trained CarRacing models, real rollouts): they are compiled and their imports run.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORTS_ONLY = "<!-- readme-usage: imports only"
RUNS = "<!-- docs-snippet: runs -->"
USAGE_PAGE = "docs/getting-started/python.md"
#: Pages whose marked blocks run after the usage page's, in this order.
SNIPPET_PAGES = ("docs/guides/new-policy.md",)

# Checks of what the snippets' comments promise, run after them.
CHECKS = """
assert tuple(frames.element_spec.shape) == (16, 16, 3), frames.element_spec
assert tuple(z.shape) == (8, 4) and tuple(extras["std_devs"].shape) == (8, 4)
assert picture.format == "png"
assert tuple(slices.element_spec["inputs"].shape) == (8, 4 + 3), slices.element_spec
assert result.rollouts == 2, result  # the new-policy page's collection
print("docs usage: ok")
"""


def python_blocks(page: str) -> list[tuple[str, str]]:
    """(code, the line before its fence) of each ```python block of a page, in order."""
    with open(os.path.join(REPO_ROOT, page)) as f:
        text = f.read()
    blocks, code, previous, before = [], None, "", ""
    for line in text.splitlines():
        if code is None and line.strip() == "```python":
            code, before = [], previous
        elif code is not None and line.strip() == "```":
            blocks.append(("\n".join(code) + "\n", before))
            code = None
        elif code is not None:
            code.append(line)
        if line.strip():
            previous = line
    return blocks


def usage_blocks() -> list[tuple[str, bool]]:
    """(code, imports_only) of the blocks the test runs, in order."""
    blocks = [(code, before.startswith(IMPORTS_ONLY)) for code, before in python_blocks(USAGE_PAGE)]
    for page in SNIPPET_PAGES:
        marked = [(code, False) for code, before in python_blocks(page) if before == RUNS]
        assert marked, f"{page} has no block marked {RUNS}"
        blocks += marked
    blocks += [(code, True) for code, _ in python_blocks("README.md")]
    return blocks


def _imports(code: str) -> str:
    tree = ast.parse(code)
    return "\n".join(
        ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
    )


def test_usage_pages_have_runnable_snippets():
    blocks = usage_blocks()
    assert sum(not only for _, only in blocks) >= 4, "the docs snippets are not run any more"
    assert python_blocks("README.md"), "README's tour is not checked"
    for code, _ in blocks:
        compile(code, "docs", "exec")


@pytest.mark.slow
def test_docs_usage_snippets_run(tmp_path):
    parts = [_imports(code) if only else code for code, only in usage_blocks()]
    script = tmp_path / "docs_usage.py"
    script.write_text("\n\n".join(parts + [CHECKS]))
    env = dict(os.environ, TMPDIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, env.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"{script}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    assert "docs usage: ok" in out.stdout


def test_readme_links_to_the_five_tasks_on_its_first_screen():
    """A new user finds these within the README's first 40 lines."""
    with open(os.path.join(REPO_ROOT, "README.md")) as f:
        first_screen = "".join(f.readlines()[:40])
    links = dict(re.findall(r"\[([^\]]+)\]\(([^)#]+)[^)]*\)", first_screen))
    for page in (
        "docs/getting-started/quickstart.md",
        "docs/results/index.md",
        "docs/guides/new-environment.md",
        "docs/guides/new-sequential-model.md",
        "docs/guides/slurm.md",
    ):
        assert page in links.values(), f"README's first screen has no link to {page}"


def test_readme_is_short():
    with open(os.path.join(REPO_ROOT, "README.md")) as f:
        assert len(f.readlines()) <= 250
