"""docs/benchmarks.md's table, made from the quick benchmarks' JSON (`benchmarks/quick.py`).

    python benchmarks/docs_table.py           # exits 1 if the page's table differs from the JSON
    python benchmarks/docs_table.py --write   # rewrites the table in the page

The table sits between the markers `<!-- quick-table:start -->` and `<!-- quick-table:end -->`;
everything else on the page is left as it is.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_JSON = os.path.join(HERE, "results", "quick.json")
DEFAULT_PAGE = os.path.join(REPO, "docs", "benchmarks.md")
START, END = "<!-- quick-table:start -->", "<!-- quick-table:end -->"


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:#.3g}" if abs(x) >= 1 else f"{x:.3f}"


def render(table: dict) -> str:
    """The Markdown block (markers included) for a quick.json table."""
    lines = [
        START,
        f"Measured {table['date']} on {table['cpu']} by `make bench` (load average "
        f"{table['load_average'][0]} before its last run, {table['load_average'][1]} after; "
        "the seconds of each benchmark's run are in the JSON).",
        "",
        "| result | metric | reference | ratio | target | command |",
        "|---|---|---|---|---|---|",
    ]
    for row in table["rows"]:
        cmd = f"`{row['command']}`"
        if "error" in row:
            lines.append(f"| {row['key']} | failed: {row['error']} | - | - | - | {cmd} |")
            continue
        metric = f"{_num(row['value'])} {row['metric']}"
        ref = (
            "-"
            if row.get("reference") is None
            else f"{_num(row['reference_value'])} {row['reference']}"
        )
        target = "-"
        if row.get("target") is not None:
            sign = ">=" if row["better"] == "higher" else "<="
            ok = (
                row["ratio"] >= row["target"]
                if row["better"] == "higher"
                else row["ratio"] <= row["target"]
            )
            target = f"{sign} {row['target']:g} ({'met' if ok else '**not met**'})"
        lines.append(
            f"| {row['key']} | {metric} | {ref} | {_num(row.get('ratio'))} | {target} | {cmd} |"
        )
    lines.append(END)
    return "\n".join(lines)


def page_with_table(page: str, block: str) -> str:
    """`page` with its marked block replaced by `block`."""
    if START not in page or END not in page:
        raise ValueError(f"the page has no {START} ... {END} block to replace.")
    head, rest = page.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + block + tail


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=DEFAULT_JSON)
    parser.add_argument("--page", default=DEFAULT_PAGE)
    parser.add_argument("--write", action="store_true", help="Rewrite the page's table.")
    args = parser.parse_args(argv)
    with open(args.json) as f:
        block = render(json.load(f))
    with open(args.page) as f:
        page = f.read()
    try:
        new = page_with_table(page, block)
    except ValueError as e:
        print(f"{args.page}: {e}")
        return 2
    if args.write:
        if new != page:
            tmp = args.page + ".tmp"
            with open(tmp, "w") as f:
                f.write(new)
            os.replace(tmp, args.page)
        print(f"{args.page}: table written from {args.json}")
        return 0
    if new != page:
        print(f"{args.page}'s table differs from {args.json}: run benchmarks/docs_table.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
