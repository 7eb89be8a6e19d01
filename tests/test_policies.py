"""rl755.policies: the strict resolver (generic + tuned + controller names), the policies
themselves, and the layering rules (stage 1 never imports the controller package)."""

import ast
import functools
import os
import subprocess
import sys

import numpy as np
import pytest

from rl755.common.errors import BadInput
from rl755.data_gen import collect, policy_stats
from rl755.environments import Environments
from rl755.policies import generic, policy_names, registry, resolve_policy
from rl755.policies.base import Policy, build_policy
from rl755.policies.car_racing import HastingsRandomPolicy

FAKE = Environments.FAKE_PIXELS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The --policy values of the original project and of the runs made so far, per environment.
SEED_NAMES = {
    "CAR_RACING": ["HastingsRandomPolicy", "RandomPolicy"],
    "FAKE_PIXELS": ["HastingsRandomPolicy", "RandomPolicy"],
    "DOOM_TAKE_COVER": ["RandomPolicy", "RepeatRandomPolicy"],
    "BREAKOUT": ["RandomPolicy", "RepeatRandomPolicy"],
}


# ---- the resolver ---------------------------------------------------------------------------------
@pytest.mark.parametrize("env_name", sorted(SEED_NAMES))
def test_every_environment_resolves_its_names(env_name):
    names = policy_names(env_name)
    assert names[-1] == "controller" and set(SEED_NAMES[env_name]) <= set(names)
    discrete = Environments[env_name].is_discrete
    for name in names[:-1]:
        policy = build_policy(resolve_policy(env_name, name))
        assert isinstance(policy, Policy)
        kind = (generic.DiscreteRandomPolicy, generic.RepeatedDiscreteRandomPolicy)
        assert isinstance(policy, kind) == discrete, (name, type(policy))


def test_tuned_policies_are_data_and_never_shadow_generic_names():
    assert set(registry.TUNED) <= set(Environments.names())
    for env_name, tuned in registry.TUNED.items():
        discrete = Environments[env_name].is_discrete
        kind = registry.GENERIC_DISCRETE if discrete else registry.GENERIC_CONTINUOUS
        assert not set(tuned) & set(kind), f"{env_name} shadows a generic name"
        assert set(tuned) <= set(policy_names(env_name))
    # Settings per environment are data: Breakout holds an action 1..4 steps, Doom 1..10.
    breakout = build_policy(resolve_policy("BREAKOUT", "RepeatRandomPolicy"))
    doom = build_policy(resolve_policy("DOOM_TAKE_COVER", "RepeatRandomPolicy"))
    assert (breakout.min_repeat, breakout.max_repeat) == (1, 4)
    assert (doom.min_repeat, doom.max_repeat) == (1, 10)
    assert type(build_policy(resolve_policy("CAR_RACING", "RandomPolicy"))) is (
        generic.UniformRandomPolicy
    )
    assert type(build_policy(resolve_policy("BREAKOUT", "RandomPolicy"))) is (
        generic.DiscreteRandomPolicy
    )


def test_resolver_is_strict_and_passes_arguments():
    policy = build_policy(resolve_policy("CAR_RACING", "HastingsRandomPolicy", track_pull=0.0))
    assert isinstance(policy, HastingsRandomPolicy) and policy.track_pull == 0.0
    held = build_policy(resolve_policy(Environments.BREAKOUT, "RepeatRandomPolicy", max_repeat=7))
    assert (held.min_repeat, held.max_repeat) == (1, 7)  # a tuned preset, one setting changed
    with pytest.raises(BadInput, match="--policy=HastingsRandomPolicy: .*no_such_arg"):
        resolve_policy("CAR_RACING", "HastingsRandomPolicy", no_such_arg=1)
    with pytest.raises(BadInput, match="--policy=RepeatRandomPolicy: .*min_repeat"):
        resolve_policy("DOOM_TAKE_COVER", "RepeatRandomPolicy", min_repeat=5, max_repeat=2)
    with pytest.raises(BadInput, match="Unknown --policy 'HastingsRandomPolicy' for BREAKOUT. "):
        resolve_policy("BREAKOUT", "HastingsRandomPolicy")  # tuned for another environment
    with pytest.raises(BadInput, match="Valid --environment values"):
        resolve_policy("CARRACING", "RandomPolicy")
    with pytest.raises(BadInput, match="needs --controller_dir"):
        resolve_policy(FAKE, "controller")
    with pytest.raises(BadInput, match="takes controller_dir and random_action_prob, not seed"):
        resolve_policy(FAKE, "controller", controller_dir="x", seed=1)


@pytest.mark.parametrize("env", [Environments.CAR_RACING, FAKE])
def test_policy_lookup_errors_list_valid_names(env, tmp_path):
    assert isinstance(build_policy(resolve_policy(env, "HastingsRandomPolicy")), Policy)
    valid = "HastingsRandomPolicy, RandomPolicy, SmoothNoisePolicy, UniformRandomPolicy"
    with pytest.raises(BadInput, match=f"Valid --policy values for {env.name}: {valid}. Or "):
        resolve_policy(env, "RandomPolicyy")
    out = tmp_path / "out"
    with pytest.raises(BadInput, match=f"Valid --policy values for {env.name}: {valid}"):
        collect.collect_rollouts(env.name, "Nope", 2, 1, 10, out_dir=str(out), progress=False)
    assert not out.exists()  # failed before creating anything


def test_collect_rollouts_takes_a_policy_constructor(tmp_path):
    """Stage 1 receives a constructor as well as a name; a named constructor resumes."""
    policy_fn = functools.partial(generic.SmoothNoisePolicy, center=(0.0, 0.5, 0.0), period=5.0)
    kw = dict(num_rollouts=2, parallelism=1, max_steps=24, out_dir=str(tmp_path), seed=1)
    first = collect.collect_rollouts("FAKE_PIXELS", policy_fn, progress=False, **kw)
    assert first["written"] == 2 and first["rollouts"] == 2
    again = collect.collect_rollouts("FAKE_PIXELS", policy_fn, progress=False, **kw)
    assert again["skipped"] == 2 and again["tag"] == first["tag"]
    other = functools.partial(generic.SmoothNoisePolicy, period=6.0)
    assert collect.policy_key(other) != collect.policy_key(policy_fn)
    with pytest.raises(BadInput, match="a name or a policy constructor"):
        collect.collect_rollouts("FAKE_PIXELS", 3, progress=False, **kw)


def test_policy_kwargs_reach_the_constructor_and_the_run_tag(tmp_path):
    """--policy_kwargs: parsed to numbers/booleans/text, given to the named policy's
    constructor (the rollouts equal those of the same constructor passed directly), and part
    of the run tag; bad pairs and a controller with kwargs fail before anything is written."""
    import pickle

    assert collect.parse_policy_kwargs(["period=3", "scale=0.5", "flag=True", "name=left"]) == {
        "period": 3,
        "scale": 0.5,
        "flag": True,
        "name": "left",
    }
    kw = dict(num_rollouts=2, parallelism=1, max_steps=24, seed=1, progress=False)

    def actions(out):
        return [
            np.asarray(pickle.load(open(os.path.join(out, f), "rb"))[0].action_l)
            for f in sorted(os.listdir(out))
            if f.endswith(".pickle")
        ]

    named = collect.collect_rollouts(
        "FAKE_PIXELS", "SmoothNoisePolicy", out_dir=str(tmp_path / "a"),
        policy_kwargs={"period": 3.0, "octaves": 1}, **kw,
    )  # fmt: skip
    direct = functools.partial(generic.SmoothNoisePolicy, period=3.0, octaves=1)
    collect.collect_rollouts("FAKE_PIXELS", direct, out_dir=str(tmp_path / "b"), **kw)
    default = collect.collect_rollouts(
        "FAKE_PIXELS", "SmoothNoisePolicy", out_dir=str(tmp_path / "c"), **kw
    )
    a, b, c = (actions(str(tmp_path / d)) for d in "abc")
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0])  # the default period (50) gives other actions
    assert named["tag"] != default["tag"]
    with pytest.raises(BadInput, match="is not name=value"):
        collect.parse_policy_kwargs(["max_repeat"])
    with pytest.raises(BadInput, match="--policy=SmoothNoisePolicy: .*wobble"):
        collect.collect_rollouts(
            "FAKE_PIXELS", "SmoothNoisePolicy", out_dir=str(tmp_path / "d"),
            policy_kwargs={"wobble": 1}, **kw,
        )  # fmt: skip
    with pytest.raises(BadInput, match="--policy_kwargs are constructor arguments"):
        collect.collect_rollouts(
            "FAKE_PIXELS", "controller", out_dir=str(tmp_path / "d"),
            policy_kwargs={"period": 1}, **kw,
        )  # fmt: skip
    with pytest.raises(BadInput, match="need --policy=controller"):
        collect.collect_rollouts(
            "FAKE_PIXELS", "SmoothNoisePolicy", out_dir=str(tmp_path / "d"),
            policy_kwargs={"period": 1.0}, random_action_prob=0.3, **kw,
        )  # fmt: skip
    assert not (tmp_path / "d").exists()


# ---- layering -------------------------------------------------------------------------------------
def _imports(path):
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def _package_imports(package):
    root = os.path.join(REPO, "rl755", package)
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            yield name, set(_imports(os.path.join(root, name)))


def test_layers_stage_1_never_imports_the_controller_and_controller_never_policies():
    for name, imports in _package_imports("data_gen"):
        assert not [m for m in imports if m.startswith("rl755.controller")], name
    for name, imports in _package_imports("controller"):
        assert not [m for m in imports if m.startswith("rl755.policies")], name
    for name, imports in _package_imports("policies"):
        assert not [m for m in imports if m.startswith("rl755.data_gen")], name
        if name != "learned.py":  # the controller-driven policy is the only one above stage 5
            assert not [m for m in imports if m.startswith("rl755.controller")], name
    # Importing the policies (as every rollout worker does) loads neither TF nor the controller.
    code = (
        "import sys, rl755.policies, rl755.data_gen.collect; "
        "bad = [m for m in ('tensorflow', 'rl755.controller') if m in sys.modules]; "
        "assert not bad, bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ---- the policies ---------------------------------------------------------------------------------
def test_hastings_policy_is_smooth_and_drives_forward_on_car_racing():
    kw = dict(num_rollouts=1, max_steps=120, seed=1)
    hastings = policy_stats.measure_policy(Environments.CAR_RACING, HastingsRandomPolicy, **kw)
    uniform = policy_stats.measure_policy(
        Environments.CAR_RACING, resolve_policy("CAR_RACING", "RandomPolicy"), **kw
    )
    assert hastings["action_autocorr"][0] > 0.8 and hastings["action_autocorr"][1] > 0.8
    assert abs(uniform["action_autocorr"][0]) < 0.3
    assert hastings["tiles_per_rollout"] > 2 * uniform["tiles_per_rollout"]
    assert hastings["road_fraction"] > 0.6


def test_random_policy_covers_the_action_box():
    env = FAKE.make()
    p = build_policy(resolve_policy(FAKE, "RandomPolicy"))
    p.initialize(env, 500, seed=0)
    a = np.stack([p.sample_action(None, t, None) for t in range(500)])
    assert a.dtype == np.float32
    np.testing.assert_array_less(FAKE.action_low - 1e-6, a.min(0))
    np.testing.assert_array_less(a.max(0), FAKE.action_high + 1e-6)
    assert a.min(0)[0] < -0.9 and a.max(0)[0] > 0.9 and a.max(0)[1] > 0.9


def test_random_policy_is_seeded():
    env = FAKE.make()

    def actions(seed):
        p = build_policy(resolve_policy(FAKE, "RandomPolicy"))
        p.initialize(env, 20, seed=seed)
        return np.stack([p.sample_action(None, t, None) for t in range(20)])

    np.testing.assert_array_equal(actions(3), actions(3))
    assert not np.array_equal(actions(3), actions(4))


def test_smooth_noise_is_clipped_to_the_action_box():
    env = FAKE.make()
    p = generic.SmoothNoisePolicy(center=[0.0, 0.5, 0.5], scale=5.0, period=10.0)
    p.initialize(env, 300, seed=0)
    a = np.stack([p.sample_action(None, t, None) for t in range(300)])
    np.testing.assert_array_equal(a.min(0), FAKE.action_low)  # reaches each bound, no further
    np.testing.assert_array_equal(a.max(0), FAKE.action_high)


def _road_ahead(columns):
    """A 96x96 frame, black except CarRacing's grey road in `columns` of the rows ahead."""
    obs = np.zeros((96, 96, 3), np.uint8)
    obs[40:66, columns] = 105
    return obs


def test_hastings_policy_never_brakes_and_steers_toward_the_road():
    env = FAKE.make()
    p = HastingsRandomPolicy()
    p.initialize(env, 200, seed=0)
    a = np.stack([p.sample_action(_road_ahead(slice(40, 56)), t, None) for t in range(200)])
    assert np.all(a[:, 2] == 0.0)  # no brake
    assert np.all((a[:, 1] >= 0.0) & (a[:, 1] <= 1.0)) and a[:, 1].std() > 0
    # Without steering noise the steering is the pull alone: track_pull * (road - 47.5) / 48.
    p = HastingsRandomPolicy(steer_scale=0.0, track_pull=1.5)
    p.initialize(env, 3, seed=0)
    right = p.sample_action(_road_ahead(slice(70, 80)), 0, None)[0]
    assert right == pytest.approx(1.5 * (74.5 - 47.5) / 48)
    assert p.sample_action(_road_ahead(slice(30, 40)), 1, None)[0] == pytest.approx(
        1.5 * (34.5 - 47.5) / 48
    )
    assert p.sample_action(_road_ahead(slice(0, 0)), 2, None)[0] == 0.0  # no road: no pull


def test_hastings_policy_steers_toward_the_grey_road_ahead_by_track_pull():
    """The pull is track_pull x (mean road column ahead - car column) / 48, added to the noise
    and clipped to [-1, 1]. Road is grey: R, G, B within 12 of each other and R in (80, 130);
    pixels just outside each bound are grass to it, and rows outside the band ahead are not
    read."""
    import types

    import gymnasium

    env = types.SimpleNamespace(
        action_space=gymnasium.spaces.Box(
            np.array([-1, 0, 0]), np.array([1, 1, 1]), dtype=np.float32
        )
    )
    frame = np.zeros((96, 96, 3), np.uint8)
    frame[:, :] = (102, 204, 102)  # grass
    road = {60: (81, 81, 81), 70: (129, 118, 107), 80: (100, 111, 100)}  # (r-g and g-b: 11)
    not_road = {10: (80, 80, 80), 12: (130, 130, 130), 14: (112, 100, 100), 16: (100, 100, 112)}
    for col, rgb in {**road, **not_road}.items():
        frame[40:66, col] = rgb
    frame[:40, 0] = frame[66:, 1] = (100, 100, 100)  # grey outside the rows ahead
    noise = HastingsRandomPolicy(track_pull=0.0)
    noise.initialize(env, 5, seed=3)
    for pull in (0.5, 1.5):
        policy = HastingsRandomPolicy(track_pull=pull)
        policy.initialize(env, 5, seed=3)
        for step in range(5):
            want = noise.sample_action(frame, step, None).copy()
            want[0] = np.clip(want[0] + pull * (70.0 - 47.5) / 48.0, -1.0, 1.0)
            np.testing.assert_allclose(policy.sample_action(frame, step, None), want, rtol=1e-6)
    # far off to one side, the steering saturates at the bound
    frame[40:66, 95] = (100, 100, 100)
    policy = HastingsRandomPolicy(track_pull=40.0)
    policy.initialize(env, 5, seed=3)
    assert policy.sample_action(frame, 0, None)[0] == 1.0
    frame[40:66, 60:96] = (102, 204, 102)
    frame[40:66, 0] = (100, 100, 100)
    assert policy.sample_action(frame, 0, None)[0] == -1.0
