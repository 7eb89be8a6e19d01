"""Generated mutants (mutmut 3) of one package of rl755/, or a seeded sample of every package.

Used by scripts/dev/mutate.py (`make mutate PACKAGE=...`, `make mutate SAMPLE=N`), which
documents the commands; docs/development.md gives their times. Everything runs in a scratch
copy of the checkout (`scratch_copy`): the working tree is never touched.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from mutmut_copy import (  # noqa: F401  (re-exported: mutate.py, tests/test_mutations.py)
    CHILD_HOOK,
    CHILD_STATS,
    CONFTEST_SHIM,
    INSTRUMENTED_DESELECT,
    PACKAGE_TESTS,
    SAMPLE_SKIPS,
    TIMEOUT_CONSTANT,
    is_package,
    mutmut_config,
    prepare_copy,
    sample_tests,
    scratch_copy,
)

# mutmut's verdicts (its exit codes per mutant); "timeout" counts as killed, as mutmut does, and
# the tables show how many timed out: a count that grows says the runs hang (a fork that
# deadlocks), not that the tests kill.
KILLED = ("killed", "timeout", "segfault")


def read_mutmut_results(copy: str, package: str) -> dict[str, dict[str, str]]:
    """{source file: {mutant name: verdict}} from the `.meta` files mutmut wrote."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(sys.executable)))
    from mutmut.stats import status_by_exit_code

    out = {}
    root = os.path.join(copy, "mutants")
    walked = (
        os.walk(os.path.join(root, package))
        if not package.endswith(".py")
        else [
            (
                os.path.join(root, os.path.dirname(package)),
                [],
                [os.path.basename(package) + ".meta"],
            )
        ]
    )
    for dirpath, _, names in walked:
        for name in sorted(names):
            if name.endswith(".py.meta") and os.path.isfile(os.path.join(dirpath, name)):
                with open(os.path.join(dirpath, name)) as f:
                    codes = json.load(f).get("exit_code_by_key", {})
                rel = os.path.relpath(os.path.join(dirpath, name[: -len(".meta")]), root)
                out[rel] = {k: status_by_exit_code[v] for k, v in codes.items()}
    return out


def score_table(results: dict[str, dict[str, str]]) -> tuple[str, int, int]:
    """(markdown table per file, killed, tested) of `read_mutmut_results`. A mutant in a
    function no selected test calls ("no tests") counts as a survivor; one left unrun by the
    time limit ("not checked") counts neither way."""
    rows = [
        "| file | mutants | killed | of which timed out | survived | no tests | not run | score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total_killed = total_tested = 0
    for path, verdicts in sorted(results.items()):
        count = collections.Counter(verdicts.values())
        killed = sum(count[v] for v in KILLED)
        survived, untested = count["survived"], count["no tests"]
        tested = killed + survived + untested
        not_run = len(verdicts) - tested
        total_killed, total_tested = total_killed + killed, total_tested + tested
        score = f"{100 * killed / tested:.0f}%" if tested else "-"
        rows.append(
            f"| {path} | {len(verdicts)} | {killed} | {count['timeout']} | {survived} | {untested} "
            f"| {not_run} | {score} |"
        )
    return "\n".join(rows), total_killed, total_tested


def package_of(source: str) -> str:
    """The package a mutated file belongs to: rl755/data_gen/collect.py -> rl755/data_gen;
    a module directly under rl755/ is its own package (rl755/visualize.py)."""
    parts = source.split("/")
    return "/".join(parts[:2])


def draw_sample(names_by_file: dict[str, list[str]], per_package: int, seed: int) -> list[str]:
    """`per_package` mutant names drawn at random (seeded) from each package's mutants (all of
    them where a package has fewer), in a stable order."""
    by_package = collections.defaultdict(list)
    for path, names in sorted(names_by_file.items()):
        by_package[package_of(path)].extend(sorted(names))
    rng = random.Random(seed)
    chosen = []
    for package in sorted(by_package):
        names = by_package[package]
        chosen.extend(sorted(rng.sample(names, min(per_package, len(names)))))
    return chosen


def not_run_yet(results: dict[str, dict[str, str]], chosen: list[str]) -> list[str]:
    """The `chosen` mutants without a verdict in `read_mutmut_results`' `results`."""
    verdict = {n: v for verdicts in results.values() for n, v in verdicts.items()}
    return [n for n in chosen if verdict[n] == "not checked"]


def wilson(killed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval (percent) of a score of killed/n from a random sample."""
    if n == 0:
        return 0.0, 100.0
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return 100 * max(0.0, centre - half), 100 * min(1.0, centre + half)


def load_equivalent() -> dict[str, str]:
    """{mutant name: kind} of the mutants judged equivalent by hand (equivalent_mutants.py)."""
    spec = importlib.util.spec_from_file_location(
        "rl755_equivalent", os.path.join(os.path.dirname(__file__), "equivalent_mutants.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    unknown = {k for k in module.EQUIVALENT.values() if k not in module.KINDS}
    if unknown:
        raise ValueError(f"equivalent_mutants.py: kinds {sorted(unknown)} are not in KINDS")
    return dict(module.EQUIVALENT)


def sample_table(
    results: dict[str, dict[str, str]], chosen: list[str], equivalent: dict[str, str]
) -> tuple[str, list[str], dict[str, float | None]]:
    """(markdown table per package, the sampled survivors, {package: score in percent, None
    when none of its mutants was tested}) of the `chosen` mutants' verdicts; mutants in
    `equivalent` are counted apart, not in the score."""
    verdict_of = {n: v for verdicts in results.values() for n, v in verdicts.items()}
    package_by_name = {n: package_of(p) for p, vs in results.items() for n in vs}
    rows = [
        "| package | sampled | killed | of which timed out | survived | no tests | set apart "
        "| not run | score | 95% interval |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    survivors, scores = [], {}
    for package in sorted({package_by_name[n] for n in chosen}):
        names = [n for n in chosen if package_by_name[n] == package]
        count = collections.Counter(
            "equivalent" if n in equivalent else verdict_of[n] for n in names
        )
        killed = sum(count[v] for v in KILLED)
        tested = killed + count["survived"] + count["no tests"]
        not_run = len(names) - tested - count["equivalent"]
        survivors += [n for n in names if verdict_of[n] in ("survived", "no tests")
                      and n not in equivalent]  # fmt: skip
        low, high = wilson(killed, tested)
        scores[package] = 100 * killed / tested if tested else None
        score = f"{scores[package]:.0f}%" if tested else "-"
        rows.append(
            f"| {package} | {len(names)} | {killed} | {count['timeout']} | {count['survived']} "
            f"| {count['no tests']} "
            f"| {count['equivalent']} | {not_run} | {score} | {low:.0f}-{high:.0f}% |"
        )
    return "\n".join(rows), survivors, scores


MUTMUT = os.path.join(os.path.dirname(sys.executable), "mutmut")


def run_env(copy: str) -> dict:
    """The environment of mutmut's runs in `copy`: every Python process a test starts (a
    stage script, a script those start in turn, a Ray worker) imports rl755 from the copy's
    mutants/, where mutmut runs the tests, not from the checkout the venv installs."""
    mutants = os.path.join(os.path.abspath(copy), "mutants")
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH=mutants)


def mutmut_run(copy: str, env: dict, jobs: int, time_limit: float, names=()) -> str:
    """Runs `mutmut run` (only `names` if given) in `copy`; "" or the time-limit remark. At
    the limit its whole process group goes (the fork server's test processes with it)."""
    proc = subprocess.Popen(
        [MUTMUT, "run", "--max-children", str(jobs), *names], cwd=copy, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        proc.wait(timeout=time_limit)
        return ""
    except subprocess.TimeoutExpired:
        return f" (stopped at the {time_limit:.0f} s limit: the rest is not run)"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def print_survivors(copy: str, env: dict, survivors: list[str], show: int) -> None:
    """Prints how many survived and the change of the first `show` (mutmut show)."""
    print(f"{len(survivors)} survivors; the first {min(len(survivors), show)} (--show):")
    for name in survivors[:show]:
        shown = subprocess.run(
            [MUTMUT, "show", name], cwd=copy, env=env, capture_output=True, text=True
        ).stdout
        diff = [x for x in shown.splitlines() if x[:1] in "+-" and x[:3] not in "+++---"]
        print(f"  survived {name}: {' | '.join(diff)[:300]}")


GENERATE = (
    "from mutmut.__main__ import copy_src_dir, copy_also_copy_files, setup_source_paths, "
    "store_lines_covered_by_tests, create_mutants, set_mutant_under_test\n"
    "set_mutant_under_test('mutant_generation'); copy_src_dir(); copy_also_copy_files(); "
    "setup_source_paths(); store_lines_covered_by_tests(); create_mutants({jobs})\n"
)


def run_sample(
    package: str,
    per_package: int,
    seed: int,
    time_limit: float,
    jobs: int,
    keep: bool,
    show: int,
    copy: str = "",
) -> int:
    """mutmut over a seeded random sample of `per_package` mutants of each package under
    `package` (rl755: every package), run against SAMPLE_TESTS (or the package's own tests);
    prints the score per package with its 95% interval; 0 if every package scores >= 80%.
    With `copy` (a scratch copy an earlier run kept) it runs only the sampled mutants that
    copy has not run yet, reusing its record of which tests call what."""
    package = package.rstrip("/")
    tests = sample_tests() if package == "rl755" else PACKAGE_TESTS.get(package, sample_tests())
    keep = keep or bool(copy)
    t0 = time.monotonic()
    fresh = not copy
    if fresh:
        copy = scratch_copy()
        prepare_copy(copy, package, tests)
    env = run_env(copy)
    if fresh:
        subprocess.run([sys.executable, "-c", GENERATE.format(jobs=jobs)], cwd=copy, env=env,
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        every = read_mutmut_results(copy, package)
        chosen = draw_sample({p: list(v) for p, v in every.items()}, per_package, seed)
        total = sum(len(v) for v in every.values())
        to_run = not_run_yet(every, chosen)
        print(f"{package}: {total} mutants in {len(every)} files; sampled {len(chosen)} "
              f"({per_package} per package, seed {seed}), {len(to_run)} to run; "
              f"tests: {len(tests)} files")  # fmt: skip
        sys.stdout.flush()
        stopped = mutmut_run(copy, env, jobs, time_limit, to_run) if to_run else ""
        equivalent = load_equivalent()
        table, survivors, scores = sample_table(
            read_mutmut_results(copy, package), chosen, equivalent
        )
        print(f"\n{time.monotonic() - t0:.0f} s{stopped}\n\n{table}\n")
        kinds = collections.Counter(equivalent[n] for n in chosen if n in equivalent)
        for kind, n in sorted(kinds.items()):
            print(f"  set apart ({kind}): {n}")
        print_survivors(copy, env, survivors, show)
        return 0 if all(score is not None and score >= 80 for score in scores.values()) else 1
    finally:
        release(copy, keep)


def run_generated(
    package: str, time_limit: float, jobs: int, keep: bool, show: int = 30, copy: str = ""
) -> int:
    """mutmut over `package` in a scratch copy for at most `time_limit` seconds; prints the
    scores and the survivors; 0 if at least 80% of the tested mutants were killed. With `copy`
    (kept by an earlier run of the package) mutmut goes on with the mutants not yet run."""
    package = package.rstrip("/")
    if not is_package(package):
        print(f"--package={package}: not a package of rl755/ (e.g. rl755/zoo, rl755/visualize.py)",
              file=sys.stderr)  # fmt: skip
        return 2
    tests = PACKAGE_TESTS.get(package, ("tests/",))
    keep = keep or bool(copy)
    if not copy:
        copy = scratch_copy()
        prepare_copy(copy, package, tests)
    env = run_env(copy)
    t0 = time.monotonic()
    try:
        stopped = mutmut_run(copy, env, jobs, time_limit)
        results = read_mutmut_results(copy, package)
        table, killed, tested = score_table(results)
        print(f"{package}: generated mutants, tests {' '.join(tests)}; "
              f"{time.monotonic() - t0:.0f} s{stopped}\n\n{table}\n")  # fmt: skip
        score = 100 * killed / tested if tested else 0.0
        print(f"score {package}: {killed}/{tested} killed ({score:.0f}%)")
        survivors = [n for v in results.values() for n, x in sorted(v.items()) if x == "survived"]
        print_survivors(copy, env, survivors, show)
        return 0 if tested and score >= 80 else 1
    finally:
        release(copy, keep)


def release(copy: str, keep: bool) -> None:
    """Removes the scratch copy, or says where it is kept and how to go on there."""
    if keep:
        print(f"scratch copy kept: {copy} (mutmut results / mutmut show NAME there; the same "
              f"command with --copy={copy} runs what is not run yet)")  # fmt: skip
    else:
        shutil.rmtree(copy, ignore_errors=True)
