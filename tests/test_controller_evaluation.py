"""Playing a trained controller: evaluate_controller.py and its evaluation.json, the random
policy on the same seeds, GIFs, registered controllers, and collection with a controller."""

import json
import os

import numpy as np
import pytest
from controller_helpers import exact_spec, small

from rl755.controller.agent import AgentSpec
from rl755.controller.cma_train import PoolConfig
from rl755.controller.evaluate import evaluate_controller, score_controller
from rl755.environments import Environments

ENV = Environments.FAKE_PIXELS


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


class Killed(Exception):
    pass


def _counting(monkeypatch, fail_after=None):
    """Patches the evaluation's run_episodes: counts the episodes it plays; raises (a kill)
    once `fail_after` batches have been played."""
    from rl755.controller import agent, evaluate

    played, real = [], agent.run_episodes

    def run_episodes(envs, agent, params, seeds, *args, **kwargs):
        if fail_after is not None and len(played) >= fail_after:
            raise Killed
        played.append([int(s) for s in seeds])
        return real(envs, agent, params, seeds, *args, **kwargs)

    monkeypatch.setattr(evaluate, "run_episodes", run_episodes)
    return played


def test_a_killed_evaluation_resumes_without_replaying_its_episodes(tmp_path, monkeypatch):
    """Killed after two batches of 2, the rerun plays only seeds 44-46 and writes what an
    uninterrupted run writes; a rerun of the finished evaluation plays nothing; an unreadable
    evaluation.json, other parameters or other seeds play again."""
    params = np.random.default_rng(5).normal(0, 1, 21).astype(np.float32)
    kw = dict(num_episodes=7, seed=40, max_steps=8, envs_at_once=2, compare_random=True)
    want = score_controller(params, exact_spec(), out_dir=str(tmp_path / "whole"), **kw)

    out = tmp_path / "e"
    _counting(monkeypatch, fail_after=2)
    with pytest.raises(Killed):
        score_controller(params, exact_spec(), out_dir=str(out), **kw)
    assert not (out / "evaluation.json").exists()
    progress = json.loads((out / "evaluation.progress.json").read_text())
    assert progress["returns"] == want["returns"][:4]

    played = _counting(monkeypatch)
    got = score_controller(params, exact_spec(), out_dir=str(out), **kw)
    assert played == [[44, 45], [46]]
    assert got.to_dict() == want.to_dict()
    whole = json.loads((tmp_path / "whole" / "evaluation.json").read_text())
    assert json.loads((out / "evaluation.json").read_text()) == whole
    assert (out / "episode.gif").read_bytes() == (tmp_path / "whole" / "episode.gif").read_bytes()
    assert not (out / "evaluation.progress.json").exists()

    played = _counting(monkeypatch)
    again = score_controller(params, exact_spec(), out_dir=str(out), extra={"out_dir": "x"}, **kw)
    assert played == [] and again.returns == want.returns and again.out_dir == "x"

    (out / "evaluation.json").write_text("{")  # unreadable: played again, not a crash
    played = _counting(monkeypatch)
    assert score_controller(params, exact_spec(), out_dir=str(out), **kw).returns == want.returns
    assert played == [[40, 41], [42, 43], [44, 45], [46]]

    played = _counting(monkeypatch)
    score_controller(params + 1, exact_spec(), out_dir=str(out), **kw)
    assert played == [[40, 41], [42, 43], [44, 45], [46]]
    score_controller(params + 1, exact_spec(), out_dir=str(out), **{**kw, "num_episodes": 3})
    assert played[4:] == [[40, 41], [42]]
