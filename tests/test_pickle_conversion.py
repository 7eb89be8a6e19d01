"""Pickle-to-TFRecord conversion: killed conversions leave nothing corrupted and resume, other
plans and foreign shards are refused, bad input fails fast with advice."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from rollout_helpers import read_shards, run_script

from rl755.common import sharded_io
from rl755.common.errors import BadInput
from rl755.data_gen import collect, convert, corrupted
from rl755.data_gen.pickles import list_pickles, load_rollouts

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts", "data_gen")


def _pickle_dir(tmp_path, n):
    pdir = str(tmp_path / "pickles")
    collect.collect_rollouts(
        "FAKE_PIXELS", "RandomPolicy", num_rollouts=n, parallelism=1, max_steps=24,
        out_dir=pdir, seed=9, progress=False,
    )  # fmt: skip
    return pdir


def test_failed_conversion_leaves_nothing_corrupted_and_rerun_resumes(tmp_path, monkeypatch):
    pdir, out = _pickle_dir(tmp_path, 6), str(tmp_path / "tfr")
    real = convert.convert_shard
    calls = []

    def failing(*args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt("simulated kill between shards")
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(convert, "convert_shard", failing)
    kw = dict(pickles_per_tfrecord_file=1, validation_fraction=0.0, progress=False)
    with pytest.raises(KeyboardInterrupt):
        convert.convert_pickles_to_tfrecords(pdir, out, **kw)
    done = sharded_io.list_shards(f"{out}/*.tfrecord-*")
    assert done == sorted(calls)
    assert corrupted.find_corrupted_tfrecords(f"{out}/*.tfrecord-*", False)[0] == []
    mtimes = {f: os.stat(f).st_mtime_ns for f in done}
    monkeypatch.setattr(convert, "convert_shard", real)
    s = convert.convert_pickles_to_tfrecords(pdir, out, **kw)
    assert s["skipped"] == 2 and s["written"] == 4
    assert {f: os.stat(f).st_mtime_ns for f in done} == mtimes
    assert len(read_shards(sharded_io.list_shards(f"{out}/*.tfrecord-*"))) == 6


def test_sigkilled_conversion_leaves_nothing_corrupted_and_rerun_resumes(tmp_path):
    pdir, out = _pickle_dir(tmp_path, 8), str(tmp_path / "tfr")
    driver = tmp_path / "slow_convert.py"
    driver.write_text(textwrap.dedent(f"""
        import time
        from rl755.data_gen import convert
        real = convert.convert_shard
        def slow(*a, **k):
            out = real(*a, **k)
            time.sleep(0.4)
            return out
        convert.convert_shard = slow
        convert.convert_pickles_to_tfrecords({pdir!r}, {out!r}, pickles_per_tfrecord_file=1,
                                             validation_fraction=0.0, progress=False)
    """))  # fmt: skip
    proc = subprocess.Popen([sys.executable, str(driver)], env=dict(os.environ), cwd=REPO)
    deadline = time.time() + 120
    while len(sharded_io.list_shards(f"{out}/*.tfrecord-*")) < 2:
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = sharded_io.list_shards(f"{out}/*.tfrecord-*")
    assert 2 <= len(done) < 8
    assert corrupted.find_corrupted_tfrecords(f"{out}/*.tfrecord-*", False)[0] == []
    mtimes = {f: os.stat(f).st_mtime_ns for f in done}
    # What the killed process was writing, had it been mid-shard (its name carries the pid).
    leftover = sharded_io.tmp_path_for(os.path.join(out, "rollouts-train.tfrecord-00007-of-00008"))
    leftover = leftover.replace(f"-{os.getpid()}-", f"-{proc.pid}-")
    with open(leftover, "wb") as f:
        f.write(b"half a shard")
    os.utime(leftover, (time.time() - 180,) * 2)  # written before the kill, minutes ago
    s = convert.convert_pickles_to_tfrecords(
        pdir, out, pickles_per_tfrecord_file=1, validation_fraction=0.0, progress=False
    )
    assert not os.path.exists(leftover)  # the rerun cleaned up after the killed run
    assert not [n for n in os.listdir(out) if sharded_io.is_tmp_path(n)]
    assert s["skipped"] == len(done) and s["written"] == 8 - len(done)
    assert {f: os.stat(f).st_mtime_ns for f in done} == mtimes
    assert len(read_shards(sharded_io.list_shards(f"{out}/*.tfrecord-*"))) == 8


def test_conversion_refuses_to_mix_with_other_plans(tmp_path):
    pdir, out = _pickle_dir(tmp_path, 3), str(tmp_path / "tfr")
    convert.convert_pickles_to_tfrecords(pdir, out, pickles_per_tfrecord_file=1, progress=False)
    with pytest.raises(BadInput, match="other arguments"):
        convert.convert_pickles_to_tfrecords(pdir, out, pickles_per_tfrecord_file=2, progress=False)


def test_conversion_script_and_its_original_path_take_the_same_flags(tmp_path):
    pdir = _pickle_dir(tmp_path, 2)
    for script in ("convert_pickles_to_tfrecords.py", "car_racing/rollout_pickles_to_tfrecords.py"):
        out = str(tmp_path / script.replace("/", "_"))
        res = run_script(
            os.path.join(SCRIPTS, script), f"--pickle_dir={pdir}", f"--out_dir={out}",
            "--pickles_per_tfrecord_file=1", "--validation_fraction=0.5", "--compression=ZLIB",
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
        assert len(read_shards(sharded_io.list_shards(f"{out}/*.tfrecord-*"))) == 2
        assert sharded_io.list_shards(f"{out}/rollouts-validation.tfrecord-*")
    bad = run_script(os.path.join(SCRIPTS, "car_racing", "rollout_pickles_to_tfrecords.py"))
    assert bad.returncode != 0 and "pickle_dir" in bad.stderr


def test_bad_conversion_inputs_fail_fast_with_advice(tmp_path):
    out = str(tmp_path / "out")
    with pytest.raises(BadInput, match="does not exist.*collect_rollouts"):
        convert.convert_pickles_to_tfrecords(str(tmp_path / "nope"), out, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BadInput, match="holds no \\*.pickle files.*Collect rollouts first"):
        convert.convert_pickles_to_tfrecords(str(empty), out, progress=False)
    pdir = _pickle_dir(tmp_path, 2)
    with pytest.raises(BadInput, match="pickles_per_tfrecord_file must be a positive"):
        convert.convert_pickles_to_tfrecords(pdir, out, pickles_per_tfrecord_file=0, progress=False)
    with pytest.raises(BadInput, match="parallelism must be a positive"):
        convert.convert_pickles_to_tfrecords(pdir, out, parallelism=-1, progress=False)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BadInput, match="is a file; pass a directory"):
        convert.convert_pickles_to_tfrecords(pdir, str(afile), progress=False)
    good = list_pickles(pdir)[0]
    cases = {
        "dict.pickle": pickle.dumps({"a": 1}),
        "ints.pickle": pickle.dumps([1, 2, 3]),
        "rollout.pickle": pickle.dumps(load_rollouts(good)[0]),
        "truncated.pickle": open(good, "rb").read()[:-100],
        "text.pickle": b"hello.",
    }
    for name, data in cases.items():
        bad_dir = tmp_path / f"bad_{name}"
        bad_dir.mkdir()
        (bad_dir / "a.pickle").write_bytes(open(good, "rb").read())
        (bad_dir / name).write_bytes(data)
        with pytest.raises(BadInput, match=f"{name} is not a pickled list of Rollouts"):
            convert.convert_pickles_to_tfrecords(str(bad_dir), out + name, progress=False)
        assert not os.path.exists(out + name) or not os.listdir(out + name)


def test_a_pickle_of_other_things_is_refused_saying_what_it_holds(tmp_path):
    path = tmp_path / "x.pickle"
    for data, kind in (({"a": 1}, "dict"), ([1, 2], "a list of other things"), ([], "a list of other things")):  # fmt: skip
        path.write_bytes(pickle.dumps(data))
        with pytest.raises(BadInput) as info:
            load_rollouts(str(path))
        assert str(info.value) == (
            f"{path} holds {kind}, not a non-empty list of rl755.common.structs.Rollout. "
            "Remove it from the pickle dir (or regenerate it with collect_rollouts.py)."
        )


@pytest.mark.parametrize("stray", [3, 4])
def test_shards_of_another_conversion_are_refused_naming_three(tmp_path, stray):
    pdir, out = _pickle_dir(tmp_path, 2), tmp_path / "tfr"
    out.mkdir()
    names = [f"rollouts-train.tfrecord-{i:05d}-of-00009" for i in range(stray)]
    for name in names:
        (out / name).write_bytes(b"")
    with pytest.raises(BadInput) as info:
        convert.convert_pickles_to_tfrecords(pdir, str(out), progress=False)
    more = ", ..." if stray > 3 else ""
    assert str(info.value) == (
        f"{out} already holds shards named 'rollouts' from another conversion "
        f"({', '.join(names[:3])}{more}). Pass another --out_dir or --out_name, or delete them."
    )
