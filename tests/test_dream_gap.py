"""dream_gap: a controller and simple policies in the dream and the real game, the end rates by
part of an episode, the dream-only mode, and the script's flags and bad input."""

import os

import numpy as np
import pytest
from controller_helpers import exact_spec

from rl755.environments import Environments

ENV = Environments.FAKE_PIXELS


def test_dream_gap_of_an_exact_model_is_small_and_scores_the_controller(tmp_path):
    from rl755.controller.dream_gap import measure_dream_gap
    from rl755.controller.dream_gap_report import format_table

    spec = exact_spec()
    agent = spec.build()
    params = np.random.default_rng(0).normal(0, 0.5, agent.num_params)
    gap = measure_dream_gap(spec, params, temperature=1.0, num_episodes=12, seed=5)
    names = set(gap["policies"])
    # FAKE_PIXELS is continuous: center, each dimension's two ends, random, the controller.
    assert names == {"random", "constant:center", "controller"} | {
        f"constant:a{d}_{end}" for d in range(3) for end in ("low", "high")
    }
    for name, v in gap["policies"].items():
        assert v["dream"]["steps_mean"] > 0 and v["real"]["steps_mean"] > 0
        if name != "random":  # same actions both ways: the model is exact up to quantization
            assert abs(v["dream"]["mean"] - v["real"]["mean"]) < 1.5, (name, v)
    # Steering hard to an edge ends episodes early in both worlds.
    assert gap["policies"]["constant:a0_low"]["real"]["steps_mean"] < 24
    # Where episodes end, by quarter of the step limit: the same in both worlds here.
    low = gap["policies"]["constant:a0_low"]
    assert [(w["from"], w["to"]) for w in low["real"]["end_rates"]] == [
        (0, 6),
        (6, 12),
        (12, 18),
        (18, 24),
    ]  # fmt: skip (FAKE_PIXELS' limit: 24 steps)
    assert gap["max_steps"] == 24
    for name, v in gap["policies"].items():
        if name.startswith("constant:"):  # the same actions: the same ends
            assert v["dream"]["end_rates"] == v["real"]["end_rates"], name
    table = format_table(gap)
    assert "constant:a0_high" in table and "controller" in table
    ends = table.split("Episode ends per 100 steps lived, dream / real, by part of the episode:")
    header = ends[1].split("\n")[1].split()
    assert len(ends) == 2 and header == ["policy", "0-6", "6-12", "12-18", "18-24"]
    cells = [f"{w['per_100_steps']:.2f}" for w in low["dream"]["end_rates"]]
    row = next(r for r in ends[1].split("\n") if r.startswith("constant:a0_low "))
    assert row.split()[1:] == [x for c in cells for x in (c, "/", c)]


def test_dream_gap_without_the_real_side_plays_the_same_dreams_and_no_real_episode(
    tmp_path, monkeypatch
):
    from rl755.controller import dream_gap as lib
    from rl755.controller import dream_gap_report as report

    spec = exact_spec()
    params = np.random.default_rng(0).normal(0, 0.5, spec.build().num_params)
    both = lib.measure_dream_gap(spec, params, temperature=1.0, num_episodes=6, seed=5)

    def no_real(*a, **k):
        raise AssertionError("a real episode was played")

    monkeypatch.setattr(lib, "policy_returns", no_real)
    monkeypatch.setattr(lib, "play_controller", no_real)
    only = lib.measure_dream_gap(spec, params, temperature=1.0, num_episodes=6, seed=5, real=False)
    assert only["real"] is False and both["real"] is True
    assert set(only["policies"]) == set(both["policies"])
    for name, v in only["policies"].items():
        assert v["real"] is None and v["ratio"] is None, name
        assert v["dream"] == both["policies"][name]["dream"], name
        steps = v["dream"]["steps"]
        assert len(steps) == 6 and np.mean(steps) == v["dream"]["steps_mean"], name
        assert v["dream"]["end_rates"] == report.end_rates(steps, 24), name
    table = report.format_table(only).split("\n")
    row = next(r for r in table if r.startswith("controller "))
    d = only["policies"]["controller"]["dream"]
    assert row.split() == ["controller", f"{d['mean']:.1f}", "+-", f"{d['std']:.1f}", "-", "-"]
    ends = [r for r in table if r.startswith("controller ")][1].split()[1:]
    assert ends == [x for w in d["end_rates"] for x in (f"{w['per_100_steps']:.2f}", "/", "-")]


def test_end_rates_are_ends_per_100_steps_lived_in_each_part():
    from rl755.controller.dream_gap_report import end_rates

    # Lengths 10, 20, 25 end; the two of 40 were cut at the limit and did not end.
    rates = end_rates([10, 20, 40, 40, 25], 40)
    assert [(w["from"], w["to"], w["alive"], w["ended"]) for w in rates] == [
        (0, 10, 5, 1), (10, 20, 4, 1), (20, 30, 3, 1), (30, 40, 2, 0)
    ]  # fmt: skip
    # lived: 5 x 10; 4 x 10; 10 + 10 + 5; 2 x 10
    assert [w["per_100_steps"] for w in rates] == [2.0, 2.5, 4.0, 0.0]
    assert end_rates([3, 3], 8, windows=2)[1] == {
        "from": 4, "to": 8, "alive": 0, "ended": 0, "per_100_steps": 0.0
    }  # fmt: skip
    with pytest.raises(ValueError, match="max_steps must be >= 4"):
        end_rates([1], 3)


def test_dream_gap_script_fails_fast_on_bad_input(tmp_path):
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts/models/dream_gap.py")

    def run(*args):
        return subprocess.run(
            [sys.executable, script, "--environment=FAKE_PIXELS", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    out = run("--encoder=raw_rollout_vae_4ld", "--sequential_model=mdn_rnn_vae_4ld")
    assert out.returncode != 0 and "pass --out_dir" in out.stderr
    out = run("--encoder=nope", "--sequential_model=mdn_rnn_vae_4ld", f"--out_dir={tmp_path}")
    assert out.returncode != 0 and "raw_rollout_vae_4ld" in out.stderr  # lists the valid names
    out = run(f"--model_dir={tmp_path / 'missing'}")
    assert out.returncode != 0 and "missing" in out.stderr


def test_dream_gap_script_passes_noreal_and_prints_what_it_measured(tmp_path):
    """The script's flags reach the library (here --noreal and --done_prob_scale, the library
    replaced by a stand-in) and it prints the title and table of what it returns."""
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts/models/dream_gap.py")
    stand_in = f"""
import json, runpy, sys
import rl755.controller.dream_gap as lib
def dream_gap(**kw):
    print("GOT", json.dumps({{k: kw[k] for k in ("real", "done_prob_scale", "num_episodes")}}))
    return {{"environment": "FAKE_PIXELS", "sequential_model": "m", "temperature": 1.0,
            "num_episodes": 3, "dream_ensemble": [], "dream_disagreement_penalty": 0.0,
            "real": kw["real"], "out_dir": "/o", "policies": {{"random": {{
                "dream": {{"mean": 2.0, "std": 0.5}}, "real": None, "ratio": None}}}}}}
lib.dream_gap = dream_gap
sys.argv = [{script!r}, "--environment=FAKE_PIXELS", "--model_dir=/c", "--noreal",
            "--done_prob_scale=1.5", "--num_episodes=3"]
runpy.run_path({script!r}, run_name="__main__")
"""
    out = subprocess.run(
        [sys.executable, "-c", stand_in], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == 'GOT {"real": false, "done_prob_scale": 1.5, "num_episodes": 3}'
    assert lines[1].startswith("FAKE_PIXELS, m, temperature 1, the dream only, 3 episodes")
    assert lines[3].split() == ["random", "2.0", "+-", "0.5", "-", "-"]
    assert lines[-1] == "Wrote /o/dream_gap.json"
