"""rl755.zoo.entry.wrap_command: the commands the zoo's pages print, wrapped to a width."""

import numpy as np
import pytest

from rl755.zoo.entry import wrap_command


def _unwrap(text, indent):
    lines = text.split("\n")
    assert lines[0].startswith(indent) and all(x.startswith(indent + "    ") for x in lines[1:])
    return " ".join(x.rstrip("\\").strip() for x in lines)


@pytest.mark.parametrize("indent", ["", "  "])
def test_wrapped_commands_fill_each_line_up_to_the_width(indent):
    rng = np.random.default_rng(0)
    for _ in range(50):
        tokens = ["x" * int(n) for n in rng.integers(1, 14, rng.integers(1, 12))]
        command = " ".join(tokens)
        text = wrap_command(command, indent=indent, width=30)
        assert _unwrap(text, indent) == command
        lines = text.split("\n")
        for line, after in zip(lines, lines[1:]):
            assert line.endswith(" \\") and len(line) <= 30, text
            # broken only where the next flag would not have fitted
            assert len(line[:-2]) + 1 + len(after.split()[0]) + 2 > 30, text


def test_a_line_that_ends_exactly_at_the_width_is_kept_whole():
    # 15 + " " + 2 + " \\" = 20 characters: it fits a width of 20, not of 19
    assert wrap_command("abcdefghijklmno pq rs", width=20) == "abcdefghijklmno pq \\\n    rs"
    assert wrap_command("abcdefghijklmno pq rs", width=19) == ("abcdefghijklmno \\\n    pq rs")


def test_filled_text_never_breaks_a_flag_at_its_hyphens():
    from rl755.zoo.entry import _WIDTH, _fill

    flag = "--a-flag-with-many-hyphens-in-it=1"
    text = "word " * 16 + f"xx {flag} and more"  # the flag starts 8 columns before the width
    lines = _fill(text).splitlines()
    assert lines[1].split()[0] == flag
    assert all(len(line) <= _WIDTH for line in lines)
