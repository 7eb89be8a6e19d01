"""Dreams in an ensemble of sequential models (rl755.controller.dream_eval): the reward is the
members' mean minus a penalty times their std, the episode-end probability their mean, and
each step's next z one member's sample; CMA-ES training records the ensemble and resumes only
with it (rl755.controller.cma_train)."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from dream_helpers import ScriptedModel

from rl755.controller import networks, resolve
from rl755.controller.agent import AgentSpec
from rl755.controller.cma_config import CmaConfig, derived_seeds, eval_seeds
from rl755.controller.cma_train import run_cma_es
from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
from rl755.environments import Environments
from rl755.testing.fake_world_model import FakeDynamicsModel, FakeLatentEncoder

ENV = Environments.FAKE_PIXELS


class ShiftedReward(FakeDynamicsModel):
    """The fake environment's exact dynamics, its reward shifted by `shift`."""

    def __init__(self, shift: float, **kwargs):
        super().__init__(**kwargs)
        self.shift = shift

    def sample_next(self, hidden, temperature=1.0, seed=None, z=None):
        out = super().sample_next(hidden, temperature, seed, z)
        return {**out, "reward": out["reward"] + self.shift}


class Latent(ScriptedModel):
    """z = (count, 0): reward z_t[0] each step, next z = z_t + (`drift`, 0), end
    probability `p`. Two members with drifts 0 and 1 count in z the steps whose next z came
    from the second."""

    def __init__(self, drift: float = 0.0, p: float = 0.0, z_size: int = 2, **kwargs):
        super().__init__(z_size=z_size, **kwargs)
        self.drift, self.p = drift, p

    def sample_next(self, hidden, temperature=1.0, seed=None, z=None):
        b = tf.shape(z)[0]
        step = tf.one_hot(tf.zeros([b], tf.int32), self.z_size) * self.drift
        return {"z": z + step, "reward": z[:, 0], "done_prob": tf.fill([b], self.p)}


class NoRewardHead(Latent):
    has_reward_head = property(lambda self: False)


def fake_dream(*ensemble, penalty=0.0, steps=30, episodes=6):
    controller = networks.make_controller("LinearController", 2 + 4, environment=ENV)
    z0 = np.stack([np.linspace(0.1, 0.9, episodes), np.full(episodes, 0.5)], 1)
    params = np.random.default_rng(0).normal(0, 0.5, (3, controller.num_params))
    dream = DreamEvaluator(
        FakeDynamicsModel(), controller, z0, steps, ensemble=ensemble, disagreement_penalty=penalty
    )
    return dream.evaluate(params, np.arange(episodes), seed=4)


def test_identical_members_dream_as_one_model():
    one = fake_dream()
    three = fake_dream(FakeDynamicsModel(), FakeDynamicsModel(), penalty=2.0)
    np.testing.assert_array_equal(three["steps"], one["steps"])
    np.testing.assert_allclose(three["returns"], one["returns"], rtol=1e-6)
    np.testing.assert_allclose(three["reward_std"], 0, atol=1e-7)
    assert np.all(one["reward_std"] == 0)
    assert len(np.unique(one["returns"])) > 3  # the parameters and starts matter


@pytest.mark.parametrize("penalty", [0.0, 1.0, 3.0])
def test_the_reward_is_the_members_mean_minus_the_penalty_times_their_std(penalty):
    one = fake_dream()
    two = fake_dream(ShiftedReward(0.5), penalty=penalty)  # rewards r and r + 0.5
    np.testing.assert_array_equal(two["steps"], one["steps"])
    np.testing.assert_allclose(two["reward_std"], 0.25, rtol=1e-6)  # population std of the two
    want = one["returns"] + two["steps"] * (0.25 - penalty * 0.25)
    np.testing.assert_allclose(two["returns"], want, rtol=1e-5, atol=1e-4)


def test_the_end_probability_is_the_members_mean():
    controller = networks.make_controller("LinearController", 2 + 1, environment=ENV)
    params = np.zeros((2, controller.num_params))

    def steps(threshold):
        dream = DreamEvaluator(
            Latent(p=0.0),
            controller,
            np.zeros((3, 2)),
            40,
            ensemble=(Latent(p=0.6),),
            done_threshold=threshold,
        )
        return dream.evaluate(params, np.arange(3), seed=1)["steps"]

    assert np.all(steps(0.25) == 1)  # mean 0.3 > 0.25 at once
    assert np.all(steps(0.35) == 40)  # 0.3 never exceeds 0.35 (0.6 alone would)


def test_each_step_keeps_the_next_z_of_a_member_drawn_at_random():
    controller = networks.make_controller("LinearController", 2 + 1, environment=ENV)
    params = np.zeros((1, controller.num_params))
    n, length = 64, 20

    def returns(*members, seed=7):
        dream = DreamEvaluator(
            members[0], controller, np.zeros((n, 2)), length, ensemble=members[1:]
        )
        return dream.evaluate(params, np.arange(n), seed=seed)["returns"][0]

    # The return sums z_t[0], the number of the first t steps whose z came from Latent(1).
    full = length * (length - 1) / 2
    np.testing.assert_allclose(returns(Latent(0.0)), 0.0)
    np.testing.assert_allclose(returns(Latent(1.0)), full)
    mixed = returns(Latent(0.0), Latent(1.0))
    assert 0.35 * full < mixed.mean() < 0.65 * full  # about half the steps each
    assert len(np.unique(mixed)) > 10  # drawn per episode and step
    np.testing.assert_array_equal(returns(Latent(0.0), Latent(1.0)), mixed)  # seeded
    assert not np.array_equal(returns(Latent(0.0), Latent(1.0), seed=8), mixed)


def test_members_must_share_the_representation_and_the_penalty_be_positive():
    controller = networks.make_controller("LinearController", 2 + 1, environment=ENV)
    with pytest.raises(ValueError, match="Ensemble member 1 has Z, A = \\(3, 3\\)"):
        DreamEvaluator(Latent(), controller, np.zeros((1, 2)), 5, ensemble=(Latent(z_size=3),))
    with pytest.raises(ValueError, match="disagreement_penalty must be >= 0"):
        DreamEvaluator(Latent(), controller, np.zeros((1, 2)), 5, disagreement_penalty=-1)
    with pytest.raises(ValueError, match="dream_disagreement_penalty must be >= 0"):
        CmaConfig(mode="dream", dream_disagreement_penalty=-0.5).validate()


def test_dream_training_plays_the_ensemble_records_it_and_resumes_only_with_it(tmp_path):
    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel,
        sequential_model_name="exact",
    )
    ensemble = {"shifted": lambda: ShiftedReward(0.5)}
    cfg = CmaConfig(
        mode="dream", population_size=4, trials_per_member=2, generations=2, sigma=0.5, seed=3,
        rollout_max_steps=16, eval_every=1, eval_episodes=3, dream_initial_states=8,
        eval_in="dream", dream_disagreement_penalty=0.5,
    )  # fmt: skip
    d = tmp_path / "c"
    out = run_cma_es(spec, str(d), cfg, dream_ensemble=ensemble)
    meta = json.loads((d / "controller.json").read_text())
    assert meta["dream_ensemble"] == ["shifted"] and meta["dream_disagreement_penalty"] == 0.5
    # Each generation records how much the members' rewards differed (0.5 apart: std 0.25).
    np.testing.assert_allclose([h["reward_std"] for h in out["history"]], 0.25, rtol=1e-5)

    # The evaluations played the ensemble's dream, not the single model's.
    encoder, seq = spec.build_models()
    controller = spec.build_controller(encoder, seq)
    z0 = encoded_initial_states(
        ENV.make_fn(),
        lambda f: encoder.compute_full_representation(f)[0].numpy(),
        derived_seeds(cfg.seed, 3, n=8),
    )
    seeds = eval_seeds(cfg.seed, 3)

    def replay(params, *members, penalty=0.0):
        dream = DreamEvaluator(
            seq, controller, z0, 16, ensemble=members, disagreement_penalty=penalty
        )
        return dream.evaluate(params[None], seeds % 8, seed=int(seeds[0]))["returns"][0].mean()

    for e in out["evals"]:
        want = replay(e["params"], ShiftedReward(0.5), penalty=0.5)
        np.testing.assert_allclose(e["mean"], want, rtol=1e-5)
        assert abs(e["mean"] - replay(e["params"])) > 0.1

    more = dataclasses.replace(cfg, generations=3)
    with pytest.raises(ValueError, match="dream_ensemble=\\['shifted'\\].*keep the same dream"):
        run_cma_es(spec, str(d), dataclasses.replace(more, dream_disagreement_penalty=0.0))
    with pytest.raises(ValueError, match="dream_disagreement_penalty=0.5.*keep the same dream"):
        run_cma_es(
            spec, str(d), dataclasses.replace(more, dream_disagreement_penalty=1.0),
            dream_ensemble=ensemble,
        )  # fmt: skip
    assert run_cma_es(spec, str(d), more, dream_ensemble=ensemble)["generation"] == 3
    with pytest.raises(ValueError, match="needs --mode=dream"):
        run_cma_es(spec, str(tmp_path / "r"), CmaConfig(mode="real"), dream_ensemble=ensemble)
    with pytest.raises(ValueError, match="give --dream_ensemble or --dream_ensemble_dirs too"):
        run_cma_es(spec, str(tmp_path / "p"), cfg)  # a penalty without an ensemble
    no_reward = {"headless": lambda: NoRewardHead()}
    with pytest.raises(ValueError, match="reward head; headless has none"):
        run_cma_es(spec, str(tmp_path / "h"), cfg, dream_ensemble=no_reward)


def test_ensemble_members_are_looked_up_strictly():
    fns = resolve.ensemble_model_fns("CAR_RACING", model_dirs=["/runs/mdn_a"])
    assert list(fns) == ["dir:/runs/mdn_a"]
    assert fns["dir:/runs/mdn_a"] == resolve.SequentialModelFromDir("/runs/mdn_a")
    with pytest.raises(LookupError, match="no_such_model.*--sequential_model takes one of"):
        resolve.ensemble_model_fns("CAR_RACING", names=["no_such_model"])


def test_dream_gap_plays_the_controllers_ensemble_unless_told_otherwise(tmp_path, monkeypatch):
    """dream_gap.py on a controller trained in an ensemble: the dream it scores is that
    ensemble's (from controller.json, members and penalty), with the members' disagreement per
    policy; --dream_ensemble=none and --dream_disagreement_penalty replace it."""
    from rl755.controller.dream_gap import dream_gap
    from rl755.controller.dream_gap_report import format_table

    models = {"/m/exact": FakeDynamicsModel, "/m/shifted": lambda: ShiftedReward(0.5)}
    monkeypatch.setattr(resolve, "SequentialModelFromDir", lambda d: models[d])
    monkeypatch.setattr(resolve, "EncoderFromDir", lambda *a: FakeLatentEncoder)
    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel,
        encoder_name="dir:fake:2:/m/encoder",
        sequential_model_name="dir:/m/exact",
    )
    cfg = CmaConfig(
        mode="dream", population_size=4, trials_per_member=2, generations=1, sigma=0.5, seed=3,
        rollout_max_steps=12, dream_initial_states=4, dream_disagreement_penalty=1.0,
    )  # fmt: skip
    d = str(tmp_path / "c")
    run_cma_es(spec, d, cfg, dream_ensemble={"dir:/m/shifted": models["/m/shifted"]})

    def gap(**kw):
        kw = dict(environment=ENV.name, controller_dir=d, num_episodes=3, seed=7, **kw)
        return dream_gap(max_steps=12, out_dir=str(tmp_path / "gap"), **kw)

    own = gap()  # mean of r and r + 0.5 minus 1 x their std (0.25): r, the exact model's
    alone = gap(dream_ensemble=("none",))
    kind = gap(disagreement_penalty=0.0)  # mean of r and r + 0.5: r + 0.25 a step
    assert own["dream_ensemble"] == ["dir:/m/shifted"] and own["dream_disagreement_penalty"] == 1
    assert alone["dream_ensemble"] == [] and alone["dream_disagreement_penalty"] == 0
    saved = json.loads((tmp_path / "gap" / "dream_gap.json").read_text())
    assert saved["dream_ensemble"] == ["dir:/m/shifted"]  # the last one written
    assert "members std" in format_table(own) and "members std" not in format_table(alone)
    for name, v in own["policies"].items():
        d1, d0, dk = v["dream"], alone["policies"][name]["dream"], kind["policies"][name]["dream"]
        assert d1["steps_mean"] == d0["steps_mean"] == dk["steps_mean"], name
        np.testing.assert_allclose(d1["mean"], d0["mean"], rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(dk["mean"], d0["mean"] + 0.25 * d0["steps_mean"], rtol=1e-5)
        np.testing.assert_allclose(d1["members_reward_std"], 0.25, rtol=1e-5)
        assert "members_reward_std" not in d0
        assert v["real"] == alone["policies"][name]["real"]  # the real side is the same
    with pytest.raises(ValueError, match="give --dream_ensemble or --dream_ensemble_dirs too"):
        gap(dream_ensemble=("none",), disagreement_penalty=1.0)
    no_reward = {"/m/exact": FakeDynamicsModel, "/m/headless": NoRewardHead}
    monkeypatch.setattr(resolve, "SequentialModelFromDir", lambda d: no_reward[d])
    with pytest.raises(ValueError, match="reward head; dir:/m/headless has none"):
        gap(dream_ensemble_dirs=("/m/headless",))


def test_dream_gap_dreams_at_the_controllers_saved_temperature(tmp_path, monkeypatch):
    """A controller trained in a dream at temperature 1.15 with episode ends scaled 2x is
    scored in that dream (its controller.json), not at 1.0 and 1x; --temperature and
    --done_prob_scale override them."""
    from rl755.controller import dream_gap as dream_gap_lib

    monkeypatch.setattr(resolve, "SequentialModelFromDir", lambda d: FakeDynamicsModel)
    monkeypatch.setattr(resolve, "EncoderFromDir", lambda *a: FakeLatentEncoder)
    spec = AgentSpec(
        ENV.name,
        "LinearController",
        encoder_fn=FakeLatentEncoder,
        sequential_model_fn=FakeDynamicsModel,
        encoder_name="dir:fake:2:/m/encoder",
        sequential_model_name="dir:/m/exact",
    )
    cfg = CmaConfig(
        mode="dream", population_size=4, trials_per_member=1, generations=1, sigma=0.5, seed=3,
        rollout_max_steps=8, dream_initial_states=2, temperature=1.15, done_prob_scale=2.0,
    )  # fmt: skip
    d = str(tmp_path / "c")
    run_cma_es(spec, d, cfg)
    used = []
    measure = dream_gap_lib.measure_dream_gap

    def spy(spec, params, temperature, **kw):
        used.append((temperature, kw["done_prob_scale"]))
        return measure(spec, params, temperature=temperature, **kw)

    monkeypatch.setattr(dream_gap_lib, "measure_dream_gap", spy)
    kw = dict(environment=ENV.name, controller_dir=d, num_episodes=2, seed=7, max_steps=8)
    own = dream_gap_lib.dream_gap(out_dir=str(tmp_path / "gap"), **kw)
    told = dream_gap_lib.dream_gap(
        out_dir=str(tmp_path / "told"), temperature=1.0, done_prob_scale=1.0, **kw
    )
    assert used == [(1.15, 2.0), (1.0, 1.0)]
    assert own["temperature"] == 1.15 and told["temperature"] == 1.0
    assert own["done_prob_scale"] == 2.0 and told["done_prob_scale"] == 1.0
    assert json.loads((tmp_path / "gap" / "dream_gap.json").read_text())["temperature"] == 1.15


def test_dream_gap_title_names_the_dream():
    from rl755.controller.dream_gap_report import format_title

    gap = {
        "environment": "DOOM_TAKE_COVER", "sequential_model": "mdn", "temperature": 1.15,
        "num_episodes": 100, "dream_ensemble": [], "dream_disagreement_penalty": 0.0,
    }  # fmt: skip
    plain = "DOOM_TAKE_COVER, mdn, temperature 1.15, 100 episodes per policy"
    assert format_title(gap).startswith(plain)  # older dream_gap.json: no scale
    assert format_title({**gap, "done_prob_scale": 1.0}).startswith(plain)
    assert format_title({**gap, "done_prob_scale": 2.5}).startswith(
        "DOOM_TAKE_COVER, mdn, temperature 1.15, episode ends x2.5, 100 episodes"
    )
    assert format_title({**gap, "real": True}).startswith(plain)
    assert format_title({**gap, "real": False}).startswith(
        "DOOM_TAKE_COVER, mdn, temperature 1.15, the dream only, 100 episodes"
    )
    ens = {**gap, "dream_ensemble": ["a", "b"], "dream_disagreement_penalty": 0.5}
    assert format_title(ens).startswith(
        "DOOM_TAKE_COVER, mdn with a, b (reward = mean - 0.5 x std)"
    )
