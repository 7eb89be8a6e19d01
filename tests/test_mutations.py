"""The mutation list (scripts/dev/mutations/*.toml) still applies to the code, the runner never
touches the working tree, and the generated-mutant runs (scripts/dev/generated_mutants.py)
draw, score and select tests as documented."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def mutate():
    spec = importlib.util.spec_from_file_location(
        "rl755_mutate", os.path.join(REPO, "scripts", "dev", "mutate.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(mutate):
    """scripts/dev/generated_mutants.py, as mutate.py imports it."""
    return sys.modules["generated_mutants"]


def test_every_mutation_applies_once_and_names_existing_tests(mutate):
    mutations = mutate.load_mutations()
    tables = sum(
        open(os.path.join(mutate.MUTATIONS_DIR, n)).read().splitlines().count("[[mutation]]")
        for n in os.listdir(mutate.MUTATIONS_DIR)
        if n.endswith(".toml")
    )
    assert len(mutations) == tables >= 186
    assert mutate.check_all_apply(mutations) == []


def test_the_list_is_read_from_every_toml_file_and_a_malformed_entry_names_its_file(
    mutate, tmp_path
):
    entry = (
        "[[mutation]]\nname = '{n}'\nfile = 'lib.py'\nold = 'a'\nnew = 'b'\n"
        "tests = ['tests/t.py', 'tests/u.py']\nwhat = 'w'\n"
    )
    (tmp_path / "b.toml").write_text(entry.format(n="second"))
    (tmp_path / "a.toml").write_text(entry.format(n="first") + entry.format(n="also_first"))
    (tmp_path / "notes.txt").write_text("not a list")
    got = mutate.load_mutations(str(tmp_path))
    assert [m.name for m in got] == ["first", "also_first", "second"]
    assert got[0] == mutate.Mutation("first", "lib.py", "a", "b", ("tests/t.py", "tests/u.py"), "w")
    (tmp_path / "c.toml").write_text(entry.format(n="bad").replace("what", "why"))
    with pytest.raises(ValueError, match=r"c\.toml: mutation 1 \(bad\)"):
        mutate.load_mutations(str(tmp_path))
    (tmp_path / "c.toml").write_text("[[mutation]\nname = 'broken'\n")
    with pytest.raises(ValueError, match=r"c\.toml is not valid TOML"):
        mutate.load_mutations(str(tmp_path))


def test_apply_refuses_text_that_is_not_there_once(mutate):
    m = mutate.Mutation("x", "f.py", "a = 1", "a = 2", ("tests/t.py",), "what")
    assert mutate.apply("a = 1\n", m) == "a = 2\n"
    for text in ("b = 1\n", "a = 1\na = 1\n"):
        with pytest.raises(ValueError, match="update its entry in scripts/dev/mutations/"):
            mutate.apply(text, m)


def test_a_run_reports_killed_and_survived_and_restores_nothing_in_place(mutate, tmp_path):
    """Two mutations of a scratch repository: one its test notices, one it does not."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "lib.py").write_text(
        "def double(x):\n    return 2 * x\n\n\ndef name():\n    return 'a'\n"
    )
    (repo / "tests" / "test_lib.py").write_text(
        "from lib import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    )
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    copy = mutate.scratch_copy(str(repo))
    try:
        assert sorted(os.listdir(copy)) == ["lib.py", "tests"]
        status, _ = mutate.run_tests(copy, ("tests/test_lib.py",), timeout=120)
        assert mutate.verdict(status) == "survived"  # unmutated: passes
        path = os.path.join(copy, "lib.py")
        original = open(path).read()
        open(path, "w").write(original.replace("2 * x", "3 * x"))
        status, _ = mutate.run_tests(copy, ("tests/test_lib.py",), timeout=120)
        assert mutate.verdict(status) == "killed"
    finally:
        import shutil

        shutil.rmtree(copy)
    assert "2 * x" in (repo / "lib.py").read_text()


def test_two_jobs_run_each_mutation_in_a_copy_of_its_own_and_keep_the_order(mutate, tmp_path):
    """`run_mutations` over two scratch copies: every mutation's verdict is its own (the other
    copy's mutant never leaks in), rows come back in the list's order, copies are restored, and
    an entry that cannot run is reported as an error without losing the others."""
    import shutil
    import subprocess

    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "lib.py").write_text("def double(x):\n    return 2 * x\n\n\nNAME = 'a'\n")
    (repo / "tests" / "test_lib.py").write_text(
        "import time\n\nfrom lib import double\n\n\n"
        "def test_double():\n    time.sleep(0.5)\n    assert double(3) == 6\n"
    )
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    tests = ("tests/test_lib.py",)
    mutations = [
        mutate.Mutation("kills", "lib.py", "2 * x", "3 * x", tests, "doubles wrongly"),
        mutate.Mutation("survives", "lib.py", "NAME = 'a'", "NAME = 'b'", tests, "untested"),
        mutate.Mutation("kills_too", "lib.py", "2 * x", "x + 1", tests, "adds one"),
        mutate.Mutation("survives_too", "lib.py", "NAME = 'a'", "NAME = 'c'", tests, "untested"),
        mutate.Mutation("no_such_file", "gone.py", "a", "b", tests, "an entry that breaks"),
    ]
    copies = [mutate.scratch_copy(str(repo)) for _ in range(2)]
    try:
        rows = mutate.run_mutations(mutations, copies, timeout=120)
        for copy in copies:
            assert open(os.path.join(copy, "lib.py")).read() == (repo / "lib.py").read_text()
    finally:
        for copy in copies:
            shutil.rmtree(copy)
    assert [m.name for m, _, _ in rows] == [m.name for m in mutations]
    verdicts = [verdict for _, verdict, _ in rows]
    assert verdicts[:4] == ["killed", "survived", "killed", "survived"]
    assert verdicts[4].startswith("error (FileNotFoundError")  # reported, the others kept


# ---- generated mutants: the per-package sample -------------------------------------------------
def test_a_sample_draws_the_same_mutants_per_package_for_a_seed(generated):
    by_file = {
        "rl755/zoo/ship.py": [f"rl755.zoo.ship.x_f__mutmut_{i}" for i in range(1, 9)],
        "rl755/zoo/pull.py": [f"rl755.zoo.pull.x_g__mutmut_{i}" for i in range(1, 5)],
        "rl755/data/registry.py": [f"rl755.data.registry.x_h__mutmut_{i}" for i in range(1, 3)],
        "rl755/visualize.py": [f"rl755.visualize.x_k__mutmut_{i}" for i in range(1, 7)],
    }
    chosen = generated.draw_sample(by_file, per_package=3, seed=5)
    assert chosen == generated.draw_sample(by_file, per_package=3, seed=5)
    assert chosen != generated.draw_sample(by_file, per_package=3, seed=6)
    packages = [
        generated.package_of(p) for p, names in by_file.items() for n in names if n in chosen
    ]
    # 3 from each package that has 3, both of the package that has only 2
    assert sorted(packages) == sorted(
        ["rl755/zoo"] * 3 + ["rl755/data"] * 2 + ["rl755/visualize.py"] * 3
    )
    assert len(set(chosen)) == len(chosen)


def test_a_sample_scores_each_package_apart_with_its_interval(generated):
    results = {
        "rl755/zoo/ship.py": {"a1": "killed", "a2": "survived", "a3": "timeout", "a4": "killed"},
        "rl755/zoo/pull.py": {"b1": "no tests", "b2": "not checked"},
        "rl755/data/registry.py": {"c1": "killed", "c2": "survived"},
    }
    chosen = ["a1", "a2", "a3", "b1", "b2", "c1", "c2"]  # a4 not sampled
    table, survivors, scores = generated.sample_table(
        results, chosen, equivalent={"c2": "unread-field"}
    )
    rows = {r.split("|")[1].strip(): [x.strip() for x in r.split("|")[2:-1]]
            for r in table.splitlines()[2:]}  # fmt: skip
    # sampled, killed, of which timed out, survived, no tests, equivalent, not run, score, interval
    assert rows["rl755/zoo"][:8] == ["5", "2", "1", "1", "1", "0", "1", "50%"]
    assert rows["rl755/data"][:8] == ["2", "1", "0", "0", "0", "1", "0", "100%"]
    assert survivors == ["a2", "b1"]  # c2 is equivalent, b2 never ran
    assert scores == {"rl755/zoo": 50.0, "rl755/data": 100.0}
    low, high = generated.wilson(2, 4)
    assert rows["rl755/zoo"][8] == f"{low:.0f}-{high:.0f}%"
    assert 10 < low < 20 and 80 < high < 90  # 2 of 4: a wide interval
    assert generated.wilson(0, 0) == (0.0, 100.0)


def test_every_equivalent_mutant_names_a_known_kind(generated):
    assert isinstance(generated.load_equivalent(), dict)  # raises on a kind not in KINDS


def test_a_whole_sample_runs_no_test_that_reads_the_source_text(generated):
    tests = generated.sample_tests()
    assert "tests/test_layout.py" not in tests and "tests/test_policies.py" in tests
    assert all(os.path.isfile(os.path.join(REPO, t)) for t in generated.SAMPLE_SKIPS)


def test_every_test_left_out_of_instrumented_runs_exists(generated):
    for node in generated.INSTRUMENTED_DESELECT:
        path, name = node.split("::")
        with open(os.path.join(REPO, path)) as f:
            assert f"def {name}(" in f.read(), node
    config = generated.mutmut_config("rl755/zoo", ("tests/test_zoo.py",))
    assert f"--deselect={generated.INSTRUMENTED_DESELECT[0]}" in config
    assert "only_mutate = rl755/zoo/*" in config
    assert "process_isolation = forkserver" in config  # forked from mutmut's process, TF hangs
    # a child's first TensorFlow test starts cold: mutmut's 1 s constant timed out a 0.4 s test
    assert f"timeout_constant = {generated.TIMEOUT_CONSTANT}\n" in config
    assert generated.TIMEOUT_CONSTANT >= 30


def test_every_package_of_rl755_names_existing_tests_of_its_own(generated):
    """`make mutate PACKAGE=...` runs a package's own tests, not the whole suite: every package
    (directory or module directly under rl755/) has an entry, each naming existing files."""
    packages = {
        f"rl755/{n}" for n in os.listdir(os.path.join(REPO, "rl755"))
        if not n.startswith(("_", ".")) and (n.endswith(".py") or "." not in n)
    }  # fmt: skip
    assert packages and all(generated.is_package(p) for p in packages)
    assert set(generated.PACKAGE_TESTS) == packages
    for tests in generated.PACKAGE_TESTS.values():
        assert all(os.path.isfile(os.path.join(REPO, t)) for t in tests), tests
    assert not generated.is_package("rl755/nope") and not generated.is_package("rl755/zoo/ship.py")
    assert not generated.is_package("rl755/models/sequential")  # a subpackage scores in its package
    assert not generated.is_package("tests") and not generated.is_package("rl755")
    config = generated.mutmut_config(
        "rl755/visualize.py", generated.PACKAGE_TESTS["rl755/visualize.py"]
    )
    assert "only_mutate = rl755/visualize.py\n" in config


def test_a_resumed_sample_runs_only_the_sampled_mutants_without_a_verdict(generated):
    results = {
        "rl755/zoo/ship.py": {"a1": "killed", "a2": "not checked", "a3": "survived"},
        "rl755/data/registry.py": {"c1": "not checked", "c2": "not checked"},
    }
    assert generated.not_run_yet(results, ["a1", "a2", "a3", "c2"]) == ["a2", "c2"]


def test_a_child_process_records_each_instrumented_call_once_for_the_stats_run(generated, tmp_path):
    """In mutmut's stats run a test's child processes (scripts, workers) report the functions
    they call through files the test's process reads: each name once per child."""
    (tmp_path / "mutmut_child_stats.py").write_text(generated.CHILD_STATS)
    hits = tmp_path / "hits"
    hits.mkdir()
    code = (
        "import mutmut_child_stats\n"
        "import mutmut.mutation.trampoline as t\n"
        "assert t.get_mutant_under_test() == 'stats'\n"
        "for name in ('rl755.a.x_f', 'rl755.a.x_g', 'rl755.a.x_f'):\n"
        "    t.record_trampoline_hit(name)\n"
    )
    env = dict(os.environ, MUTMUT_CHILD_HITS=str(hits), PYTHONPATH=str(tmp_path))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    (written,) = os.listdir(hits)
    assert (hits / written).read_text().split() == ["rl755.a.x_f", "rl755.a.x_g"]
    assert "mutmut_child_stats.py" in generated.mutmut_config("rl755/zoo", ())
    assert "MUTANT_UNDER_TEST" in generated.CHILD_HOOK and "stats-child" in generated.CONFTEST_SHIM


def test_every_python_process_of_a_mutant_run_imports_the_mutated_copy(generated, tmp_path):
    """A stage script a test starts (and the scripts it starts) must run the mutants: the
    runs put the copy's mutants/ first on PYTHONPATH, before the venv's checkout."""
    env = generated.run_env(str(tmp_path))
    assert env["PYTHONPATH"] == os.path.join(str(tmp_path), "mutants")
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_a_time_limited_mutant_run_leaves_no_process_behind(generated, tmp_path, monkeypatch):
    """At the limit the run's test processes go too (a forked test left running would hold a
    core for as long as its test takes)."""
    import stat
    import time

    pid_file = tmp_path / "grandchild.pid"
    fake = tmp_path / "mutmut"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nsleep 300\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(generated, "MUTMUT", str(fake))
    remark = generated.mutmut_run(str(tmp_path), dict(os.environ), 1, time_limit=1)
    assert "stopped at the 1 s limit" in remark
    pid = int(pid_file.read_text())
    time.sleep(0.2)
    try:  # gone, or dead and not yet reaped by init (a zombie: state Z)
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        pass
