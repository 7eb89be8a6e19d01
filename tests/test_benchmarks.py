"""The benchmark guard: benchmarks/quick.py's verdicts, its coverage of benchmarks/, and
docs/benchmarks.md's table made from benchmarks/results/quick.json."""

import json
import os
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

import bench_result  # noqa: E402
import docs_table  # noqa: E402
import quick  # noqa: E402


def _row(key, ratio, target, better="higher"):
    return {
        "key": key, "metric": "m", "value": 1.0, "reference": "r", "reference_value": 1.0,
        "ratio": ratio, "target": target, "better": better, "command": f"python {key}",
        "seconds": 1.0,
    }  # fmt: skip


def test_the_guard_fails_only_past_half_the_target():
    rows = [
        _row("a", 0.45, 0.9),  # exactly half: not past it
        _row("b", 0.449, 0.9),
        _row("c", 2.5, 1.25, "lower"),  # exactly twice
        _row("d", 2.51, 1.25, "lower"),
        _row("e", 0.1, None),  # no target: reported only
        _row("f", 0.8, 0.9),  # missed the target, inside the bounds
        {"key": "g", "error": "exit 1: boom", "command": "python g", "seconds": 1.0},
    ]
    assert quick.regressions(rows) == [
        "b: ratio 0.449 is below half its target 0.9",
        "d: ratio 2.51 is above twice its target 1.25",
        "g: failed (exit 1: boom)",
    ]
    assert [quick.met(r) for r in rows] == [False, False, False, False, None, False, None]


def test_a_target_missed_on_record_is_held_to_half_the_recorded_ratio():
    """A ratio on record that misses its target loosens the bound to half (twice) it; one that
    meets it changes nothing; keys not on record keep the target's bound."""
    record = {"a": 6.0, "b": 6.0, "c": 20.0, "d": 3.0, "e": 1.0, "f": 2.0, "g": 10.0}
    rows = [
        _row("a", 3.0, 10.0),  # exactly half the recorded 6: not past it
        _row("b", 2.99, 10.0),
        _row("c", 4.99, 10.0),  # recorded 20 meets the target: half the target holds
        _row("d", 6.0, 2.0, "lower"),  # exactly twice the recorded 3
        _row("d2", 4.01, 2.0, "lower"),  # not on record
        _row("e", 4.01, 2.0, "lower"),  # recorded 1 meets the target
        _row("f", 4.01, 2.0, "lower"),  # recorded exactly at the target meets it
        _row("g", 4.99, 10.0),  # the same, "higher"
    ]
    assert quick.regressions(rows, record) == [
        "b: ratio 2.99 is below half its recorded ratio 6 (target 10)",
        "c: ratio 4.99 is below half its target 10",
        "d2: ratio 4.01 is above twice its target 2",
        "e: ratio 4.01 is above twice its target 2",
        "f: ratio 4.01 is above twice its target 2",
        "g: ratio 4.99 is below half its target 10",
    ]
    assert len(quick.regressions(rows)) == 8  # without a record, the targets alone


def test_the_baseline_is_the_table_before_the_run_or_the_one_given(tmp_path, monkeypatch, capsys):
    table = {"date": "d", "cpu": "c", "load_average": [1, 2], "seconds": 3}
    out, base = tmp_path / "q.json", tmp_path / "base.json"
    out.write_text(json.dumps(dict(table, rows=[_row("a", 6.0, 10.0)])))
    new = dict(table, rows=[_row("a", 4.0, 10.0)])
    seen = []

    def run_all(names, timeout, log_dir, confirm, record):
        seen.append(record)
        return json.loads(json.dumps(new))

    monkeypatch.setattr(quick, "run_all", run_all)
    args = ["--only=acting_cost", "--check", f"--out={out}", f"--log_dir={tmp_path}"]
    assert quick.main(args) == 0  # 4 is above half the recorded 6
    assert seen[-1] == {"a": 6.0}
    # --check_only judges the table itself against its targets, unless given a baseline
    assert quick.main(["--check_only", f"--out={out}"]) == 1
    base.write_text(json.dumps(dict(table, rows=[_row("a", 7.0, 10.0)])))
    assert quick.main(["--check_only", f"--out={out}", f"--baseline={base}"]) == 0
    base.write_text(json.dumps(dict(table, rows=[_row("a", 9.0, 10.0)])))
    assert quick.main(["--check_only", f"--out={out}", f"--baseline={base}"]) == 1
    capsys.readouterr()
    base.write_text("{not json")
    before = out.read_text()
    assert quick.main(args + [f"--baseline={base}"]) == 2
    assert len(seen) == 1 and out.read_text() == before  # refused before running or writing
    assert capsys.readouterr().out.startswith(f"--baseline: cannot read {base}")


def test_check_only_exit_status(tmp_path, capsys):
    table = {"date": "d", "cpu": "c", "load_average": [1, 2], "seconds": 3, "rows": []}
    path = tmp_path / "q.json"
    path.write_text(json.dumps(dict(table, rows=[_row("a", 0.9, 0.9)])))
    assert quick.main(["--check_only", f"--out={path}"]) == 0
    path.write_text(json.dumps(dict(table, rows=[_row("a", 0.4, 0.9)])))
    assert quick.main(["--check_only", f"--out={path}"]) == 1
    assert "REGRESSION a: ratio 0.4 is below half its target 0.9" in capsys.readouterr().out
    assert quick.main(["--check_only", f"--out={tmp_path / 'none.json'}"]) == 2


def test_every_benchmark_file_is_quick_or_excluded_for_a_reason():
    files = {f[:-3] for f in os.listdir(os.path.join(REPO, "benchmarks")) if f.endswith(".py")}
    assert files == set(quick.QUICK) | set(quick.NOT_QUICK)
    assert not set(quick.QUICK) & set(quick.NOT_QUICK)


def test_result_lines_round_trip(capsys):
    bench_result.report("k", "frames/s", 10.0, "raw", 20.0, ratio=0.5, target=0.9, cpu_ms=1.5)
    out = "noise\n" + capsys.readouterr().out + "more noise\n"
    assert bench_result.parse(out) == [{
        "key": "k", "metric": "frames/s", "value": 10.0, "reference": "raw",
        "reference_value": 20.0, "ratio": 0.5, "target": 0.9, "better": "higher", "cpu_ms": 1.5,
    }]  # fmt: skip
    with pytest.raises(ValueError, match="better must be"):
        bench_result.report("k", "m", 1.0, None, None, None, better="more")


def test_docs_table_is_the_one_made_from_the_json():
    """docs/benchmarks.md shows what `make bench` wrote last (benchmarks/docs_table.py
    --write makes it so)."""
    with open(docs_table.DEFAULT_JSON) as f:
        block = docs_table.render(json.load(f))
    with open(docs_table.DEFAULT_PAGE) as f:
        page = f.read()
    assert docs_table.page_with_table(page, block) == page, (
        "docs/benchmarks.md's table differs from benchmarks/results/quick.json: run "
        "python benchmarks/docs_table.py --write"
    )


def test_docs_table_write_and_check(tmp_path, capsys):
    table = {
        "date": "2026-01-02", "cpu": "Some CPU, 2 cores", "load_average": [1.5, 2.5],
        "seconds": 300.4,
        "rows": [
            _row("rollout_throughput/CAR_RACING", 0.95, 0.9),
            _row("retrieval_cost/1000w", 2.6, 2.0, "lower"),
            {"key": "x", "error": "exit 1: boom", "command": "python x", "seconds": 1.0},
        ],
    }  # fmt: skip
    js, page = tmp_path / "q.json", tmp_path / "page.md"
    js.write_text(json.dumps(table))
    page.write_text(f"# Title\n\n{docs_table.START}\nold\n{docs_table.END}\n\nText.\n")
    args = [f"--json={js}", f"--page={page}"]
    assert docs_table.main(args) == 1  # differs
    assert docs_table.main([*args, "--write"]) == 0
    assert docs_table.main(args) == 0
    text = page.read_text()
    assert text.startswith("# Title\n\n") and text.endswith("\n\nText.\n")
    assert (
        "Measured 2026-01-02 on Some CPU, 2 cores by `make bench` (load average 1.5 before its "
        "last run, 2.5 after;" in text
    )
    assert (
        "| rollout_throughput/CAR_RACING | 1.00 m | 1.00 r | 0.950 | >= 0.9 (met) | `python rollout_throughput/CAR_RACING` |"
        in text
    )
    assert "| retrieval_cost/1000w | 1.00 m | 1.00 r | 2.60 | <= 2 (**not met**) |" in text
    assert "| x | failed: exit 1: boom | - | - | - | `python x` |" in text
    page.write_text("# no markers\n")
    assert docs_table.main(args) == 2


def test_run_one_reads_results_and_failures_and_ends_what_a_benchmark_leaves(tmp_path, monkeypatch):
    """A daemon a benchmark starts (as Ray does) outlives it holding its output open: the
    runner neither waits for it nor leaves it running."""
    marker = tmp_path / "daemon_pid"
    bench_dir = os.path.join(REPO, "benchmarks")
    (tmp_path / "good.py").write_text(
        "import subprocess, sys\n"
        f"sys.path.insert(0, {bench_dir!r})\n"
        "from bench_result import report\n"
        "p = subprocess.Popen(['sleep', '600'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "report('good/x', 'm', 2.0, 'r', 4.0, ratio=0.5, target=0.9)\n"
    )
    (tmp_path / "bad.py").write_text("import sys\nprint('it broke')\nsys.exit(3)\n")
    monkeypatch.setattr(quick, "HERE", str(tmp_path))
    monkeypatch.setitem(quick.QUICK, "good", [])
    monkeypatch.setitem(quick.QUICK, "bad", ["--x=1"])
    rows = quick.run_one("good", timeout=60, log_dir=str(tmp_path / "logs"))
    assert rows[0]["seconds"] < 30
    assert [(r["key"], r["ratio"], r["command"]) for r in rows] == [
        ("good/x", 0.5, "python benchmarks/good.py")
    ]
    pid = int(marker.read_text())
    time.sleep(0.5)
    try:  # killed: gone, or a zombie not yet reaped
        assert open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    except FileNotFoundError:
        pass
    bad = quick.run_one("bad", timeout=60, log_dir=str(tmp_path / "logs"))
    assert bad[0]["key"] == "bad" and bad[0]["error"].startswith("exit 3: it broke (log: ")
    assert bad[0]["command"] == "python benchmarks/bad.py --x=1"


def test_a_ratio_past_its_bounds_is_run_again_and_fails_only_every_time(tmp_path, monkeypatch):
    """The guard confirms a regression: a benchmark past its bounds runs again; the first run
    inside them is kept (with the rejected ratios), one past them every time is a regression."""
    bench_dir = os.path.join(REPO, "benchmarks")
    for name, ratios in (("flaky", [0.1, 0.3, 0.8]), ("slow", [0.1, 0.2, 0.3, 0.8])):
        (tmp_path / f"{name}.py").write_text(
            "import os, sys\n"
            f"sys.path.insert(0, {bench_dir!r})\n"
            "from bench_result import report\n"
            f"count = {str(tmp_path / name)!r} + '.count'\n"
            "n = int(open(count).read()) if os.path.exists(count) else 0\n"
            "open(count, 'w').write(str(n + 1))\n"
            f"report('{name}/x', 'm', 1.0, 'r', 1.0, ratio={ratios}[n], target=0.9)\n"
        )
        monkeypatch.setitem(quick.QUICK, name, [])
    monkeypatch.setattr(quick, "HERE", str(tmp_path))
    table = quick.run_all(["flaky", "slow"], timeout=60, log_dir=str(tmp_path), confirm=2)
    got = [(r["key"], r["ratio"], r.get("rejected_runs")) for r in table["rows"]]
    assert got == [("flaky/x", 0.8, [0.1, 0.3]), ("slow/x", 0.3, [0.1, 0.2])]
    assert quick.regressions(table["rows"]) == ["slow/x: ratio 0.3 is below half its target 0.9"]
    assert (tmp_path / "flaky.count").read_text() == "3"
    assert (tmp_path / "slow.count").read_text() == "3"
    once = quick.run_all(["slow"], timeout=60, log_dir=str(tmp_path), confirm=0)
    assert [(r["ratio"], r.get("rejected_runs")) for r in once["rows"]] == [(0.8, None)]
    assert quick.main(["--confirm=-1", f"--out={tmp_path / 'q.json'}"]) == 2
    # held to half a recorded 0.2, the flaky one's first 0.1 is inside its bounds: one run
    os.remove(tmp_path / "flaky.count")
    held = quick.run_all(["flaky"], 60, str(tmp_path), confirm=2, record={"flaky/x": 0.2})
    assert [(r["ratio"], r.get("rejected_runs")) for r in held["rows"]] == [(0.1, None)]
    assert (tmp_path / "flaky.count").read_text() == "1"


def test_update_reruns_some_and_keeps_the_other_rows(tmp_path, monkeypatch):
    def row(name, ratio):
        return dict(_row(f"{name}/x", ratio, 1.0), benchmark=name)

    out = tmp_path / "q.json"
    old = {"date": "d0", "cpu": "c", "load_average": [1, 1], "seconds": 9, "rows": [
        row("rollout_throughput", 0.9), row("acting_cost", 5.0)]}  # fmt: skip
    out.write_text(json.dumps(old))
    new = dict(old, date="d1", rows=[row("acting_cost", 6.0)])
    monkeypatch.setattr(
        quick,
        "run_all",
        lambda names, timeout, log_dir, confirm, record: json.loads(json.dumps(new)),
    )
    assert (
        quick.main(["--only=acting_cost", "--update", f"--out={out}", f"--log_dir={tmp_path}"]) == 0
    )
    table = json.loads(out.read_text())
    assert table["date"] == "d1"
    assert [(r["key"], r["ratio"]) for r in table["rows"]] == [
        ("rollout_throughput/x", 0.9),
        ("acting_cost/x", 6.0),
    ]
    assert quick.main(["--only=acting_cost", f"--out={out}", f"--log_dir={tmp_path}"]) == 0
    assert [r["key"] for r in json.loads(out.read_text())["rows"]] == ["acting_cost/x"]
