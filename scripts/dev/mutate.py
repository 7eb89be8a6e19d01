"""Mutation testing: does the suite notice when one behaviour breaks?

Generated mutants (mutmut 3), one package at a time (make mutate PACKAGE=rl755/zoo):

    python scripts/dev/mutate.py --package=rl755/zoo [--time_limit=1800] [--jobs=2]

copies the checkout to a scratch directory, has mutmut generate every mutant of the package's
files (operators, constants, arguments, returns...), collect which of the package's tests
(PACKAGE_TESTS) call each function, and run only those per mutant. Prints the score per file
and package: killed / (killed + survived + no tests), a timeout counting as killed and a
mutant in a function no selected test calls as a survivor, and the first survivors' changes
(`--show`; the scratch copy, which --keep keeps, has them all: mutmut results / show).

The curated list, one behaviour per entry:

    python scripts/dev/mutate.py                       # every mutation
    python scripts/dev/mutate.py --only=saved_controller_worst_eval,dream_ignores_temperature
    python scripts/dev/mutate.py --list                # names, files, tests
    python scripts/dev/mutate.py --baseline            # first check the tests pass unmutated
    python scripts/dev/mutate.py --jobs=1              # one at a time (default 2 at once)

Each entry of scripts/dev/mutations/*.toml (a file per package) breaks one documented behaviour
with one exact text replacement (file, old text, new text) and names the tests that should
notice. The runner
copies the checkout (tracked and untracked, not ignored, files) to a scratch directory once
per job (`--jobs`), and for each mutation writes the mutated file into a free copy, runs only
the named tests against that copy (PYTHONPATH=<copy>), then writes the original back: the
working tree is never touched.

A mutation is "killed" when the tests fail (exit status 1) or cannot even be collected (2),
"survived" when they pass. A mutation whose old text is no longer found exactly once is an
"error": the code changed, so update the entry. Prints one row per mutation and the score;
exit status 0 when every mutation was killed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import threading
import time
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generated_mutants import run_generated, run_sample  # noqa: E402
from mutmut_copy import is_package, scratch_copy  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One broken behaviour.

    Attributes:
      name: short identifier (--only).
      file: path relative to the repository root.
      old: text that occurs exactly once in `file`.
      new: what replaces it.
      tests: pytest node ids or files (relative to the root) that must fail.
      what: the behaviour broken, in words.
    """

    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    what: str


MUTATIONS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mutations")


def load_mutations(directory: str = MUTATIONS_DIR) -> list[Mutation]:
    """Every [[mutation]] of the .toml files in `directory`, file by file in name order.

    Raises ValueError naming the file when an entry lacks a field or has an unknown one.
    """
    fields = [f.name for f in dataclasses.fields(Mutation)]
    mutations = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".toml"):
            continue
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            try:
                entries = tomllib.load(f).get("mutation", [])
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"{path} is not valid TOML: {e}; fix the entry there.") from e
        for i, entry in enumerate(entries):
            if sorted(entry) != sorted(fields):
                raise ValueError(
                    f"{path}: mutation {i + 1} ({entry.get('name', 'no name')}) has the fields "
                    f"{sorted(entry)}; each needs exactly {fields}."
                )
            mutations.append(Mutation(**dict(entry, tests=tuple(entry["tests"]))))
    return mutations


def apply(text: str, m: Mutation) -> str:
    """`text` with `m.old` replaced by `m.new`; ValueError unless `m.old` occurs exactly once."""
    count = text.count(m.old)
    if count != 1:
        raise ValueError(
            f"mutation {m.name}: the old text occurs {count} times in {m.file} (must be once); "
            "the code changed: update its entry in scripts/dev/mutations/."
        )
    return text.replace(m.old, m.new)


def check_all_apply(mutations: list[Mutation], root: str = REPO) -> list[str]:
    """The problems (old text not found once, test file missing) of every mutation."""
    problems = []
    names = [m.name for m in mutations]
    for name in {n for n in names if names.count(n) > 1}:
        problems.append(f"mutation name {name} is used twice")
    for m in mutations:
        if not os.path.isfile(os.path.join(root, m.file)):
            problems.append(f"mutation {m.name}: {m.file} does not exist")
            continue
        with open(os.path.join(root, m.file)) as f:
            text = f.read()
        try:
            mutated = apply(text, m)
        except ValueError as e:
            problems.append(str(e))
            continue
        if mutated == text:
            problems.append(f"mutation {m.name} changes nothing")
        for t in m.tests:
            if not os.path.exists(os.path.join(root, t.split("::")[0])):
                problems.append(f"mutation {m.name}: test file {t} does not exist")
    return problems


def run_tests(copy: str, tests, timeout: float) -> tuple[int, str]:
    """(pytest's exit status, its last lines) for `tests` run against `copy`."""
    # No bytecode caches: a mutation of the same length written within the second of an earlier
    # run would otherwise be shadowed by its stale .pyc (pyc files check size and whole-second
    # mtime), and the mutant would "survive" without ever running.
    env = dict(os.environ, PYTHONPATH=copy, TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        proc = subprocess.run(
            cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return -1, "timed out"
    tail = [line for line in proc.stdout.strip().splitlines() if line.strip()][-1:]
    return proc.returncode, tail[0] if tail else ""


def run_one(copy: str, m: Mutation, timeout: float) -> tuple[str, float, str]:
    """(verdict, seconds, pytest's last line) of mutation `m` in scratch copy `copy`; the
    file is written back afterwards."""
    path = os.path.join(copy, m.file)
    with open(path) as f:
        original = f.read()
    t0 = time.monotonic()
    try:
        with open(path, "w") as f:
            f.write(apply(original, m))
        status, tail = run_tests(copy, m.tests, timeout)
    finally:
        with open(path, "w") as f:
            f.write(original)
    return verdict(status), time.monotonic() - t0, tail


def run_mutations(mutations: list[Mutation], copies: list[str], timeout: float) -> list:
    """[(mutation, verdict, seconds)] in the order of `mutations`, run by one worker per
    scratch copy (each copy has one mutation applied at a time), progress printed."""
    queue = list(enumerate(mutations))
    results: dict[int, tuple] = {}
    lock = threading.Lock()

    def worker(copy):
        while True:
            with lock:
                if not queue:
                    return
                i, m = queue.pop(0)
            try:
                result, secs, tail = run_one(copy, m, timeout)
            except Exception as e:  # noqa: BLE001 - one broken entry must not lose the others
                result, secs, tail = f"error ({type(e).__name__}: {e})", 0.0, ""
            with lock:
                results[i] = (m, result, secs)
                done = len(results)
                print(f"[{done}/{len(mutations)}] {m.name}: {result} ({secs:.0f} s) {tail}")
                sys.stdout.flush()

    threads = [threading.Thread(target=worker, args=(c,)) for c in copies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in range(len(mutations))]


def verdict(status: int) -> str:
    return {0: "survived", 1: "killed", 2: "killed (collection error)", -1: "timeout"}.get(
        status, f"error (pytest exit {status})"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="", help="generated mutants of this package")
    parser.add_argument("--time_limit", type=float, default=3600.0, help="--package: seconds")
    parser.add_argument("--keep", action="store_true", help="--package: keep the scratch copy")
    parser.add_argument("--show", type=int, default=30, help="--package: survivors shown")
    parser.add_argument("--only", default="", help="comma-separated mutation names")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--baseline", action="store_true", help="check the tests pass first")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per test run")
    parser.add_argument(
        "--jobs", type=int, default=2, help="mutations run at once, each in its own scratch copy"
    )
    parser.add_argument("--sample", type=int, default=0,
                        help="mutants drawn per package (--package=rl755: every package)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="--sample: the draw's seed")
    parser.add_argument("--copy", default="",
                        help="--package/--sample: go on in this kept scratch copy")  # fmt: skip
    args = parser.parse_args(argv)
    if args.sample < 0:
        parser.error(f"--sample={args.sample}: give a number of mutants per package, at least 1")
    if args.copy and not os.path.isfile(os.path.join(args.copy, "mutants", "mutmut-stats.json")):
        parser.error(
            f"--copy={args.copy}: not a scratch copy a run kept (no mutants/mutmut-stats.json)"
        )
    if args.sample:
        package = args.package or "rl755"
        if package.rstrip("/") != "rl755" and not is_package(package):
            parser.error(f"--package={package}: not rl755 or a package of it (rl755/zoo)")
        return run_sample(package, args.sample, args.seed, args.time_limit, max(1, args.jobs),
                          args.keep, args.show, args.copy)  # fmt: skip
    if args.package:
        return run_generated(args.package, args.time_limit, max(1, args.jobs), args.keep,
                             args.show, args.copy)  # fmt: skip

    try:
        mutations = load_mutations()
    except ValueError as e:
        print(f"mutate.py: {e}", file=sys.stderr)
        return 2
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m.name for m in mutations}
        if unknown:
            parser.error(
                f"unknown mutation(s) {sorted(unknown)}; valid: {', '.join(m.name for m in mutations)}"
            )
        mutations = [m for m in mutations if m.name in wanted]
    if args.list:
        for m in mutations:
            print(f"{m.name:34s} {m.file}\n    {m.what}\n    tests: {' '.join(m.tests)}")
        return 0
    problems = check_all_apply(mutations)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2

    copies = [scratch_copy() for _ in range(max(1, args.jobs))]
    try:
        if args.baseline:  # every named test, unmutated, in one run
            tests = sorted({t for m in mutations for t in m.tests})
            status, tail = run_tests(copies[0], tests, args.timeout * 4)
            if status != 0:
                print(f"baseline fails ({tail}): fix the tests first", file=sys.stderr)
                return 2
            print(f"baseline: the {len(tests)} named tests pass unmutated ({tail})")
        rows = run_mutations(mutations, copies, args.timeout)
    finally:
        for copy in copies:
            shutil.rmtree(copy, ignore_errors=True)

    print("\n| mutation | file | result | s |\n|---|---|---|---|")
    for m, result, secs in rows:
        print(f"| {m.name} | {m.file} | {result} | {secs:.0f} |")
    killed = sum(r.startswith("killed") for _, r, _ in rows)
    print(f"\nscore: {killed}/{len(rows)} killed")
    for m, result, _ in rows:
        if not result.startswith("killed"):
            print(f"  {result}: {m.name} ({m.what})")
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
