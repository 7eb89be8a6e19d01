"""The scratch copy mutmut runs in, for scripts/dev/generated_mutants.py: which tests each
package of rl755/ runs, and what the copy gets beside the checkout (mutmut's setup.cfg, a
conftest shim, the recorder of child processes' calls).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

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
# mutated function). Every package of rl755/ has an entry (tests/test_mutations.py checks).
PACKAGE_TESTS = {
    "rl755/zoo": (
        "tests/test_zoo.py", "tests/test_zoo_commands.py", "tests/test_shipped_models.py",
        "tests/test_shipping_rules.py",
    ),
    "rl755/slurm": (
        "tests/test_slurm_cluster.py", "tests/test_slurm_chain.py", "tests/test_slurm_jobs.py",
        "tests/test_slurm_sbatch.py", "tests/test_slurm_status.py", "tests/test_slurm_words.py",
        "tests/test_pipeline_resources.py", "tests/test_slurm_commands.py",
        "tests/test_slurm_chain_status.py",
    ),
    "rl755/policies": (
        "tests/test_policies.py", "tests/test_policy_behaviour.py", "tests/test_rollouts.py",
        "tests/test_rollouts_ray.py", "tests/test_controllers.py",
        "tests/test_environments_more.py",
    ),
    "rl755/common": (
        "tests/test_foundation.py", "tests/test_run_record.py", "tests/test_bad_shards.py",
        "tests/test_determinism.py", "tests/test_ray_pool.py", "tests/test_quiet_logs.py",
        "tests/test_checkpoint_retention.py", "tests/test_visualize.py",
        "tests/test_trainer_conventions.py", "tests/test_slurm_status.py",
    ),
    "rl755/controller": (
        "tests/test_controller_training.py", "tests/test_controller_choice.py",
        "tests/test_controller_evaluation.py", "tests/test_dream_gap.py", "tests/test_controllers.py",
        "tests/test_dream_options.py", "tests/test_dream_ensemble.py",
        "tests/test_new_environment_errors.py", "tests/test_typed_results.py",
        "tests/test_trainer_conventions.py",
    ),
    "rl755/data": (
        "tests/test_rollout_datasets.py", "tests/test_encoded_datasets.py",
        "tests/test_encoder_encode.py",
        "tests/test_catalogue_docs.py", "tests/test_environment_entries.py",
        "tests/test_sequential_training.py",
    ),
    "rl755/data_gen": (
        "tests/test_collection_reports.py", "tests/test_rollouts.py", "tests/test_bad_shards.py",
        "tests/test_rollouts_ray.py", "tests/test_corrupted_shards.py",
        "tests/test_pickle_conversion.py",
        "tests/test_encoder_encode.py",
        "tests/test_typed_results.py", "tests/test_policies.py",
    ),
    "rl755/environments": (
        "tests/test_foundation.py", "tests/test_car_racing_render.py",
        "tests/test_environment_entries.py", "tests/test_environment_spaces.py",
        "tests/test_environments_more.py",
        "tests/test_new_environment_errors.py", "tests/test_catalogue.py",
    ),
    "rl755/evaluation": (
        "tests/test_world_model_eval.py", "tests/test_world_model_eval_script.py",
        "tests/test_evaluation_figures.py",
        "tests/test_retrieval.py", "tests/test_evaluation_parts.py",
    ),
    "rl755/models": (
        "tests/test_encoder.py", "tests/test_sequential_models.py", "tests/test_transformer_models.py",
        "tests/test_sequential_training.py", "tests/test_sequential_optimizer.py",
        "tests/test_sequential_devices.py", "tests/test_infilling.py", "tests/test_unet_gan.py",
        "tests/test_checkpoint_retention.py", "tests/test_registered_models.py",
        "tests/test_catalogue.py", "tests/test_trainer_conventions.py",
        "tests/test_retrieval.py", "tests/test_model_tables.py",
    ),
    "rl755/pipeline": (
        "tests/test_pipeline.py", "tests/test_determinism.py",
        "tests/test_pipeline_resources.py", "tests/test_recipes.py", "tests/test_recipe_script.py",
        "tests/test_pack.py",
        "tests/test_slurm_pipeline.py", "tests/test_pipeline_environment.py",
        "tests/test_pipeline_runners.py", "tests/test_recipe_runner.py",
        "tests/test_pipeline_outputs.py",
        "tests/test_pipeline_files.py",
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
# What the scratch copy's tests/conftest.py gets: mutmut wraps each mutated function in a
# trampoline taking (*args, **kwargs) (functools.wraps sets __wrapped__), and Keras reads a
# layer's __init__ with inspect.getfullargspec, which does not follow __wrapped__ (IndexError
# in keras Operation.__new__): the shim reads the original function. And a test's child
# processes (scripts, Ray workers), which import the instrumented copy, record their calls in
# mutmut's stats run (CHILD_STATS) and run the active mutant in the mutant runs.
CONFTEST_SHIM = """

# Added by scripts/dev/mutmut_copy.py in its scratch copy (mutmut's trampolines hide signatures).
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
CHILD_STATS = '''"""Written into a scratch copy by scripts/dev/mutmut_copy.py: in a child process of a
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
    "    import mutmut_child_stats  # noqa: F401  (scripts/dev/mutmut_copy.py)\n"
)
# Tests that fail on mutmut's instrumented copy with no mutant active (measured: every test of
# sample_tests() run there by plain pytest). mutmut needs a passing clean run, so its runs
# leave them out. The kinds: they read what the trampolines change (the caller's frame in a
# registration error, generated module text compared with the source, argument names), or
# run work in Ray workers or subprocesses, which then failed looking for mutmut's config. The
# list was measured before child processes got CONFTEST_SHIM's recording, the fork server and
# the copy on PYTHONPATH: some of those may pass now (test_small_runs_stay_in_this_process
# did, in the copies of both packages that run it, and left; so did test_ray_pool.py's two,
# in rl755/common's copy). Each is a test a mutant here cannot reach; fewer is better.
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
    "tests/test_recipes.py::test_tiny_doom_recipe_runs_every_step_and_a_rerun_skips_them",
    "tests/test_registered_models.py::test_evaluate_world_model_scores_every_model_beside_the_mdn_rnn",
    "tests/test_sequential_devices.py::test_two_devices_give_the_same_losses_as_one",
    "tests/test_shipped_models.py::test_script_ships_and_refuses_clearly",
    "tests/test_world_model_eval_script.py::test_script_end_to_end_writes_json_table_and_pictures",
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


# Seconds a mutant run gets beyond its tests' own time, before the x15 (mutmut's default: 1).
TIMEOUT_CONSTANT = 30


def mutmut_config(package: str, tests: tuple[str, ...]) -> str:
    """setup.cfg's [mutmut] section: mutate `package`, select `tests`, no real SLURM jobs."""
    lines = [
        "[mutmut]",
        "source_paths = rl755/",
        # mutmut runs the tests in mutants/: what they read beside rl755/ and tests/
        "also_copy =",
        *[f"    {p}" for p in ALSO_COPY],
        f"only_mutate = {package if package.endswith('.py') else package + '/*'}",
        # Each mutant's tests run in a process forked from a server that has only collected
        # the tests: forked from mutmut's own process, which ran TensorFlow while recording,
        # a child hangs at its first TensorFlow op (the runtime's threads do not survive fork).
        "process_isolation = forkserver",
        # A mutant's time limit is (its tests' time in the stats run + this) x 15 wall seconds.
        # The stats run timed each test inside one warm process; a forked child starts its
        # first TensorFlow test cold (eager context, tracing, XLA), which with mutmut's default
        # of 1 s gave a 21 s limit to a test of 0.4 s: a "timeout" that said nothing.
        f"timeout_constant = {TIMEOUT_CONSTANT}",
        "pytest_add_cli_args_test_selection =",
        *[f"    {t}" for t in tests],
        "pytest_add_cli_args =",
        *[f"    {a}" for a in ("-p", "no:cacheprovider", "-q", "-m", "not slurm", "-x")],
        *[f"    --deselect={t}" for t in INSTRUMENTED_DESELECT],
    ]
    return "\n".join(lines) + "\n"


# Tests a whole-of-rl755 sample runs: every test file except those that read the source text
# (mutmut's copy has trampolines in every function: line counts, layering) or check the
# repository's documents, notebooks and CI rather than rl755/ (and take long).
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
