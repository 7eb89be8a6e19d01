"""What a CMA-ES run evaluates and keeps: evaluations every --eval_every generations, the final
choice on new seeds, the saved controller, and the bookkeeping a user reads (TensorBoard, summary).
"""

import dataclasses
import json
import os

import numpy as np
import pytest
from controller_helpers import evals_of, exact_spec, small

from rl755.common import tensorboard
from rl755.controller import saved
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_train import run_cma_es
from rl755.environments import Environments
from rl755.testing.fake_world_model import FakeLatentEncoder

ENV = Environments.FAKE_PIXELS


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
    last = evals_of(out, "cma_mean")[-1]
    np.testing.assert_allclose(
        last["params"], cma_state.load_state(str(tmp_path / "c2"))["es"].mean
    )
    assert _replay(spec, last["params"], seeds) == pytest.approx(last["mean"])
    member = evals_of(out, "best_member")[-1]
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
        want = [(e["generation"], e["mean"]) for e in evals_of(out, candidate)]
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
        for e in evals_of(out, "best_member")
    ]
    np.testing.assert_allclose(np.array(gap), np.array(want), rtol=1e-5, atol=1e-5)
