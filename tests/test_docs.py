"""The user docs (README.md, docs/) say what the code does: presets match the zoo rows they
train, every docs page the code points to exists, and no user page carries lab notes."""

import glob
import os
import re

import pytest

from rl755 import pipeline, zoo

#: Pages written by hand that are not user docs (dated entries belong there).
NOT_USER_DOCS = {"docs/changelog.md"}
# Measured figures carry their date and CPU, on the benchmarks page only.
DATED_PAGES = {"docs/benchmarks.md"}


def _user_pages(repo_root: str) -> list[str]:
    pages = ["README.md"] + sorted(
        os.path.relpath(p, repo_root)
        for p in glob.glob(f"{repo_root}/docs/**/*.md", recursive=True)
    )
    return [p for p in pages if p not in NOT_USER_DOCS]


def _prose(text: str) -> str:
    """The text outside fenced code blocks (example output may hold dates)."""
    return re.sub(r"(?ms)^\s*```.*?^\s*```", "", text)


def test_world_models_preset_trains_the_zoo_rows_it_names():
    """The preset's stages 2, 4 and 5 use exactly the flags of the zoo rows they produce."""
    preset = pipeline.PRESETS["world_models"]
    stages = {s.name: s for s in pipeline.build_stages(preset, "/tmp/unused")}
    for stage, name in (
        ("train_encoder", preset.encoder_name),
        ("train_sequential", preset.sequential_name),
        ("train_controller", preset.controller_name),
    ):
        row = zoo.get("CAR_RACING", name)
        flags = {k: str(v) for k, v in stages[stage].flags.items()}
        for flag, value in row.flag_values().items():
            if flag in ("parallelism", "encoder", "sequential_model", "rollouts_dataset"):
                continue  # resources, and the names the pipeline wires itself
            if value == "":  # a bare boolean flag
                assert flags.get(flag) in ("True", ""), (name, flag, flags.get(flag))
                continue
            assert flag in flags, f"{stage} of world_models has no --{flag} ({name}: {value})"
            assert (
                float(flags[flag]) == float(value) if _number(value) else flags[flag] == value
            ), f"world_models {stage} --{flag}={flags[flag]}, zoo row {name}: {value}"


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_docs_pages_named_in_the_code_exist(repo_root):
    """Flag help, errors and docstrings that point to a docs page point to one that exists."""
    named = set()
    for path in glob.glob(f"{repo_root}/rl755/**/*.py", recursive=True) + glob.glob(
        f"{repo_root}/scripts/**/*.py", recursive=True
    ):
        with open(path) as f:
            for page in re.findall(r"docs/[\w/-]+\.md", f.read()):
                named.add((page, os.path.relpath(path, repo_root)))
    assert named, "no docs page named in rl755/ or scripts/"
    missing = sorted((p, src) for p, src in named if not os.path.exists(f"{repo_root}/{p}"))
    assert not missing, f"pages named in the code that do not exist: {missing}"


def test_no_code_points_to_readme_sections(repo_root):
    """README.md is short now: the code points to docs pages, not to README sections."""
    stale = []
    for path in glob.glob(f"{repo_root}/rl755/**/*.py", recursive=True) + glob.glob(
        f"{repo_root}/scripts/**/*.py", recursive=True
    ):
        with open(path) as f:
            for number, line in enumerate(f, 1):
                if re.search(r"README[^.\w]|README$", line) and not re.search(
                    r"experiments/|original README", line
                ):
                    stale.append(f"{os.path.relpath(path, repo_root)}:{number}: {line.strip()}")
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize(
    "pattern,what",
    [
        (r"[Ii]ssue #?\d+|#\d{1,3}\b(?!-)", "an issue number"),
        (r"\b20\d\d-\d\d-\d\d\b", "a date (dated notes go in docs/changelog.md)"),
    ],
)
def test_user_pages_carry_no_lab_notes(repo_root, pattern, what):
    found = []
    for page in _user_pages(repo_root):
        if page in DATED_PAGES and "date" in what:
            continue
        with open(f"{repo_root}/{page}") as f:
            prose = _prose(f.read())
        for line in prose.splitlines():
            if re.search(pattern, line):
                found.append(f"{page}: {line.strip()[:120]}")
    assert not found, f"{what} in user docs:\n" + "\n".join(found)
