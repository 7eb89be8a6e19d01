"""CMA-ES training: improvement, exact resume, dream mode, evaluation outputs (in-process)."""

import dataclasses
import json
import os

import numpy as np
import pytest

from rl755.common import tensorboard
from rl755.controller import saved
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_train import CmaConfig, PoolConfig, run_cma_es
from rl755.controller.evaluate import evaluate_controller, score_controller
from rl755.environments import Environments
from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

ENV = Environments.FAKE_PIXELS


def exact_spec(controller="LinearController", **kw):
    return AgentSpec(
        ENV.name,
        controller,
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel,
        encoder_name="FakeLatentEncoder",
        sequential_model_name="FakeDynamicsModel",
        **kw,
    )


def small(**kw):
    args = dict(
        mode="real",
        population_size=8,
        trials_per_member=3,
        generations=6,
        rollout_max_steps=24,
        sigma=0.5,
        seed=3,
        eval_every=0,
    )
    args.update(kw)
    return CmaConfig(**args)


def test_cma_improves_a_controller(tmp_path):
    """V-only controller on the analytic encoder's z = [x, speed] (9 parameters), so a few
    small generations suffice; the composed z + h path trains in the tests below."""
    spec = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    cfg = small(sigma=1.0, seed=0, eval_every=6, eval_episodes=8)
    out = run_cma_es(spec, str(tmp_path / "c"), cfg)
    means = [h["mean"] for h in out["history"]]
    assert np.mean(means[-3:]) > means[0] + 2.0, means
    # The zero controller (no steering) on the same evaluation seeds, for reference.
    zero = score_controller(
        np.zeros(9), spec, num_episodes=8, seed=0, out_dir=str(tmp_path / "zero")
    )
    from rl755.controller.cma_config import eval_seeds
    from rl755.controller.real_eval import RealEvaluator

    seeds = eval_seeds(cfg.seed, cfg.eval_episodes)
    base = RealEvaluator(spec, ENV.make_fn()).evaluate(np.zeros((8, 9)), seeds, 24)["returns"]
    last = _of(out, "best_member")[-1]["mean"]
    assert last > np.mean(base) + 4.0, (out["evals"], base, zero["mean"])
    d = tmp_path / "c"
    for name in (
        "model-006.json",
        "model-006.cma.pkl",
        "model-006.params.npz",
        "controller.json",
        "controller_params.npy",
        "learning_curve.png",
        "summary.json",
    ):
        assert (d / name).exists(), name
    assert not [p for p in os.listdir(d) if ".tmp-" in p]
    trained = saved.load_trained_controller(str(d))
    assert trained.meta["score_source"] == "real_evaluation"
    assert trained.params.shape == (trained.controller.num_params,) == (9,)
    assert not (d / "model-003.json").exists()  # only the newest 3 (--keep_checkpoints)
    assert (d / "model-004.json").exists()
    assert {"fitness/mean", "fitness/best", "fitness/worst", "perf/env_steps_per_second"} <= set(
        tensorboard.read_dir(d / "tensorboard" / "train")
    )
    assert "eval/real_mean" in tensorboard.read_dir(d / "tensorboard" / "validation")


def test_rerun_resumes_generation_count_and_cma_state_exactly(tmp_path):
    whole = run_cma_es(exact_spec(), str(tmp_path / "whole"), small(generations=4))
    first = run_cma_es(exact_spec(), str(tmp_path / "split"), small(generations=2))
    assert first["generation"] == 2
    again = run_cma_es(exact_spec(), str(tmp_path / "split"), small(generations=2))
    assert again["generation"] == 2 and len(again["history"]) == 2  # nothing redone
    resumed = run_cma_es(exact_spec(), str(tmp_path / "split"), small(generations=4))
    assert resumed["generation"] == 4
    assert [h["generation"] for h in resumed["history"]] == [1, 2, 3, 4]
    assert [h["mean"] for h in resumed["history"]] == [h["mean"] for h in whole["history"]]
    np.testing.assert_array_equal(resumed["es"].mean, whole["es"].mean)
    assert resumed["es"].sigma == whole["es"].sigma
    assert resumed["es"].countiter == whole["es"].countiter == 4
    # The covariance and the eigen decomposition sampling uses, bit for bit.
    for name in ("C", "B", "D"):
        np.testing.assert_array_equal(
            getattr(resumed["es"].sm, name), getattr(whole["es"].sm, name)
        )
    np.testing.assert_array_equal(resumed["es"].pc, whole["es"].pc)
    # The best-so-far survives the resume: the whole run's best is generation 2's (16.46), and
    # generations 3-4 score less, so a resume that forgot it would save generation 4's.
    assert [h["best"] for h in whole["history"]][1] == max(h["best"] for h in whole["history"])
    assert resumed["best_fitness"] == whole["best_fitness"]
    np.testing.assert_array_equal(resumed["best_params"], whole["best_params"])
    kept = saved.load_trained_controller(str(tmp_path / "split"))
    reference = saved.load_trained_controller(str(tmp_path / "whole"))
    assert kept.meta == reference.meta and kept.meta["generation"] == 2
    np.testing.assert_array_equal(kept.params, reference.params)


def test_generations_do_not_depend_on_numpy_global_random_state(tmp_path, monkeypatch):
    """Generation g draws from a generator seeded by (seed, g), whatever else in the process
    draws from numpy's global RandomState between generations. cma's sampler keeps the randn
    it was built with (the global one); with it, a resumed run drew from the copy its
    checkpoint had pickled and left the uninterrupted run a generation or two later."""
    from rl755.controller import cma_state

    plain = run_cma_es(exact_spec(), str(tmp_path / "plain"), small(generations=3))
    save_state = cma_state.save_state

    def save_and_draw(*args, **kwargs):
        np.random.randn(7)  # e.g. a library drawing from the global stream
        return save_state(*args, **kwargs)

    monkeypatch.setattr(cma_state, "save_state", save_and_draw)
    drawn = run_cma_es(exact_spec(), str(tmp_path / "drawn"), small(generations=3))
    assert [h["mean"] for h in drawn["history"]] == [h["mean"] for h in plain["history"]]
    np.testing.assert_array_equal(drawn["es"].mean, plain["es"].mean)


def test_final_selection_replays_the_best_evaluated_candidates_on_new_seeds(tmp_path):
    """--select_episodes: the top evaluated candidates play more episodes on seeds no
    evaluation used, and the best of them on those is the saved controller."""
    from rl755.controller.cma_config import eval_seeds, selection_seeds
    from rl755.controller.cma_state import SELECTION
    from rl755.controller.real_eval import RealEvaluator

    spec = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    d = tmp_path / "s"
    cfg = small(sigma=1.0, seed=0, generations=3, eval_every=1, eval_episodes=2)
    plain = run_cma_es(spec, str(d), cfg)
    assert plain["selection"] is None and not (d / SELECTION).exists()
    assert saved.load_trained_controller(str(d)).meta["score_source"] == "real_evaluation"

    select = dataclasses.replace(cfg, select_episodes=6, select_top=3)
    out = run_cma_es(spec, str(d), select)  # a finished run: only the selection is added
    assert len(out["history"]) == 3
    selection = json.loads((d / SELECTION).read_text())
    top = sorted(plain["evals"], key=lambda e: e["mean"], reverse=True)[:3]
    assert [(c["generation"], c["candidate"]) for c in selection["candidates"]] == [
        (e["generation"], e["candidate"]) for e in top
    ]
    seeds = selection_seeds(select.seed, 6)
    assert selection["seeds"] == seeds.tolist()
    assert not set(seeds.tolist()) & set(eval_seeds(select.seed, 2).tolist())
    real = RealEvaluator(spec, ENV.make_fn())
    for c, e in zip(selection["candidates"], top):
        replay = real.evaluate(np.repeat(e["params"][None], 6, axis=0), seeds, 24)["returns"]
        np.testing.assert_allclose(c["returns"], replay)
        assert c["eval_mean"] == e["mean"]
    best = max(selection["candidates"], key=lambda c: c["mean"])
    (chosen,) = [
        e
        for e in top
        if (e["generation"], e["candidate"]) == (best["generation"], best["candidate"])
    ]
    trained = saved.load_trained_controller(str(d))
    assert trained.meta["score_source"] == "selection" and trained.meta["score"] == best["mean"]
    np.testing.assert_array_equal(trained.params, chosen["params"])

    written = os.stat(d / SELECTION).st_mtime_ns
    run_cma_es(spec, str(d), select)  # the same command again: nothing replayed
    assert os.stat(d / SELECTION).st_mtime_ns == written
    more = run_cma_es(spec, str(d), dataclasses.replace(select, generations=4))
    assert more["selection"]["generation"] == 4  # a resumed run selects again at its end
    assert json.loads((d / SELECTION).read_text())["generation"] == 4
    with pytest.raises(ValueError, match="--eval_every"):
        small(select_episodes=4).validate()


def test_the_selection_outranks_the_evaluations_only_at_its_generation():
    """What is saved when the selection's best is not the evaluations' best, and once the
    run has gone on past the selection."""
    evals = [
        {"generation": g, "candidate": c, "mean": m, "params": np.full(2, p)}
        for g, c, m, p in ((5, "best_member", 700.0, 1.0), (10, "cma_mean", 650.0, 2.0))
    ]
    selection = {
        "generation": 10,
        "candidates": [
            {"generation": 5, "candidate": "best_member", "mean": 600.0},
            {"generation": 10, "candidate": "cma_mean", "mean": 640.0},
        ],
    }
    ckpt = {"generation": 10, "evals": evals, "selection": selection}
    params, score, source, generation = saved.select_params(ckpt)
    assert (params.tolist(), score, source, generation) == ([2.0, 2.0], 640.0, "selection", 10)
    params, score, source, _ = saved.select_params(dict(ckpt, generation=11))
    assert (params.tolist(), score, source) == ([1.0, 1.0], 700.0, "real_evaluation")


def test_initial_params_start_cma_at_a_trained_controller(tmp_path):
    """--initial_params: a new run's CMA-ES mean starts at a trained controller's parameters
    (going on from a shipped controller on a new machine), so its first generation already
    plays as well as the controller it starts from; a resumed run keeps its own mean."""
    spec = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    trained = run_cma_es(spec, str(tmp_path / "a"), small(sigma=1.0, seed=0, generations=6))
    params = np.load(tmp_path / "a" / saved.PARAMS_FILE)
    fresh = run_cma_es(spec, str(tmp_path / "b"), small(sigma=0.05, seed=1, generations=1))
    cfg = small(sigma=0.05, seed=1, generations=1, initial_params=str(tmp_path / "a"))
    warm = run_cma_es(spec, str(tmp_path / "c"), cfg)
    np.testing.assert_array_equal(warm["es"].x0, params)
    assert warm["history"][0]["mean"] > fresh["history"][0]["mean"] + 2.0, (
        warm["history"],
        fresh["history"],
        trained["history"][-1],
    )
    meta = json.loads((tmp_path / "c" / saved.META_FILE).read_text())
    assert meta["initial_params"] == str(tmp_path / "a")
    # Resuming ignores it: the checkpoint's mean goes on (another start would be refused
    # silently otherwise).
    other = cfg.__class__(**{**dataclasses.asdict(cfg), "generations": 2})
    other.initial_params = str(tmp_path / "b" / saved.PARAMS_FILE)
    again = run_cma_es(spec, str(tmp_path / "c"), other)
    assert [h["mean"] for h in again["history"][:1]] == [warm["history"][0]["mean"]]
    np.testing.assert_array_equal(again["es"].x0, params)


def test_initial_params_of_another_shape_fail_naming_the_file(tmp_path):
    run_cma_es(exact_spec(), str(tmp_path / "a"), small(generations=1))  # 21 parameters
    v_only = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    cfg = small(generations=1, initial_params=str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"a/controller.json has input_size=.*same shape"):
        run_cma_es(v_only, str(tmp_path / "b"), cfg)
    np.save(tmp_path / "p.npy", np.zeros(5))
    cfg = small(generations=1, initial_params=str(tmp_path / "p.npy"))
    with pytest.raises(ValueError, match=r"p.npy holds \(5,\) parameters.*\(9,\)"):
        run_cma_es(v_only, str(tmp_path / "c"), cfg)
    cfg = small(generations=1, initial_params=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere: no controller_params.npy"):
        run_cma_es(v_only, str(tmp_path / "d"), cfg)
    assert not (tmp_path / "d" / saved.PARAMS_FILE).exists()


def test_old_format_checkpoint_is_not_resumed(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "checkpoint.pkl").write_bytes(b"old")
    with pytest.raises(ValueError, match="old format.*another --model_dir"):
        run_cma_es(exact_spec(), str(tmp_path / "c"), small(generations=1))


def test_resume_with_another_controller_fails_naming_both_sizes(tmp_path):
    run_cma_es(exact_spec(), str(tmp_path / "c"), small(generations=1))
    with pytest.raises(ValueError, match="LinearController with 21 .* HiddenLayerController with"):
        run_cma_es(
            exact_spec("HiddenLayerController", controller_kwargs=(("hidden_units", 2),)),
            str(tmp_path / "c"),
            small(generations=2),
        )


def test_dream_mode_trains_inside_the_model_and_logs_the_gap(tmp_path):
    out = run_cma_es(
        exact_spec(),
        str(tmp_path / "d"),
        small(mode="dream", generations=6, eval_every=3, eval_episodes=4, dream_initial_states=8),
    )
    assert out["generation"] == 6 and len(out["evals"]) == 4  # best member + CMA mean, twice
    assert out["history"][-1]["mean"] > out["history"][0]["mean"]
    meta = json.loads((tmp_path / "d" / "controller.json").read_text())
    assert meta["mode"] == "dream" and meta["temperature"] == 1.0  # what dream_gap.py reads
    tb = tmp_path / "d" / "tensorboard"
    assert "perf/dream_steps_per_second" in tensorboard.read_dir(tb / "train")
    assert {"eval/dream_to_real_gap", "eval/real_mean"} <= set(
        tensorboard.read_dir(tb / "validation")
    )


def test_dream_mode_needs_a_sequential_model(tmp_path):
    spec = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    with pytest.raises(ValueError, match="dream needs an --encoder and a --sequential_model"):
        run_cma_es(spec, str(tmp_path / "x"), small(mode="dream"))
    with pytest.raises(ValueError, match="mode"):
        run_cma_es(spec, str(tmp_path / "x"), small(mode="imagined"))


def test_score_controller_writes_json_and_gif(tmp_path):
    spec = exact_spec()
    params = np.zeros(21)
    params[0] = -4.0  # steer against x - centre... x_hat's weight on steering
    params[18] = 2.0  # bias: steer right from x = 0 ... together: steer towards 0.5
    res = score_controller(
        params, spec, num_episodes=5, seed=7, out_dir=str(tmp_path / "e"), compare_random=True
    )
    data = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    assert data["seeds"] == [7, 8, 9, 10, 11] and len(data["returns"]) == 5
    assert data["mean"] == pytest.approx(np.mean(data["returns"]))
    assert data["mean"] > data["random_policy"]["mean"] == res["random_policy"]["mean"]
    import imageio.v2 as imageio

    frames = imageio.mimread(str(tmp_path / "e" / "episode.gif"))
    # (GIF writers merge identical consecutive frames, adding up their durations.)
    assert 1 <= len(frames) <= data["steps"][0] + 1 and frames[0].shape[:2] == (16, 16)


def test_evaluate_script_library_on_a_pixel_controller(tmp_path):
    """--encoder=none --sequential_model=none (controller on pixels) through the same code the
    scripts run: train 1 generation, then evaluate_controller from the saved files."""
    from rl755.controller.cma_train import train_controller

    train_controller(
        environment="FAKE_PIXELS",
        model_dir=str(tmp_path / "c"),
        cma_config=small(generations=1, population_size=4, trials_per_member=1),
        pool=PoolConfig(parallelism=0),
        run_flags={"x": 1},
    )
    assert os.listdir(tmp_path / "c" / "runs")
    res = evaluate_controller(
        controller_dir=str(tmp_path / "c"), environment="FAKE_PIXELS", num_episodes=2, seed=0
    )
    assert res["encoder"] == "none" and len(res["returns"]) == 2
    assert res["out_dir"] == str(tmp_path / "c" / "evaluation")  # the default
    assert (tmp_path / "c" / "evaluation" / "episode.gif").exists()
    assert (tmp_path / "c" / "evaluation" / "evaluation.json").exists()
    with pytest.raises(ValueError, match="FAKE_PIXELS, not CAR_RACING"):
        evaluate_controller(
            controller_dir=str(tmp_path / "c"),
            environment="CAR_RACING",
            num_episodes=1,
            seed=0,
            out_dir=str(tmp_path / "e2"),
        )


def test_registered_controllers_load_by_name(tmp_path):
    from rl755.common import config
    from rl755.controller.cma_train import train_controller
    from rl755.models.fake import saved_models

    with pytest.raises(FileNotFoundError, match="train_controller.py --environment=FAKE_PIXELS"):
        saved_models.linear_controller_vae()
    model_dir = str(config.env_models_dir("fake") / "linear_controller_vae")
    train_controller(
        environment="FAKE_PIXELS",
        model_dir=model_dir,
        cma_config=small(generations=1, population_size=4, trials_per_member=1),
        pool=PoolConfig(parallelism=0),
    )
    assert saved_models.linear_controller_vae().params.shape == (768 * 3 + 3,)
    res = evaluate_controller(
        saved_controller="linear_controller_vae",
        environment="FAKE_PIXELS",
        num_episodes=1,
        seed=0,
        out_dir=str(tmp_path / "e"),
    )
    assert res["controller_dir"] == model_dir
    with pytest.raises(LookupError, match="linear_controller_vae"):
        evaluate_controller(
            saved_controller="nope",
            environment="FAKE_PIXELS",
            num_episodes=1,
            seed=0,
            out_dir=str(tmp_path / "e"),
        )


def test_large_controllers_use_diagonal_cma(tmp_path, monkeypatch, caplog):
    from rl755.controller import cma_state

    monkeypatch.setattr(cma_state, "FULL_COVARIANCE_MAX_PARAMS", 20)
    with caplog.at_level("INFO", logger="rl755.controller"):
        out = run_cma_es(exact_spec(), str(tmp_path / "c"), small(generations=1))
    assert out["es"].opts["CMA_diagonal"] is True  # 21 parameters > 20
    assert "21 parameters > 20: diagonal (separable) CMA-ES" in caplog.text
    meta = json.loads((tmp_path / "c" / "controller.json").read_text())
    assert meta["cma_covariance"] == "diagonal"
    small_out = run_cma_es(
        AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder),
        str(tmp_path / "v"),
        small(generations=1),
    )
    assert small_out["es"].opts["CMA_diagonal"] in (False, "0*100*N/popsize**0.5")
    assert json.loads((tmp_path / "v" / "controller.json").read_text())["cma_covariance"] == "full"


def _checkpoint_bytes(model_dir, generation):
    return sum(
        os.path.getsize(os.path.join(model_dir, f"model-{generation:03d}{suffix}"))
        for suffix in (".json", ".cma.pkl", ".params.npz")
    )


def test_checkpoints_hold_what_a_resume_needs_and_no_more(tmp_path, monkeypatch):
    """Full covariance: C once (8 N^2 bytes), not its eigenvectors too. Diagonal: O(P N)."""
    from rl755.controller import cma_state

    # 1,003 parameters: (z 2 + h 4) x 100 + 100 biases, 100 x 3 + 3.
    hidden = exact_spec("HiddenLayerController", controller_kwargs=(("hidden_units", 100),))
    out = run_cma_es(hidden, str(tmp_path / "full"), small(generations=2, trials_per_member=1))
    n = out["es"].N
    assert out["es"].opts["CMA_diagonal"] in (False, "0*100*N/popsize**0.5") and n > 500
    size = _checkpoint_bytes(tmp_path / "full", 2)
    assert 8 * n * n < size < 1.15 * 8 * n * n + 200_000, (size, 8 * n * n)
    monkeypatch.setattr(cma_state, "FULL_COVARIANCE_MAX_PARAMS", 500)
    out = run_cma_es(hidden, str(tmp_path / "diag"), small(generations=2, trials_per_member=1))
    size = _checkpoint_bytes(tmp_path / "diag", 2)
    assert size < 40 * 8 * n + 100_000, size  # population 8: [P, N] arrays, a few N vectors


def test_diagonal_cma_resumes_exactly(tmp_path, monkeypatch):
    from rl755.controller import cma_state

    monkeypatch.setattr(cma_state, "FULL_COVARIANCE_MAX_PARAMS", 20)
    whole = run_cma_es(exact_spec(), str(tmp_path / "whole"), small(generations=3))
    run_cma_es(exact_spec(), str(tmp_path / "split"), small(generations=1))
    resumed = run_cma_es(exact_spec(), str(tmp_path / "split"), small(generations=3))
    assert [h["mean"] for h in resumed["history"]] == [h["mean"] for h in whole["history"]]
    np.testing.assert_array_equal(resumed["es"].mean, whole["es"].mean)
    np.testing.assert_array_equal(resumed["es"].sigma_vec.scaling, whole["es"].sigma_vec.scaling)


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


def test_collect_rollouts_with_a_trained_controller(tmp_path, monkeypatch):
    """--policy=controller: stage 1 with a trained controller, exploring, into TFRecords."""
    from rl755.common.errors import BadInput
    from rl755.controller.cma_train import train_controller
    from rl755.data_gen import collect

    ctrl = str(tmp_path / "c")
    train_controller(
        environment="FAKE_PIXELS",
        model_dir=ctrl,
        cma_config=small(generations=1, population_size=4, trials_per_member=1),
        pool=PoolConfig(parallelism=0),
    )
    kw = dict(num_rollouts=3, parallelism=1, max_steps=24, progress=False, seed=4)
    builds = []
    build = AgentSpec.build
    monkeypatch.setattr(AgentSpec, "build", lambda *a, **k: builds.append(1) or build(*a, **k))
    out = collect.collect_rollouts(
        "FAKE_PIXELS", "controller", out_dir=str(tmp_path / "r"), out_format="tfrecord",
        controller_dir=ctrl, random_action_prob=0.25, rollouts_per_shard=1, **kw,
    )  # fmt: skip
    assert out["rollouts"] == 3 and out["frames"] > 0
    # The networks load twice (the flags' check, then the worker), not once per task (3).
    assert len(builds) == 2
    # The run plays the parameters it loaded, whatever is written into the directory later.
    from rl755.policies.learned import controller_policy

    policy_fn = controller_policy(ENV, ctrl)
    params = np.load(os.path.join(ctrl, "controller_params.npy"))
    np.save(os.path.join(ctrl, "controller_params.npy"), params + 1.0)
    np.testing.assert_array_equal(policy_fn().params, np.float32(params))
    np.save(os.path.join(ctrl, "controller_params.npy"), params)
    # Another exploration rate is another set of rollouts, not a resumed one.
    again = collect.collect_rollouts(
        "FAKE_PIXELS", "controller", out_dir=str(tmp_path / "r2"), out_format="tfrecord",
        controller_dir=ctrl, random_action_prob=0.0, **kw,
    )  # fmt: skip
    assert again["tag"] != out["tag"]
    with pytest.raises(BadInput, match="needs --controller_dir"):
        collect.collect_rollouts("FAKE_PIXELS", "controller", **kw)
    with pytest.raises(BadInput, match="need --policy=controller"):
        collect.collect_rollouts("FAKE_PIXELS", "RandomPolicy", controller_dir=ctrl, **kw)
    with pytest.raises(BadInput, match="not --environment=CAR_RACING"):
        collect.collect_rollouts("CAR_RACING", "controller", controller_dir=ctrl, **kw)
    with pytest.raises(BadInput, match="--controller_dir="):
        collect.collect_rollouts(
            "FAKE_PIXELS", "controller", controller_dir=str(tmp_path / "nope"), **kw
        )
    with pytest.raises(BadInput, match="Or --policy=controller"):
        collect.collect_rollouts("FAKE_PIXELS", "NoSuchPolicy", **kw)


# ---- what is saved, and on which seeds (each checked against a replay) -------------------------
def _selection_run(tmp_path, eval_every):
    """Seed 2: the best real evaluation (of 6: best member and CMA mean, 3 times) is neither
    the first nor the last, and the best training fitness is reached in neither the first nor
    the last generation, so neither "first" nor "last" is the best."""
    spec = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    cfg = small(population_size=6, trials_per_member=2, sigma=1.0, seed=2)
    cfg.eval_every, cfg.eval_episodes = eval_every, 3
    out = run_cma_es(spec, str(tmp_path / f"c{eval_every}"), cfg)
    return spec, cfg, out, saved.load_trained_controller(str(tmp_path / f"c{eval_every}"))


def _replay(spec, params, seeds, max_steps=24):
    from rl755.controller.real_eval import RealEvaluator

    jobs = np.repeat(np.asarray(params)[None], len(seeds), axis=0)
    return np.mean(RealEvaluator(spec, ENV.make_fn()).evaluate(jobs, seeds, max_steps)["returns"])


def _of(out, candidate):
    """The run's evaluations of one candidate ("best_member" or "cma_mean")."""
    return [e for e in out["evals"] if e["candidate"] == candidate]


def test_a_run_evaluates_every_eval_every_generations_and_at_its_end(tmp_path):
    """--eval_every=2 over 5 generations evaluates after 2, 4 and 5: the last generation is
    always evaluated, so a run's final controller is among the candidates it can save."""
    spec = AgentSpec(ENV.name, "LinearController", encoder_fn=FakeLatentEncoder)
    cfg = small(population_size=4, trials_per_member=1, generations=5, eval_every=2)
    cfg.eval_episodes = 2
    out = run_cma_es(spec, str(tmp_path / "c"), cfg)
    assert [(e["generation"], e["candidate"]) for e in out["evals"]] == [
        (g, c) for g in (2, 4, 5) for c in ("best_member", "cma_mean")
    ]


def test_the_saved_controller_is_the_best_real_evaluation(tmp_path, caplog):
    from rl755.controller import cma_state
    from rl755.controller.cma_config import eval_seeds

    with caplog.at_level("INFO", logger="rl755.controller"):
        spec, cfg, out, trained = _selection_run(tmp_path, eval_every=2)  # evaluates 3 times
    for e in out["evals"]:  # each evaluation's score is in the log
        name = e["candidate"].replace("_", " ")
        line = f"Generation {e['generation']}: {name} scores {e['mean']:.2f} +- {e['std']:.2f}"
        assert f"{line} over 3 real episodes." in caplog.text
    assert [(e["generation"], e["candidate"]) for e in out["evals"]] == [
        (g, c) for g in (2, 4, 6) for c in ("best_member", "cma_mean")
    ]
    means = [e["mean"] for e in out["evals"]]
    best = int(np.argmax(means))
    assert best not in (0, len(means) - 1) and len(set(means)) == len(means), means
    np.testing.assert_array_equal(trained.params, out["evals"][best]["params"])
    assert trained.meta["score_source"] == "real_evaluation"
    assert trained.meta["score"] == means[best]
    assert trained.meta["generation"] == out["evals"][best]["generation"]
    # The recorded score is what these parameters play on the fixed evaluation seeds.
    seeds = eval_seeds(cfg.seed, 3)
    assert _replay(spec, trained.params, seeds) == pytest.approx(means[best])
    # The "cma_mean" candidate is the CMA-ES mean after its generation, and plays its score.
    last = _of(out, "cma_mean")[-1]
    np.testing.assert_allclose(
        last["params"], cma_state.load_state(str(tmp_path / "c2"))["es"].mean
    )
    assert _replay(spec, last["params"], seeds) == pytest.approx(last["mean"])
    member = _of(out, "best_member")[-1]
    assert not np.allclose(member["params"], last["params"])


def test_without_evaluations_the_best_training_member_is_saved(tmp_path):
    """Its fitness is what it plays on its generation's trial seeds, shared by all members."""
    from rl755.controller.cma_config import trial_seeds

    spec, cfg, out, trained = _selection_run(tmp_path, eval_every=0)
    bests = [h["best"] for h in out["history"]]
    gen = int(np.argmax(bests)) + 1
    assert gen not in (1, cfg.generations), bests
    assert trained.meta["score_source"] == "training_fitness"
    assert trained.meta["score"] == max(bests) == out["best_fitness"]
    assert trained.meta["generation"] == gen
    seeds = trial_seeds(cfg.seed, gen - 1, cfg.trials_per_member)
    assert _replay(spec, trained.params, seeds) == pytest.approx(max(bests))


def test_bookkeeping_matches_the_history(tmp_path):
    """summary.json, TensorBoard and the CMA-ES checkpoint say what the run did, by value."""
    spec, cfg, out, _ = _selection_run(tmp_path, eval_every=2)
    d = tmp_path / "c2"
    summary = json.loads((d / "summary.json").read_text())
    assert summary["generation"] == 6 and summary["best_fitness"] == out["best_fitness"]
    assert summary["history"] == out["history"]
    assert [e["mean"] for e in summary["evals"]] == [e["mean"] for e in out["evals"]]
    train = tensorboard.read_dir(d / "tensorboard" / "train")
    for key, field in (("fitness/mean", "mean"), ("fitness/best", "best"), ("cma/sigma", "sigma")):
        want = [(h["generation"], h[field]) for h in out["history"]]
        np.testing.assert_allclose(np.array(train[key]), np.array(want), rtol=1e-6)
    for h in out["history"]:
        assert h["worst"] <= h["mean"] <= h["best"]
        assert h["steps"] == pytest.approx(h["steps_per_s"] * h["seconds"], rel=1e-6)
    validation = tensorboard.read_dir(d / "tensorboard" / "validation")
    for key, candidate in (
        ("eval/real_mean", "best_member"),
        ("eval/cma_mean_real_mean", "cma_mean"),
    ):
        want = [(e["generation"], e["mean"]) for e in _of(out, candidate)]
        np.testing.assert_allclose(np.array(validation[key]), np.array(want), rtol=1e-6)
    from rl755.controller import cma_state

    state = cma_state.load_state(str(d))
    assert state["generation"] == 6 and state["history"] == out["history"]
    np.testing.assert_array_equal(state["best_params"], out["best_params"])
    # The compute a learning curve is drawn against counts the evaluations' real steps: those
    # the two candidates play on the evaluation seeds (replayed), after generations 2, 4, 6.
    from rl755.controller.cma_config import eval_seeds
    from rl755.controller.real_eval import RealEvaluator

    replay = RealEvaluator(spec, ENV.make_fn())
    for h in out["history"]:
        evals = [e for e in out["evals"] if e["generation"] == h["generation"]]
        if not evals:
            assert "eval_steps" not in h
            continue
        jobs = np.repeat(np.stack([e["params"] for e in evals]), 3, axis=0)
        played = replay.evaluate(jobs, np.tile(eval_seeds(cfg.seed, 3), 2), 24)["steps"]
        assert h["eval_steps"] == int(np.sum(played)) and h["eval_seconds"] > 0
    steps, hours = cma_state.compute_used(out["history"])
    assert steps[-1] == sum(h["steps"] + h.get("eval_steps", 0) for h in out["history"])
    assert hours[-1] * 3600 == pytest.approx(
        sum(h["seconds"] + h.get("eval_seconds", 0) for h in out["history"])
    )


def test_dream_to_real_gap_is_dream_fitness_minus_real_score(tmp_path):
    out = run_cma_es(
        exact_spec(),
        str(tmp_path / "d"),
        small(mode="dream", generations=2, eval_every=1, eval_episodes=3, dream_initial_states=8),
    )
    gap = tensorboard.read_dir(tmp_path / "d" / "tensorboard" / "validation")[
        "eval/dream_to_real_gap"
    ]
    want = [
        (e["generation"], out["history"][e["generation"] - 1]["best"] - e["mean"])
        for e in _of(out, "best_member")
    ]
    np.testing.assert_allclose(np.array(gap), np.array(want), rtol=1e-5, atol=1e-5)


def test_compare_random_plays_the_controllers_seeds(tmp_path):
    """The random baseline of evaluation.json: uniform actions, sampler seeded with each
    episode's seed, on exactly the seeds the controller played (replayed here by hand)."""
    res = score_controller(
        np.zeros(21), exact_spec(), num_episodes=3, seed=40, out_dir=str(tmp_path / "e"),
        compare_random=True,
    )  # fmt: skip
    assert res["seeds"] == [40, 41, 42]

    def by_hand(seeds):
        env, returns = ENV.make(), []
        for s in seeds:
            env.reset(seed=s)
            env.action_space.seed(s)
            total = 0.0
            for _ in range(res["max_steps"]):
                _, r, terminated, truncated, _ = env.step(env.action_space.sample())
                total += r
                if terminated or truncated:
                    break
            returns.append(total)
        return returns

    assert res["random_policy"]["returns"] == pytest.approx(by_hand([40, 41, 42]), abs=1e-9)
    assert by_hand([40, 41, 42]) != pytest.approx(by_hand([41, 42, 43]))  # seeds matter here
    data = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    assert data["random_policy"]["mean"] == pytest.approx(np.mean(by_hand([40, 41, 42])))
    assert data["std"] == pytest.approx(np.std(data["returns"]))


def test_evaluation_json_holds_the_episodes_played_on_its_seeds(tmp_path):
    """evaluation.json: episode i is the controller's rollout of seed `seed + i` cut at
    max_steps (6, below the environment's 24), the random baseline plays the same seeds and
    limit, and std is the population std (ddof 0); all replayed here by hand."""
    from rl755.data_gen import episodes
    from rl755.policies.learned import WorldModelPolicy

    spec = exact_spec()
    params = np.random.default_rng(5).normal(0, 1, 21).astype(np.float32)
    score_controller(
        params, spec, num_episodes=3, seed=40, max_steps=6, envs_at_once=2,
        out_dir=str(tmp_path / "e"), compare_random=True,
    )  # fmt: skip
    data = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    assert data["seeds"] == [40, 41, 42] and data["max_steps"] == 6

    def controller_by_hand(seeds):
        policy = WorldModelPolicy(spec, params)
        return [episodes.single_rollout(ENV.make_fn(), policy, max_steps=6, seed=s) for s in seeds]

    want = controller_by_hand([40, 41, 42])
    assert data["returns"] == pytest.approx([sum(r.reward_l) for r in want], abs=1e-5)
    assert data["steps"] == [len(r) for r in want] and max(data["steps"]) == 6
    other = controller_by_hand([41, 42, 43])
    assert [sum(r.reward_l) for r in other] != pytest.approx(data["returns"], abs=1e-3)
    assert data["mean"] == pytest.approx(np.mean(data["returns"]))
    assert data["std"] == pytest.approx(np.std(data["returns"], ddof=0))

    env, returns, steps = ENV.make(), [], []
    for s in [40, 41, 42]:
        env.reset(seed=s)
        env.action_space.seed(s)
        total, n = 0.0, 0
        for _ in range(6):
            _, r, terminated, truncated, _ = env.step(env.action_space.sample())
            total, n = total + r, n + 1
            if terminated or truncated:
                break
        returns.append(total)
        steps.append(n)
    assert data["random_policy"]["returns"] == pytest.approx(returns, abs=1e-9)
    assert data["random_policy"]["steps"] == steps

    import imageio.v2 as imageio

    # episode.gif is episode 0 (seed 40), from its reset frame on.
    first = imageio.mimread(str(tmp_path / "e" / "episode.gif"))[0][..., :3]
    np.testing.assert_array_equal(first, ENV.make().reset(seed=40)[0])
    assert not np.array_equal(first, ENV.make().reset(seed=41)[0])


def test_each_generation_plays_its_trial_seeds_with_members_drawn_at_sigma(tmp_path):
    """Generation g's P x T jobs: member m (T copies) is CMA-ES's m-th sample from x0 = 0 with
    step size --sigma, and every member plays trial_seeds(seed, g, T), new each generation."""
    import cma

    from rl755.controller import cma_state
    from rl755.controller.cma_config import derived_seeds, trial_seeds
    from rl755.controller.real_eval import RealEvaluator

    class Recording(RealEvaluator):
        def evaluate(self, params, seeds, max_steps):
            calls.append((np.array(params), np.array(seeds), max_steps))
            return super().evaluate(params, seeds, max_steps)

    calls = []
    spec, cfg = exact_spec(), small(generations=3, sigma=0.7)
    real = Recording(spec, ENV.make_fn(), parallelism=0)
    try:
        out = run_cma_es(spec, str(tmp_path / "c"), cfg, real_evaluator=real)
    finally:
        real.close()
    assert len(calls) == cfg.generations
    for g, (jobs, seeds, max_steps) in enumerate(calls):
        want = trial_seeds(cfg.seed, g, cfg.trials_per_member)
        np.testing.assert_array_equal(seeds, np.tile(want, cfg.population_size))
        assert max_steps == cfg.rollout_max_steps
        for t in range(1, cfg.trials_per_member):
            np.testing.assert_array_equal(
                jobs[t :: cfg.trials_per_member], jobs[:: cfg.trials_per_member]
            )
    assert len({tuple(trial_seeds(cfg.seed, g, 3)) for g in range(3)}) == 3

    ref = cma.CMAEvolutionStrategy(
        np.zeros(21), 0.7, {"popsize": cfg.population_size, "seed": cfg.seed + 1, "verbose": -9}
    )
    cma_state.seed_generation(ref, int(derived_seeds(cfg.seed, 4, 0, n=1)[0]))
    np.testing.assert_allclose(
        calls[0][0][:: cfg.trials_per_member], np.asarray(ref.ask(), np.float32), rtol=1e-6
    )
    assert out["es"].sigma0 == 0.7


def test_full_covariance_up_to_and_including_the_limit():
    from rl755.controller import cma_state

    limit = cma_state.FULL_COVARIANCE_MAX_PARAMS
    kinds = [cma_state.covariance_kind(n) for n in (867, 1731, limit, limit + 1, 4913)]
    assert kinds == ["full", "full", "full", "diagonal", "diagonal"]


def test_pool_config_gives_every_setting_to_the_real_evaluator():
    import inspect

    from rl755.controller.real_eval import RealEvaluator

    pool = PoolConfig(parallelism=3, ray_address="auto", max_worker_failures=5)
    kwargs = pool.evaluator_kwargs()
    assert set(kwargs) <= set(inspect.signature(RealEvaluator).parameters)
    assert len(kwargs) == len(dataclasses.fields(PoolConfig))
    assert (kwargs["parallelism"], kwargs["ray_address"], kwargs["max_failures"]) == (3, "auto", 5)
