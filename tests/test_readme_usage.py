"""The README's "Usage" snippets run as written, so they cannot drift from the API.

Every ```python block of the section runs, in order, in one fresh Python process (a scratch
directory, this checkout's rl755). A block right after the marker
`<!-- readme-usage: imports only (...) -->` needs what a test cannot have (trained CarRacing
models, real rollouts): it is compiled and its imports are run, nothing else.
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

# Checks of what the snippets' comments promise, run after them.
CHECKS = """
assert tuple(frames.element_spec.shape) == (16, 16, 3), frames.element_spec
assert tuple(z.shape) == (8, 4) and tuple(extras["std_devs"].shape) == (8, 4)
assert picture.format == "png"
assert tuple(slices.element_spec["inputs"].shape) == (8, 4 + 3), slices.element_spec
print("README usage: ok")
"""


def usage_blocks() -> list[tuple[str, bool]]:
    """(code, imports_only) of each python block of README "## Usage", in order."""
    with open(os.path.join(REPO_ROOT, "README.md")) as f:
        readme = f.read()
    section = re.search(r"^## Usage\n(.*?)^## ", readme, re.S | re.M)
    assert section, "README has no '## Usage' section"
    blocks, code, previous = [], None, ""
    for line in section.group(1).splitlines():
        if code is None and line.strip() == "```python":
            code, imports_only = [], previous.startswith(IMPORTS_ONLY)
        elif code is not None and line.strip() == "```":
            blocks.append(("\n".join(code) + "\n", imports_only))
            code = None
        elif code is not None:
            code.append(line)
        previous = line
    return blocks


def _imports(code: str) -> str:
    tree = ast.parse(code)
    return "\n".join(
        ast.unparse(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)
    )


def test_usage_section_has_runnable_snippets():
    blocks = usage_blocks()
    assert sum(not only for _, only in blocks) >= 3, "the Usage snippets are not run any more"
    for code, _ in blocks:
        compile(code, "README.md", "exec")


@pytest.mark.slow
def test_readme_usage_snippets_run(tmp_path):
    parts = [_imports(code) if only else code for code, only in usage_blocks()]
    script = tmp_path / "readme_usage.py"
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
    assert "README usage: ok" in out.stdout
