"""The docs pages render as they read in the editor. The site's renderer (Python-Markdown)
nests a list only when it is indented by 4 spaces, and reads a list right after a paragraph
line as more of that paragraph; either mistake shows on the site as run-on text."""

import functools
import glob
import os
import re

import markdown
import pytest
import yaml

FENCE = re.compile(r"^\s*(```|~~~)")


def pages(repo_root):
    return sorted(glob.glob(os.path.join(repo_root, "docs", "**", "*.md"), recursive=True))


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def short_nesting(text):
    """Line numbers of list items indented by 1-3 spaces (nested too little to nest)."""
    return [n for n, line in prose_lines(text) if re.match(r"^ {1,3}([-*+]|\d+\.) ", line)]


def swallowed_lists(html):
    """Paragraphs of the rendered page that hold a list item's marker at a line's start."""
    return [
        p[:80]
        for p in re.findall(r"<p>(.*?)</p>", html, re.S)
        if re.search(r"\n\s*(- |\* |\d+\. )", p)
    ]


@functools.cache
def extensions(repo_root):
    """(names, configs) of mkdocs.yml's markdown_extensions."""
    with open(os.path.join(repo_root, "mkdocs.yml")) as f:
        config = yaml.safe_load(f)
    names, configs = [], {}
    for entry in config["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        names.append(name)
        configs[name] = options or {}
    return names, configs


def render(text, repo_root):
    names, configs = extensions(repo_root)
    return markdown.markdown(text, extensions=names, extension_configs=configs)


def test_the_checks_find_both_mistakes(repo_root):
    text = "Text:\n\n- an item\n  - nested by two\n\nA paragraph\n- folded into it\n"
    assert short_nesting(text) == [4]
    assert swallowed_lists(render(text, repo_root)) == ["A paragraph\n- folded into it"]
    good = "Text:\n\n- an item\n    - nested by four\n\nA paragraph\n\n- a list\n"
    assert short_nesting(good) == [] and swallowed_lists(render(good, repo_root)) == []


@pytest.mark.parametrize("check", ["nesting", "paragraphs"])
def test_every_docs_page_renders_its_lists(repo_root, check):
    problems = []
    for path in pages(repo_root):
        with open(path) as f:
            text = f.read()
        rel = os.path.relpath(path, repo_root)
        if check == "nesting":
            problems += [
                f"{rel}:{n}: indent a nested list by 4 spaces" for n in short_nesting(text)
            ]
        else:
            problems += [
                f"{rel}: a list folded into the paragraph {p!r}: put a blank line before it"
                for p in swallowed_lists(render(text, repo_root))
            ]
    assert not problems, "\n".join(problems)
