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

Each entry of scripts/dev/mutations.py breaks one documented behaviour with one exact text
replacement (file, old text, new text) and names the tests that should notice. The runner
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
import collections
import dataclasses
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


def load_mutations() -> list[Mutation]:
    spec = importlib.util.spec_from_file_location(
        "rl755_mutations", os.path.join(os.path.dirname(__file__), "mutations.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return [Mutation(**m) for m in module.MUTATIONS]


def apply(text: str, m: Mutation) -> str:
    """`text` with `m.old` replaced by `m.new`; ValueError unless `m.old` occurs exactly once."""
    count = text.count(m.old)
    if count != 1:
        raise ValueError(
            f"mutation {m.name}: the old text occurs {count} times in {m.file} (must be once); "
            "the code changed: update scripts/dev/mutations.py."
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


def scratch_copy(root: str = REPO) -> str:
    """A copy of the checkout's tracked and untracked (not ignored) files."""
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    dest = tempfile.mkdtemp(prefix="rl755-mutate-")
    for rel in filter(None, out.split("\0")):
        src = os.path.join(root, rel)
        if not os.path.isfile(src):
            continue  # deleted in the working tree
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))
    return dest


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


# ------------------------------------------------------------------ generated mutants
# The tests that read each package (mutmut runs, per mutant, those of them that call the
# mutated function). A package not listed runs every test file: slow (see docs/development.md).
PACKAGE_TESTS = {
    "rl755/zoo": ("tests/test_zoo.py", "tests/test_shipped_models.py"),
    "rl755/slurm": (
        "tests/test_slurm_cluster.py", "tests/test_slurm_chain.py", "tests/test_slurm_jobs.py",
        "tests/test_slurm_sbatch.py", "tests/test_slurm_status.py",
        "tests/test_pipeline_resources.py",
    ),
    "rl755/policies": (
        "tests/test_policies.py", "tests/test_rollouts.py", "tests/test_controllers.py",
        "tests/test_environments_more.py",
    ),
    "rl755/common": (
        "tests/test_foundation.py", "tests/test_run_record.py", "tests/test_bad_shards.py",
        "tests/test_determinism.py", "tests/test_ray_pool.py", "tests/test_quiet_logs.py",
    ),
}  # fmt: skip
ALSO_COPY = ("README.md", "Makefile", "requirements.txt", "setup.py", "scripts/", "docs/",
             "notebooks/", "benchmarks/", "experiments/", "examples/", "mkdocs.yml", ".ci/")  # fmt: skip
# mutmut's verdicts (its exit codes per mutant); "timeout" counts as killed, as mutmut does.
KILLED = ("killed", "timeout", "segfault")


# What the scratch copy's tests/conftest.py gets: mutmut wraps each mutated function in a
# trampoline taking (*args, **kwargs) (functools.wraps sets __wrapped__), and Keras reads a
# layer's __init__ with inspect.getfullargspec, which does not follow __wrapped__ (IndexError
# in keras Operation.__new__). The shim reads the original function.
CONFTEST_SHIM = """

# Added by scripts/dev/mutate.py in its scratch copy (mutmut's trampolines hide signatures).
import inspect as _inspect  # noqa: E402

_getfullargspec = _inspect.getfullargspec
_inspect.getfullargspec = lambda func: _getfullargspec(_inspect.unwrap(func))
"""
# Tests that fail on mutmut's instrumented copy with no mutant active (measured: every test of
# sample_tests() run there by plain pytest). mutmut needs a passing clean run, so its runs
# leave them out. The kinds: they read what the trampolines change (the caller's frame in a
# registration error, generated module text compared with the source, argument names), or
# run work in Ray workers or subprocesses, which import the unmutated checkout and meet
# objects of the instrumented one. Each is a test a mutant here cannot reach; fewer is better.
INSTRUMENTED_DESELECT = (
    "tests/test_controller_ray.py::test_cma_generation_survives_a_worker_killed_mid_generation",
    "tests/test_controller_ray.py::test_hung_worker_times_out_and_its_trials_rerun",
    "tests/test_controller_ray.py::test_repeated_failures_stop_the_run_with_a_message",
    "tests/test_determinism.py::test_tiny_pipeline_twice_with_the_same_seed_is_identical",
    "tests/test_pipeline.py::test_tiny_pipeline_on_fake_env_chains_and_resumes",
    "tests/test_pipeline_environment.py::test_catch_runs_through_the_pipeline_and_again_identically",
    "tests/test_catalogue.py::test_a_bad_registration_fails_at_import_naming_its_file",
    "tests/test_catalogue.py::test_a_registered_model_is_a_model_name_everywhere",
    "tests/test_docs_new_environment.py::test_the_guides_test_and_stage_commands_run",
    "tests/test_infilling.py::test_script_takes_the_task_flag",
    "tests/test_pack.py::test_an_interrupted_run_packed_and_resumed_elsewhere_equals_the_uninterrupted_one",
    "tests/test_pipeline.py::test_tiny_pipeline_on_car_racing",
    "tests/test_quiet_logs.py::test_mixture_sampling_prints_no_onednn_type_notice",
    "tests/test_ray_pool.py::test_job_errors_stop_at_once_or_are_retried",
    "tests/test_ray_pool.py::test_kept_workers_serve_the_next_pool_of_their_kind_only",
    "tests/test_recipes.py::test_tiny_doom_recipe_runs_every_step_and_a_rerun_skips_them",
    "tests/test_registered_models.py::test_evaluate_world_model_scores_every_model_beside_the_mdn_rnn",
    "tests/test_rollouts.py::test_small_runs_stay_in_this_process",
    "tests/test_sequential_training.py::test_two_devices_give_the_same_losses_as_one",
    "tests/test_shipped_models.py::test_script_ships_and_refuses_clearly",
    "tests/test_world_model_eval.py::test_script_end_to_end_writes_json_table_and_pictures",
    "tests/test_zoo.py::test_saved_models_modules_are_generated_from_the_rows",
    "tests/test_zoo.py::test_saved_models_modules_are_what_the_rows_generate",
)


def prepare_copy(copy: str, package: str, tests: tuple[str, ...]) -> None:
    """Writes mutmut's setup.cfg and the conftest shim into scratch copy `copy`."""
    with open(os.path.join(copy, "setup.cfg"), "w") as f:
        f.write(mutmut_config(package, tests))
    with open(os.path.join(copy, "tests", "conftest.py"), "a") as f:
        f.write(CONFTEST_SHIM)


def mutmut_config(package: str, tests: tuple[str, ...]) -> str:
    """setup.cfg's [mutmut] section: mutate `package`, select `tests`, no real SLURM jobs."""
    lines = [
        "[mutmut]",
        "source_paths = rl755/",
        # mutmut runs the tests in mutants/: what they read beside rl755/ and tests/
        "also_copy =",
        *[f"    {p}" for p in ALSO_COPY],
        f"only_mutate = {package.rstrip('/')}/*",
        "pytest_add_cli_args_test_selection =",
        *[f"    {t}" for t in tests],
        "pytest_add_cli_args =",
        *[f"    {a}" for a in ("-p", "no:cacheprovider", "-q", "-m", "not slurm", "-x")],
        *[f"    --deselect={t}" for t in INSTRUMENTED_DESELECT],
    ]
    return "\n".join(lines) + "\n"


def read_mutmut_results(copy: str, package: str) -> dict[str, dict[str, str]]:
    """{source file: {mutant name: verdict}} from the `.meta` files mutmut wrote."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(sys.executable)))
    from mutmut.stats import status_by_exit_code

    out = {}
    root = os.path.join(copy, "mutants")
    for dirpath, _, names in os.walk(os.path.join(root, package)):
        for name in sorted(names):
            if name.endswith(".py.meta"):
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
        "| file | mutants | killed | survived | no tests | not run | score |",
        "|---|---|---|---|---|---|---|",
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
            f"| {path} | {len(verdicts)} | {killed} | {survived} | {untested} | {not_run} | {score} |"
        )
    return "\n".join(rows), total_killed, total_tested


# Tests a whole-of-rl755 sample runs: every test file except those that read the source text
# (mutmut's copy has trampolines in every function: line counts, layering) or only run whole
# commands in subprocesses (which import the unmutated checkout, so they cannot kill a mutant).
SAMPLE_SKIPS = (
    "tests/test_layout.py", "tests/test_mutations.py", "tests/test_ci.py",
    "tests/test_notebooks.py", "tests/test_benchmarks.py", "tests/test_docs.py",
    "tests/test_readme_usage.py",
)  # fmt: skip


def sample_tests(root: str = REPO) -> tuple[str, ...]:
    """The test files of a whole-of-rl755 sample: tests/test_*.py minus SAMPLE_SKIPS."""
    names = sorted(n for n in os.listdir(os.path.join(root, "tests")) if n.startswith("test_"))
    return tuple(
        f"tests/{n}" for n in names if n.endswith(".py") and f"tests/{n}" not in SAMPLE_SKIPS
    )


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
) -> tuple[str, list[str]]:
    """(markdown table per package, the sampled survivors, {package: score in percent, None
    when none of its mutants was tested}) of the `chosen` mutants' verdicts; mutants in
    `equivalent` are counted apart, not in the score."""
    verdict_of = {n: v for verdicts in results.values() for n, v in verdicts.items()}
    package_by_name = {n: package_of(p) for p, vs in results.items() for n in vs}
    rows = [
        "| package | sampled | killed | survived | no tests | equivalent | not run | score | 95% interval |",
        "|---|---|---|---|---|---|---|---|---|",
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
            f"| {package} | {len(names)} | {killed} | {count['survived']} | {count['no tests']} "
            f"| {count['equivalent']} | {not_run} | {score} | {low:.0f}-{high:.0f}% |"
        )
    return "\n".join(rows), survivors, scores


MUTMUT = os.path.join(os.path.dirname(sys.executable), "mutmut")


def mutmut_run(copy: str, env: dict, jobs: int, time_limit: float, names=()) -> str:
    """Runs `mutmut run` (only `names` if given) in `copy`; "" or the time-limit remark."""
    try:
        subprocess.run(
            [MUTMUT, "run", "--max-children", str(jobs), *names], cwd=copy, env=env,
            timeout=time_limit, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        return ""
    except subprocess.TimeoutExpired:
        return f" (stopped at the {time_limit:.0f} s limit: the rest is not run)"


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
    package: str, per_package: int, seed: int, time_limit: float, jobs: int, keep: bool, show: int
) -> int:
    """mutmut over a seeded random sample of `per_package` mutants of each package under
    `package` (rl755: every package), run against SAMPLE_TESTS (or the package's own tests);
    prints the score per package with its 95% interval; 0 if every package scores >= 80%."""
    package = package.rstrip("/")
    tests = sample_tests() if package == "rl755" else PACKAGE_TESTS.get(package, sample_tests())
    copy = scratch_copy()
    prepare_copy(copy, package, tests)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH="")
    t0 = time.monotonic()
    try:
        subprocess.run([sys.executable, "-c", GENERATE.format(jobs=jobs)], cwd=copy, env=env,
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        every = read_mutmut_results(copy, package)
        chosen = draw_sample({p: list(v) for p, v in every.items()}, per_package, seed)
        total = sum(len(v) for v in every.values())
        print(f"{package}: {total} mutants in {len(every)} files; sampled {len(chosen)} "
              f"({per_package} per package, seed {seed}); tests: {len(tests)} files")  # fmt: skip
        sys.stdout.flush()
        stopped = mutmut_run(copy, env, jobs, time_limit, chosen)
        equivalent = load_equivalent()
        table, survivors, scores = sample_table(
            read_mutmut_results(copy, package), chosen, equivalent
        )
        print(f"\n{time.monotonic() - t0:.0f} s{stopped}\n\n{table}\n")
        kinds = collections.Counter(equivalent[n] for n in chosen if n in equivalent)
        for kind, n in sorted(kinds.items()):
            print(f"  equivalent ({kind}): {n}")
        print_survivors(copy, env, survivors, show)
        return 0 if all(score is not None and score >= 80 for score in scores.values()) else 1
    finally:
        if keep:
            print(f"scratch copy kept: {copy} (cd there; mutmut results / mutmut show NAME)")
        else:
            shutil.rmtree(copy, ignore_errors=True)


def run_generated(package: str, time_limit: float, jobs: int, keep: bool, show: int = 30) -> int:
    """mutmut over `package` in a scratch copy for at most `time_limit` seconds; prints the
    scores and the survivors; 0 if at least 80% of the tested mutants were killed."""
    package = package.rstrip("/")
    if not os.path.isdir(os.path.join(REPO, package)) or not package.startswith("rl755"):
        print(f"--package={package}: not a package directory of rl755/ (e.g. rl755/zoo)",
              file=sys.stderr)  # fmt: skip
        return 2
    tests = PACKAGE_TESTS.get(package, ("tests/",))
    copy = scratch_copy()
    prepare_copy(copy, package, tests)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH="")
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
        if keep:
            print(f"scratch copy kept: {copy} (cd there; mutmut results / mutmut show NAME)")
        else:
            shutil.rmtree(copy, ignore_errors=True)


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
    args = parser.parse_args(argv)
    if args.sample < 0:
        parser.error(f"--sample={args.sample}: give a number of mutants per package, at least 1")
    if args.sample:
        package = args.package or "rl755"
        if not os.path.isdir(os.path.join(REPO, package)) or not package.startswith("rl755"):
            parser.error(f"--package={package}: not rl755 or a package directory of it")
        return run_sample(package, args.sample, args.seed, args.time_limit, max(1, args.jobs),
                          args.keep, args.show)  # fmt: skip
    if args.package:
        return run_generated(args.package, args.time_limit, max(1, args.jobs), args.keep, args.show)

    mutations = load_mutations()
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
