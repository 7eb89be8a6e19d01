"""CMA-ES training in-process: improvement, exact resume, starting parameters, dream mode,
the covariance choice, checkpoints and the seeds of each generation."""

import dataclasses
import json
import os

import numpy as np
import pytest
from controller_helpers import evals_of, exact_spec, small

from rl755.common import tensorboard
from rl755.controller import saved
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_train import PoolConfig, run_cma_es
from rl755.controller.evaluate import score_controller
from rl755.environments import Environments
from rl755.testing.fake_world_model import FakeLatentEncoder

ENV = Environments.FAKE_PIXELS


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
    last = evals_of(out, "best_member")[-1]["mean"]
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


# ---- what is saved, and on which seeds (each checked against a replay) -------------------------


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
