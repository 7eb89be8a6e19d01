"""Generated mutants (mutmut 3) of one package of rl755/, or a seeded sample of every package.

Used by scripts/dev/mutate.py (`make mutate PACKAGE=...`, `make mutate SAMPLE=N`), which
documents the commands; docs/development.md gives their times. Everything runs in a scratch
copy of the checkout (`scratch_copy`): the working tree is never touched.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


# The tests that read each package (mutmut runs, per mutant, those of them that call the
# mutated function). A package not listed runs every test file: slow (see docs/development.md).
PACKAGE_TESTS = {
    "rl755/zoo": ("tests/test_zoo.py", "tests/test_zoo_commands.py", "tests/test_shipped_models.py"),
    "rl755/slurm": (
        "tests/test_slurm_cluster.py", "tests/test_slurm_chain.py", "tests/test_slurm_jobs.py",
        "tests/test_slurm_sbatch.py", "tests/test_slurm_status.py", "tests/test_slurm_words.py",
        "tests/test_pipeline_resources.py",
    ),
    "rl755/policies": (
        "tests/test_policies.py", "tests/test_policy_behaviour.py", "tests/test_rollouts.py",
        "tests/test_controllers.py",
        "tests/test_environments_more.py",
    ),
    "rl755/common": (
        "tests/test_foundation.py", "tests/test_run_record.py", "tests/test_bad_shards.py",
        "tests/test_determinism.py", "tests/test_ray_pool.py", "tests/test_quiet_logs.py",
        "tests/test_checkpoint_retention.py", "tests/test_visualize.py",
        "tests/test_trainer_conventions.py", "tests/test_slurm_status.py",
    ),
    "rl755/controller": (
        "tests/test_controller_training.py", "tests/test_controllers.py",
        "tests/test_dream_options.py", "tests/test_dream_ensemble.py",
        "tests/test_new_environment_errors.py", "tests/test_typed_results.py",
        "tests/test_trainer_conventions.py",
    ),
    "rl755/data": (
        "tests/test_rollout_datasets.py", "tests/test_encoder_encode.py",
        "tests/test_catalogue_docs.py", "tests/test_environment_entries.py",
        "tests/test_sequential_training.py",
    ),
    "rl755/data_gen": (
        "tests/test_collection_reports.py", "tests/test_rollouts.py", "tests/test_bad_shards.py",
        "tests/test_encoder_encode.py",
        "tests/test_typed_results.py", "tests/test_policies.py",
    ),
    "rl755/environments": (
        "tests/test_foundation.py", "tests/test_car_racing_render.py",
        "tests/test_environment_entries.py", "tests/test_environments_more.py",
        "tests/test_new_environment_errors.py", "tests/test_catalogue.py",
    ),
    "rl755/evaluation": (
        "tests/test_world_model_eval.py", "tests/test_evaluation_figures.py",
        "tests/test_retrieval.py",
    ),
    "rl755/models": (
        "tests/test_encoder.py", "tests/test_sequential_models.py",
        "tests/test_sequential_training.py", "tests/test_infilling.py", "tests/test_unet_gan.py",
        "tests/test_checkpoint_retention.py", "tests/test_registered_models.py",
        "tests/test_catalogue.py", "tests/test_trainer_conventions.py",
        "tests/test_retrieval.py", "tests/test_model_tables.py",
    ),
    "rl755/pipeline": (
        "tests/test_pipeline.py", "tests/test_determinism.py",
        "tests/test_pipeline_resources.py", "tests/test_recipes.py", "tests/test_pack.py",
        "tests/test_slurm_pipeline.py", "tests/test_pipeline_environment.py",
    ),
    "rl755/testing": (
        "tests/test_testing_helpers.py", "tests/test_environment_entries.py",
        "tests/test_trainer_conventions.py",
        "tests/test_dream_options.py", "tests/test_foundation.py",
    ),
    "rl755/visualize.py": ("tests/test_visualize.py",),
}  # fmt: skip
ALSO_COPY = ("README.md", "Makefile", "requirements.txt", "setup.py", "scripts/", "docs/",
             "notebooks/", "benchmarks/", "experiments/", "examples/", "mkdocs.yml", ".ci/",
             "mutmut_child_stats.py")  # fmt: skip
# mutmut's verdicts (its exit codes per mutant); "timeout" counts as killed, as mutmut does.
KILLED = ("killed", "timeout", "segfault")


# What the scratch copy's tests/conftest.py gets: mutmut wraps each mutated function in a
# trampoline taking (*args, **kwargs) (functools.wraps sets __wrapped__), and Keras reads a
# layer's __init__ with inspect.getfullargspec, which does not follow __wrapped__ (IndexError
# in keras Operation.__new__): the shim reads the original function. And a test that runs a
# script in a child process (which imports the instrumented copy) would fail in mutmut's
# stats run: the child runs unrecorded then, and with its mutant in the mutant runs.
CONFTEST_SHIM = """

# Added by scripts/dev/mutate.py in its scratch copy (mutmut's trampolines hide signatures).
import inspect as _inspect  # noqa: E402

_getfullargspec = _inspect.getfullargspec
_inspect.getfullargspec = lambda func: _getfullargspec(_inspect.unwrap(func))

import os as _os  # noqa: E402
import subprocess as _subprocess  # noqa: E402
import tempfile as _tempfile  # noqa: E402

_popen_init = _subprocess.Popen.__init__
_CHILD_HITS = _tempfile.mkdtemp(prefix="rl755-mutmut-child-hits-")


def _popen_init_recording_children(self, *args, env=None, **kwargs):
    # In mutmut's stats run a child process (a script, a Ray worker) records the functions it
    # calls into _CHILD_HITS (mutmut_child_stats.py, imported by the copy's rl755/__init__.py);
    # with a mutant active the child inherits it and runs that mutant.
    if (_os.environ if env is None else env).get("MUTANT_UNDER_TEST") == "stats":
        env = dict(_os.environ if env is None else env, MUTANT_UNDER_TEST="stats-child",
                   MUTMUT_CHILD_HITS=_CHILD_HITS)  # fmt: skip
    _popen_init(self, *args, env=env, **kwargs)


_subprocess.Popen.__init__ = _popen_init_recording_children


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    # Before mutmut's own teardown hook files this test's calls: add its children's.
    if _os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    from mutmut.state import state as _state

    for name in _os.listdir(_CHILD_HITS):
        path = _os.path.join(_CHILD_HITS, name)
        with open(path) as f:
            _state()._stats.update(line.strip() for line in f if line.strip())
        _os.remove(path)
"""
# What a child process imports first in mutmut's stats run (see CONFTEST_SHIM).
CHILD_STATS = '''"""Written into a scratch copy by scripts/dev/generated_mutants.py: in a child process of a
test during mutmut's stats run, records each instrumented function called, once, in a file of
the directory MUTMUT_CHILD_HITS, which the test's process reads after the test."""
import os

import mutmut.mutation.trampoline as _trampoline

_path = os.path.join(os.environ["MUTMUT_CHILD_HITS"], f"{os.getpid()}.txt")
_seen = set()


def _record(name, caller=None):
    if name not in _seen:
        _seen.add(name)
        with open(_path, "a") as f:
            f.write(name + "\\n")


_trampoline.get_mutant_under_test = lambda: "stats"
_trampoline.record_trampoline_hit = _record
'''
CHILD_HOOK = (
    "import os as _os\n"
    "if _os.environ.get('MUTANT_UNDER_TEST') == 'stats-child':\n"
    "    import mutmut_child_stats  # noqa: F401  (scripts/dev/generated_mutants.py)\n"
)
# Tests that fail on mutmut's instrumented copy with no mutant active (measured: every test of
# sample_tests() run there by plain pytest). mutmut needs a passing clean run, so its runs
# leave them out. The kinds: they read what the trampolines change (the caller's frame in a
# registration error, generated module text compared with the source, argument names), or
# run work in Ray workers or subprocesses, which then failed looking for mutmut's config (this
# list was measured before child processes got CONFTEST_SHIM's recording: some of those may
# pass now). Each is a test a mutant here cannot reach; fewer is better.
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


def is_package(package: str) -> bool:
    """Whether `package` is a package of rl755/ as the scores count them: a directory
    (rl755/zoo) or a module directly under rl755/ (rl755/visualize.py)."""
    parts = package.rstrip("/").split("/")
    path = os.path.join(REPO, *parts)
    return (
        len(parts) == 2
        and parts[0] == "rl755"
        and (os.path.isdir(path) or (parts[1].endswith(".py") and os.path.isfile(path)))
    )


def prepare_copy(copy: str, package: str, tests: tuple[str, ...]) -> None:
    """Writes mutmut's setup.cfg and the conftest shim into scratch copy `copy`."""
    with open(os.path.join(copy, "setup.cfg"), "w") as f:
        f.write(mutmut_config(package, tests))
    with open(os.path.join(copy, "tests", "conftest.py"), "a") as f:
        f.write(CONFTEST_SHIM)
    with open(os.path.join(copy, "mutmut_child_stats.py"), "w") as f:
        f.write(CHILD_STATS)
    init = os.path.join(copy, "rl755", "__init__.py")
    with open(init) as f:
        text = f.read()
    head, _, rest = text.partition('"""\n\n')  # after the docstring, before any import
    with open(init, "w") as f:
        f.write(head + '"""\n\n' + CHILD_HOOK + rest)


def mutmut_config(package: str, tests: tuple[str, ...]) -> str:
    """setup.cfg's [mutmut] section: mutate `package`, select `tests`, no real SLURM jobs."""
    lines = [
        "[mutmut]",
        "source_paths = rl755/",
        # mutmut runs the tests in mutants/: what they read beside rl755/ and tests/
        "also_copy =",
        *[f"    {p}" for p in ALSO_COPY],
        f"only_mutate = {package if package.endswith('.py') else package + '/*'}",
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
) -> tuple[str, list[str]]:
    """(markdown table per package, the sampled survivors, {package: score in percent, None
    when none of its mutants was tested}) of the `chosen` mutants' verdicts; mutants in
    `equivalent` are counted apart, not in the score."""
    verdict_of = {n: v for verdicts in results.values() for n, v in verdicts.items()}
    package_by_name = {n: package_of(p) for p, vs in results.items() for n in vs}
    rows = [
        "| package | sampled | killed | survived | no tests | set apart | not run | score | 95% interval |",
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
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONPATH="")
    t0 = time.monotonic()
    if not copy:
        copy = scratch_copy()
        prepare_copy(copy, package, tests)
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
        release(copy, keep)


def release(copy: str, keep: bool) -> None:
    """Removes the scratch copy, or says where it is kept and how to go on there."""
    if keep:
        print(f"scratch copy kept: {copy} (mutmut results / mutmut show NAME there; the same "
              f"command with --copy={copy} runs what is not run yet)")  # fmt: skip
    else:
        shutil.rmtree(copy, ignore_errors=True)
