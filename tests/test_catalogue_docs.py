"""The model docs are the registrations': the generated table in each docs page, the
catalogue's docstring, the `--model` help, and the guide's copy of the worked example."""

import os
import subprocess
import sys

import pytest

from rl755.models import catalogue, model_table, registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE = os.path.join(REPO, "docs", "guides", "new-sequential-model.md")
EXAMPLE = "examples/gru_world_model.py"


@pytest.mark.parametrize("page", model_table.PAGES)
def test_each_pages_model_table_is_the_registrations(page):
    assert model_table.page_table(os.path.join(REPO, page)) == model_table.table(), (
        f"{page}'s model table differs from the registrations: run "
        "python scripts/dev/model_table.py --write"
    )


def test_the_table_has_a_row_per_registration_and_the_script_rewrites_a_stale_page(tmp_path):
    table = model_table.table()
    for entry in catalogue.SEQUENTIAL_MODELS:
        assert f"| `{entry.name}` | `{entry.builder_name}` |" in table
    assert "units=`presets.rnn_units`" in table and "| yes |" in table
    page = tmp_path / "page.md"
    stale = model_table.table(catalogue.SEQUENTIAL_MODELS[:1])
    page.write_text(f"# Models\n\n{stale}\n\nafter\n")
    assert model_table.update_page(str(page)) is True
    assert page.read_text() == f"# Models\n\n{table}\n\nafter\n"
    assert model_table.update_page(str(page)) is False
    (tmp_path / "none.md").write_text("no markers")
    with pytest.raises(ValueError, match="none.md has no model table markers"):
        model_table.page_table(str(tmp_path / "none.md"))


def test_the_catalogue_docstring_and_model_help_list_every_registration():
    # (rl755's own: a test in this process may have registered the example GRU since import)
    extra = {e.name for e in registry.registered() if not e.builder_name.startswith("rl755.")}
    for name in set(catalogue.names()) - extra:
        assert f"    {name} " in catalogue.__doc__, name
        assert name in catalogue.help_text()
    for entry in registry.registered():
        if entry.name not in extra:
            assert entry.description in catalogue.__doc__
    help_out = subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts/models/train_sequential_model.py"), "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": REPO},
    ).stdout
    assert "--model: a sequential model of rl755.models.catalogue" in help_out
    flat = " ".join(help_out.split())
    assert all(name in flat for name in set(catalogue.names(catalogue.SEQUENTIAL)) - extra)


def test_the_guide_shows_the_example_file_as_it_is():
    with open(GUIDE) as f:
        guide = f.read()
    begin = f"<!-- example: {EXAMPLE} -->\n```python\n"
    end = "```\n<!-- end of example -->"
    shown = guide[guide.index(begin) + len(begin) : guide.index(end)]
    with open(os.path.join(REPO, EXAMPLE)) as f:
        assert shown == f.read()
    registration = shown[shown.index("\nregister(") :].strip().splitlines()
    assert len(registration) <= 5  # the worked example registers in at most 5 lines


def _fake_commands(script: str) -> list[tuple[str, str]]:
    """(page, command) for every FAKE_PIXELS command of `script` in the docs' code blocks
    (backslash continuations joined)."""
    import glob
    import re

    out = []
    for page in sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)):
        with open(page) as f:
            text = f.read()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S):
            for command in block.replace("\\\n", " ").splitlines():
                if script in command and "--environment=FAKE_PIXELS" in command:
                    out.append((os.path.relpath(page, REPO), " ".join(command.split())))
    return out


def test_the_docs_fake_commands_read_the_dataset_their_encode_commands_write():
    import re

    from rl755.data import registry as data_registry
    from rl755.data_gen.encode_shards import resolve_out_dir

    written = set()
    for _page, command in _fake_commands("encode_raw_rollouts"):
        flags = dict(re.findall(r"--(\w+)=(\S+)", command))
        out_dir = resolve_out_dir("FAKE_PIXELS", flags["model"], flags.get("model_dir"), None)
        subdirs = {
            cls.SUBDIR: name
            for name, cls in data_registry.encoded_rollouts_classes("FAKE_PIXELS").items()
        }
        written.add(subdirs[os.path.basename(out_dir)])
    assert written == {"RawRolloutVae4ld"}
    read = {
        (page, re.search(r"--rollouts_dataset=(\S+)", command).group(1))
        for script in ("train_sequential_model", "evaluate_world_model")
        for page, command in _fake_commands(script)
        if "--rollouts_dataset=" in command
    }
    assert len(read) >= 4 and {name for _, name in read} == written, sorted(read)
