"""Every benchmark at a quick setting, one after the other; one JSON table of their ratios.

    python benchmarks/quick.py                       # runs them, writes benchmarks/results/quick.json
    python benchmarks/quick.py --check               # ... and exits 1 on a regression (CI)
    python benchmarks/quick.py --check_only          # judges the existing JSON, runs nothing
    python benchmarks/quick.py --only=rollout_throughput,acting_cost
    python benchmarks/quick.py --only=acting_cost --update   # rerun one, keep the other rows

Each benchmark runs as its own process (`QUICK` below: the command) and prints one
`bench_result` line per result. The JSON (`--out`, written whole then renamed into place)
holds the date, the CPU, the load average before and after, and per result its metric, value,
reference, ratio, target and which way is better, the command and its seconds. A benchmark
that fails or prints no result is a row with "error".

The guard (`--check`): a result is a regression when its ratio is below half its target
(`better` "higher"), or above twice its target ("lower"); a benchmark that failed is one too.
A result whose ratio on record (`--baseline`: by default the `--out` table as it was before
this run, i.e. the committed one) misses its target is held to half (twice) that recorded
ratio instead: the guard catches a ratio that got worse, and a target already missed is not
a regression. A ratio is measured side by side in one process, so other load on the machine
moves both sides much alike, but not always equally (a side bound by memory traffic or one
that hands work between threads loses more to a busy machine). So a benchmark with a ratio
past these bounds is run again, up to `--confirm` more times, and its first run inside the
bounds is the one kept (the earlier ratios go in the row's "rejected_runs"); only a ratio
past the bounds in every run is a regression. Missing a target inside the bounds is
reported, not failed. `docs/benchmarks.md`'s table is made from the JSON by
`benchmarks/docs_table.py --write`.

Not in the quick set: the files of `NOT_QUICK`, each with the reason.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, REPO]
from bench_result import parse  # noqa: E402

DEFAULT_OUT = os.path.join(HERE, "results", "quick.json")

# name -> the script's flags at the quick setting (python benchmarks/<name>.py <flags>)
QUICK = {
    "rollout_throughput": [
        "--environments=CAR_RACING,DOOM_TAKE_COVER,BREAKOUT", "--num_rollouts=4",
        "--max_steps=300", "--parallelism=2", "--repeats=3",
    ],
    "car_racing_render": ["--steps=200", "--repeats=3"],
    "encoder_training": ["--steps=10", "--repeats=3", "--num_files=2", "--rollouts_per_file=2"],
    "encoding_throughput": ["--repeats=2", "--num_files=2", "--rollouts_per_file=1"],
    "sequential_training": ["--models=mdn_rnn.mdn_rnn", "--rounds=3", "--steps=10"],
    "acting_cost": ["--windows=128", "--steps=50", "--repeats=3", "--num_threads=1"],
    "retrieval_cost": [
        "--index_windows=1000", "--contexts=100", "--rounds=2", "--steps=20", "--num_threads=1",
    ],
    "world_model_cost": [
        "--models=mdn_rnn.mdn_rnn,transformer.base_deterministic_transformer",
        "--train_steps=5", "--acting_steps=20", "--num_threads=1",
    ],
    "controller_generation": ["--population=16", "--trials=2", "--steps=60", "--repeats=2"],
    "stage_startup": ["--repeats=3"],
}  # fmt: skip

# benchmarks/ files the quick set does not run, and why (a test checks every file is in one).
NOT_QUICK = {
    "policy_coverage": "describes the CarRacing policies' driving; no reference, no ratio",
    "research_world_models": "trains five world models: tens of minutes",
    "peer_mdn_rnn_torch": "needs PyTorch, which is not a requirement (a separate venv)",
    "car_racing_frames": "makes CarRacing frames for the encoder benchmarks; not a benchmark",
    "bench_result": "the result line the benchmarks print",
    "quick": "this runner",
    "docs_table": "makes docs/benchmarks.md's table from the JSON",
}


def command(name: str) -> str:
    """The command line of a quick benchmark, as a user types it from the repository root."""
    return " ".join(["python", f"benchmarks/{name}.py", *QUICK[name]])


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one) and core count."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} cores"


def run_one(name: str, timeout: float, log_dir: str) -> list[dict]:
    """Runs one quick benchmark (its output in `<log_dir>/<name>.log`); its result rows (an
    "error" row if it failed). Processes it leaves behind (Ray's) are ended with it."""
    argv = [sys.executable, os.path.join(HERE, f"{name}.py"), *QUICK[name]]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(log_dir, f"{name}.log")
    start = time.monotonic()
    # A file, not a pipe: daemons a benchmark starts (Ray's) may hold a pipe open long after.
    with open(log_path, "w+") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env,
            start_new_session=True,
        )  # fmt: skip
        try:
            code = proc.wait(timeout=timeout)
            problem = ""
        except subprocess.TimeoutExpired:
            code, problem = -1, f"timed out after {timeout:g} s"
        finally:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.seek(0)
        out = log.read()
    seconds = round(time.monotonic() - start, 1)
    rows = parse(out)
    if code != 0 or not rows:
        tail = [line for line in out.strip().splitlines() if line.strip()][-1:]
        problem = problem or (tail[0][:300] if tail else "no result line printed")
        return [{"key": name, "error": f"exit {code}: {problem} (log: {log_path})",
                 "command": command(name), "seconds": seconds}]  # fmt: skip
    for row in rows:
        row.update(benchmark=name, command=command(name), seconds=seconds)
    return rows


def recorded_ratios(path: str | None) -> dict[str, float]:
    """{key: ratio} of the JSON table at `path` ({} for None). Raises ValueError when the
    file cannot be read as a table."""
    import json

    if not path:
        return {}
    try:
        with open(path) as f:
            rows = json.load(f)["rows"]
        return {r["key"]: r["ratio"] for r in rows if r.get("ratio") is not None}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"cannot read {path} as a benchmark table ({e})") from None


def regressions(rows: list[dict], record: dict[str, float] | None = None) -> list[str]:
    """One message per result past its bounds: half its target, or half its ratio in `record`
    when that misses the target (twice, for "lower"); see the module docstring."""
    bad = []
    for row in rows:
        if "error" in row:
            bad.append(f"{row['key']}: failed ({row['error']})")
            continue
        ratio, target = row.get("ratio"), row.get("target")
        if ratio is None or target is None:
            continue
        higher = row["better"] == "higher"
        held = (record or {}).get(row["key"])
        what = f"its target {target:g}"
        if held is not None and (held < target if higher else held > target):
            what = f"its recorded ratio {held:.3g} (target {target:g})"
        else:
            held = target
        if higher and ratio < held / 2:
            bad.append(f"{row['key']}: ratio {ratio:.3g} is below half {what}")
        if not higher and ratio > held * 2:
            bad.append(f"{row['key']}: ratio {ratio:.3g} is above twice {what}")
    return bad


def met(row: dict) -> bool | None:
    """Whether a result meets its target (None: no target, or it failed)."""
    ratio, target = row.get("ratio"), row.get("target")
    if "error" in row or ratio is None or target is None:
        return None
    return ratio >= target if row["better"] == "higher" else ratio <= target


def run_confirmed(
    name: str, timeout: float, log_dir: str, confirm: int, record: dict | None = None
) -> list[dict]:
    """`run_one`, run again up to `confirm` times while a ratio is past its bounds (not when
    it failed); the first run inside the bounds, or the last, with the ratios of the runs
    before it per key in "rejected_runs" (see the module docstring)."""
    rejected: dict[str, list[float]] = {}
    for attempt in range(confirm + 1):
        rows = run_one(name, timeout, log_dir)
        for row in rows:
            print(f"   {_line(row)}", flush=True)
            if rejected.get(row["key"]):
                row["rejected_runs"] = list(rejected[row["key"]])
        failed = any("error" in r for r in rows)
        if attempt == confirm or failed or not regressions(rows, record):
            break
        print(f"   past its bounds: running {name} again ({attempt + 1} of {confirm})")
        for row in rows:
            rejected.setdefault(row["key"], []).append(row.get("ratio"))
    return rows


def run_all(
    names: list[str], timeout: float, log_dir: str, confirm: int = 2, record: dict | None = None
) -> dict:
    """Runs the named quick benchmarks; the JSON table (see the module docstring)."""
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    rows = []
    for name in names:
        print(f"== {command(name)}", flush=True)
        rows += run_confirmed(name, timeout, log_dir, confirm, record)
    return {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_name(),
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "seconds": round(time.monotonic() - started, 1),
        "rows": rows,
    }


def _line(row: dict) -> str:
    if "error" in row:
        return f"{row['key']}: FAILED {row['error']}"
    if row.get("ratio") is None:
        return f"{row['key']}: {row['metric']} {row['value']:.4g} (no reference)"
    sign = ">=" if row["better"] == "higher" else "<="
    verdict = {True: "met", False: "not met", None: ""}[met(row)]
    target = f"target {sign} {row['target']:g}, {verdict}" if row.get("target") else "no target"
    return f"{row['key']}: ratio {row['ratio']:.3g} ({target}; {row['seconds']:.0f} s)"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="The JSON table to write.")
    parser.add_argument("--only", default="", help="Comma-separated benchmark names.")
    parser.add_argument("--check", action="store_true", help="Exit 1 on a regression.")
    parser.add_argument(
        "--check_only", action="store_true", help="Judge the existing --out; run nothing."
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="Seconds per benchmark.")
    parser.add_argument(
        "--confirm",
        type=int,
        default=2,
        help="Runs again a benchmark past its bounds up to this many times (module docstring).",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="The table of record whose ratios loosen a missed target's bounds (module "
        "docstring); default: --out as it was before this run (none with --check_only).",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="Keep the rows of the benchmarks not run from the existing --out.",
    )
    parser.add_argument(
        "--log_dir", default=None, help="Each benchmark's output (default: a new temporary dir)."
    )
    args = parser.parse_args(argv)
    import json

    default_record = None if args.check_only or not os.path.exists(args.out) else args.out
    try:
        record = recorded_ratios(args.baseline or default_record)
    except ValueError as e:
        flag = "--baseline" if args.baseline else "--out (the table of record)"
        print(f"{flag}: {e}; give a table written by benchmarks/quick.py.")
        return 2
    if args.check_only:
        try:
            with open(args.out) as f:
                table = json.load(f)
        except (OSError, ValueError) as e:
            print(f"--check_only: cannot read {args.out} ({e}); run benchmarks/quick.py first.")
            return 2
    else:
        if args.confirm < 0:
            print(f"--confirm: must be 0 or more, got {args.confirm}.")
            return 2
        names = [n for n in args.only.split(",") if n] or list(QUICK)
        unknown = sorted(set(names) - set(QUICK))
        if unknown:
            print(f"--only: unknown benchmarks {unknown}; valid: {', '.join(QUICK)}.")
            return 2
        log_dir = args.log_dir or tempfile.mkdtemp(prefix="rl755-bench-")
        print(f"benchmark outputs: {log_dir}/<name>.log", flush=True)
        table = run_all(names, args.timeout, log_dir, args.confirm, record)
        if args.update and os.path.exists(args.out):
            with open(args.out) as f:
                kept = [
                    r for r in json.load(f)["rows"] if r.get("benchmark", r["key"]) not in names
                ]
            table["rows"] = kept + table["rows"]
            table["rows"].sort(key=lambda r: list(QUICK).index(r.get("benchmark", r["key"])))
        from rl755.common.sharded_io import write_json_atomic

        write_json_atomic(args.out, table)
        print(f"wrote {args.out} ({table['seconds']:.0f} s, load {table['load_average']})")
    bad = regressions(table["rows"], record)
    for message in bad:
        print(f"REGRESSION {message}")
    if args.check or args.check_only:
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
