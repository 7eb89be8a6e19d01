"""Recipes: each headline result's whole recipe as steps of the stage scripts
(`scripts/pipeline.py --preset=doom_dream`, `car_racing_real`), their flags against the zoo
rows of the shipped models, and the tiny Doom recipe run end to end and resumed."""

import json
import os
import sys

import numpy as np
import pytest

from rl755 import zoo
from rl755.environments import Environments
from rl755.pipeline import recipe_runner
from rl755.pipeline.recipe_book import RECIPES, get_recipe
from rl755.pipeline.recipes import build_recipe_stages, step_flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Flags that connect a step to the run's own directories where the row names zoo models.
WIRING = {
    "encoder",
    "sequential_model",
    "encoder_dir",
    "encoder_model",
    "representation_size",
    "sequential_model_dir",
    "rollouts_pattern",
    "initial_params",
    "initial_weights",
    "model",
    "model_dir",
    "seed",
}
# (recipe, step, zoo row, flags allowed to differ: the row's run went further than the
# shipped model, which the step trains to exactly).
ROWS = [
    ("doom_dream", "train_encoder", "raw_rollout_vae_64ld", {"train_steps": "3000"}),
    ("doom_dream", "train_sequential_random", "mdn_rnn_64ld_episodes", {"train_steps": "1000"}),
    ("doom_dream", "train_controller_earlier", "dream_controller_episodes", {}),
    ("doom_dream", "train_sequential_hold_3", "mdn_rnn_64ld_hold", {}),
    ("doom_dream", "train_controller", "dream_controller", {}),
    ("car_racing_real", "train_encoder", "raw_rollout_vae_32ld_demo", {}),
    ("car_racing_real", "train_sequential", "mdn_rnn_vae_32ld_demo", {}),
    ("car_racing_real", "train_controller_p4", "real_controller_p4", {}),
    ("car_racing_real", "train_controller_p8", "real_controller", {}),
]


def _spelled(value) -> str:
    if value is True:
        return ""  # a bare --flag in a row
    return str(value)


# What a kind of step reads: (flag, the kind of step that wrote it, whether it must be the
# latest output of that kind, whether the flag is required).
READS = {
    "encode": [("model_dir", "train_encoder", True, True)],
    "train_sequential": [("initial_weights", "train_sequential", False, False)],
    "train_controller": [
        ("encoder_dir", "train_encoder", True, True),
        ("sequential_model_dir", "train_sequential", True, True),
        ("initial_params", "train_controller", False, False),
    ],
    "evaluate": [("model_dir", "train_controller", False, True)],
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_step_reads_the_models_earlier_steps_of_the_run_wrote(name):
    """The wiring the zoo-row comparison leaves out (WIRING): a controller is trained with
    the run's own VAE and its newest MDN-RNN, an evaluation plays a controller the run
    trained (not a shipped model of the same name), the last one included."""
    recipe = RECIPES[name]
    written = {}  # kind of step -> the output dirs of its steps so far, in order
    for step in recipe.steps:
        for flag, kind, latest, required in READS.get(step.stage, []):
            if flag not in step.flags and not required:
                continue
            earlier = written.get(kind, [])
            if latest:
                assert earlier and step.flags.get(flag) == earlier[-1], (step.name, flag)
            else:
                assert step.flags.get(flag) in earlier, (step.name, flag)
        output = "out_dir" if step.stage in ("collect", "encode", "evaluate") else "model_dir"
        if step.stage == "evaluate":
            written.setdefault("evaluated", []).append(step.flags["model_dir"])
        written.setdefault(step.stage, []).append(step.flags[output])
    assert written["train_controller"][-1] in written["evaluated"]


@pytest.mark.parametrize("recipe_name,step_name,row_name,differ", ROWS)
def test_full_recipe_steps_train_with_the_zoo_rows_flags(recipe_name, step_name, row_name, differ):
    recipe = get_recipe(recipe_name)
    row = zoo.get(recipe.environment, row_name)
    flags = recipe.step(step_name).flags
    expected = {**row.flag_values(), **differ}
    for name, value in expected.items():
        if name in WIRING and name != "seed":
            continue
        got = flags.get(name, None if name != "seed" else 0)
        assert got is not None, f"{step_name} lacks --{name}"
        assert _spelled(got) == value or float(_spelled(got) or 1) == float(value or 1), (
            step_name,
            name,
            got,
            value,
        )
    unexpected = set(flags) - set(expected) - WIRING
    assert not unexpected, f"{step_name} sets flags its row does not: {unexpected}"
    if row.model:
        assert flags["model"] == row.model


def test_doom_recipe_collects_three_sets_and_trains_the_mdn_rnn_in_phases():
    recipe = get_recipe("doom_dream")
    collect = {s.name: s.flags for s in recipe.steps if s.stage == "collect"}
    assert {k: (v["num_rollouts"], v["policy"], v["seed"]) for k, v in collect.items()} == {
        "collect_random": (3200, "RepeatRandomPolicy", 755),
        "collect_controller": (400, "controller", 756),
        "collect_hold": (800, "RepeatRandomPolicy", 757),
    }
    assert collect["collect_controller"]["random_action_prob"] == 0.3
    assert collect["collect_controller"]["controller_dir"] == "<models>/dream_controller_episodes"
    assert collect["collect_hold"]["policy_kwargs"] == "min_repeat=20,max_repeat=200"
    names = [s.name for s in recipe.steps]
    for set_name in ("random", "controller", "hold"):
        for split in ("train", "validation"):
            assert f"encode_{set_name}_{split}" in names
    phases = [s.flags for s in recipe.steps if s.stage == "train_sequential"]
    assert [(p["model_dir"].split("/")[-1], p["train_steps"]) for p in phases] == [
        ("mdn_rnn_64ld_episodes", 1000),
        ("mdn_rnn_64ld_hold", 250),
        ("mdn_rnn_64ld_hold", 500),
        ("mdn_rnn_64ld_hold", 750),
    ]
    assert [p["rollouts_pattern"].split("_64ld_")[1][:5] for p in phases] == [
        "[1]_*",
        "[1]_*",
        "[12]_",
        "[123]",
    ]
    # Ordered so that every step's inputs exist before it runs.
    assert names.index("train_controller_earlier") < names.index("collect_controller")
    assert names.index("encode_hold_validation") < names.index("train_sequential_hold_3")
    final = recipe.step("train_controller").flags
    assert (final["eval_in"], final["select_episodes"], final["select_top"]) == ("dream", 256, 4)
    assert final["temperature"] == 1.15 and final["mode"] == "dream"
    assert names[-1] == "evaluate" and recipe.step("evaluate").flags["num_episodes"] == 100


@pytest.mark.parametrize("name", ["doom_dream", "car_racing_real"])
def test_tiny_recipes_have_the_full_ones_steps_stages_policies_and_flag_names(name):
    full, tiny = get_recipe(name), get_recipe(f"tiny_{name}")
    assert [(s.name, s.stage, s.after) for s in full.steps] == [
        (s.name, s.stage, s.after) for s in tiny.steps
    ]
    for a, b in zip(full.steps, tiny.steps):
        # Only sizes differ; tiny adds short validations, shards and evaluation episodes.
        extras = {"validation_steps", "rollouts_per_shard", "max_steps"}
        assert set(b.flags) - extras == set(a.flags) - extras, a.name
        for key in ("policy", "policy_kwargs", "mode", "eval_in", "controller", "cell_state"):
            assert a.flags.get(key) == b.flags.get(key), (a.name, key)
    assert full.wall_time.keys() == {"2 cores", "slurm"}
    assert all("estimate" in text for text in full.wall_time.values())


def test_a_runs_seed_shifts_every_seed_but_the_evaluations():
    recipe = get_recipe("doom_dream")
    base = {s.name: s.flags for s in build_recipe_stages(recipe, "/r")}
    other = {s.name: s.flags for s in build_recipe_stages(recipe, "/r", seed=3)}
    assert other["collect_random"]["seed"] == base["collect_random"]["seed"] + 3 == 758
    assert other["train_controller"]["seed"] == 758
    assert other["evaluate"]["seed"] == base["evaluate"]["seed"] == 1000
    assert base["collect_hold"]["out_dir"] == "/r/data/doom_take_cover/raw_rollouts_hold"


def _weights(path):
    import h5py

    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda k, v: out.__setitem__(k, v[()]) if hasattr(v, "shape") else None)
    return out


@pytest.mark.slow
@pytest.mark.timeout(1800)  # (a loaded machine)
def test_tiny_doom_recipe_runs_every_step_and_a_rerun_skips_them(tmp_path, capfd):
    out = str(tmp_path / "doom")
    summary = recipe_runner.run_recipe("tiny_doom_dream", out)
    recipe = get_recipe("tiny_doom_dream")
    assert [r["step"] for r in summary["steps"]] == [s.name for s in recipe.steps]
    assert all(r["status"] == "ok" for r in summary["steps"]), summary["steps"]
    data, models = os.path.join(out, "data", "doom_take_cover"), os.path.join(
        out, "models", "doom_take_cover"
    )
    # Three collection sets, each encoded (both splits).
    for raw, encoded in (
        ("raw_rollouts", "raw_rollout_vae_64ld_1_random"),
        ("raw_rollouts_controller", "raw_rollout_vae_64ld_2_controller"),
        ("raw_rollouts_hold", "raw_rollout_vae_64ld_3_hold"),
    ):
        files = os.listdir(os.path.join(data, raw))
        assert any(f.startswith("rollouts-train") for f in files), raw
        enc = os.listdir(os.path.join(data, "encoded_rollouts", encoded))
        assert {f.split("-")[1] for f in enc if f.startswith("encoded-")} == {"train", "validation"}
    # The MDN-RNN phases: 3 steps in one directory, started from the first model's weights.
    hold = [
        json.load(open(os.path.join(models, "mdn_rnn_64ld_hold", "runs", f)))
        for f in sorted(os.listdir(os.path.join(models, "mdn_rnn_64ld_hold", "runs")))
    ]
    assert [(r["flags"]["train_steps"], r["status"]) for r in hold] == [
        (1, "completed"),
        (2, "completed"),
        (3, "completed"),
    ]
    # The chosen controller, chosen in the dream, and its real evaluation on seeds 1000+.
    controller = json.load(open(os.path.join(models, "dream_controller", "controller.json")))
    assert controller["mode"] == "dream" and controller["cell_state"] is True
    evaluation = json.load(
        open(os.path.join(out, "evaluation", "dream_controller", "evaluation.json"))
    )
    assert evaluation["seeds"][0] == 1000 and "random_policy" in evaluation
    scores = summary["scores"]["evaluate"]
    assert scores["mean"] == pytest.approx(np.mean(evaluation["returns"]))
    # The record a results-page row quotes: the recipe's name and code version.
    assert summary["recipe"] == "tiny_doom_dream" and len(summary["code"]["commit"]) == 40
    assert recipe_runner.report(out)["scores"] == summary["scores"]  # SLURM's last job
    printed = capfd.readouterr().out
    assert f"recipe tiny_doom_dream (--seed=0), code {summary['code']['commit'][:12]}" in printed
    # Rerunning runs nothing and changes nothing.
    params = np.load(os.path.join(models, "dream_controller", "controller_params.npy"))
    again = recipe_runner.run_recipe("tiny_doom_dream", out)
    assert "done already" in capfd.readouterr().out
    assert again["steps"] == summary["steps"]
    np.testing.assert_array_equal(
        np.load(os.path.join(models, "dream_controller", "controller_params.npy")), params
    )


def test_on_slurm_each_step_waits_only_for_what_it_reads_and_a_report_ends_the_chain(
    tmp_path, monkeypatch
):
    # The chain's shape, not a cluster: no sbatch on PATH, so the dry run asks no controller.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    stages = build_recipe_stages(get_recipe("doom_dream"), str(tmp_path))
    after = {s.name: s.after for s in stages}
    assert after["collect_hold"] == ()  # collected beside the first steps
    assert after["encode_hold_train"] == ("train_encoder", "collect_hold")
    assert after["train_sequential_hold_3"] == (
        "train_sequential_hold_2",
        "encode_hold_train",
        "encode_hold_validation",
    )
    monkeypatch.chdir(tmp_path)  # submitted from anywhere
    results = recipe_runner.submit_recipe("tiny_doom_dream", str(tmp_path), dry_run=True)
    assert [r.name for r in results] == [*after, "report"]
    sbatch = open(results[-1].sbatch_script).read()
    # The report runs this checkout's script, whatever directory the job starts in.
    from rl755.pipeline.stages import REPO_ROOT

    assert f" {os.path.join(REPO_ROOT, 'scripts', 'pipeline.py')} " in sbatch
    assert "--report" in sbatch
    hold = open(results[list(after).index("collect_hold")].sbatch_script).read()
    assert "--seed=757" in hold and "min_repeat=20,max_repeat=200" in hold


def test_car_racing_recipe_chains_cma_es_from_the_demo_controller_and_scores_both():
    recipe = get_recipe("car_racing_real")
    steps = {s.name: s.flags for s in recipe.steps}
    assert steps["collect"]["policy"] == "HastingsRandomPolicy"
    assert steps["collect"]["num_rollouts"] == 40
    assert steps["train_controller_demo"]["model_dir"] == "<models>/linear_controller_demo"
    assert steps["train_controller_p4"]["initial_params"] == "<models>/linear_controller_demo"
    assert steps["train_controller_p8"]["initial_params"] == "<models>/real_controller_p4"
    for name in ("train_controller_demo", "train_controller_p4", "train_controller_p8"):
        assert steps[name]["mode"] == "real"
        assert steps[name]["sequential_model_dir"] == "<models>/mdn_rnn_vae_32ld_demo"
        # the encoder named as its zoo row was trained, not left to the script's default
        assert steps[name]["encoder_model"] == "vae.Vae"
    assert [
        (s["model_dir"], s["num_episodes"], s["seed"])
        for n, s in steps.items()
        if n.startswith("evaluate")
    ] == [
        ("<models>/real_controller_p4", 100, 1000),
        ("<models>/real_controller", 100, 1000),
    ]


@pytest.mark.parametrize("name", ["doom_dream", "car_racing_real"])
def test_every_step_of_a_full_recipe_gives_its_script_flags_it_accepts(name, tmp_path):
    """A misspelt flag in a recipe would stop a run of hours at that step: each script
    checks its step's flags (--only_check_args, four at a time)."""
    recipe = get_recipe(name)
    recipe_runner._check_flags(build_recipe_stages(recipe, str(tmp_path)), None)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_path_of_a_recipe_lies_in_the_runs_directories(name):
    """Each path a step reads or writes starts with a token the run replaces by its own
    directory (`TOKENS`): none lands in the working directory or a literal "<MODELS>"."""
    from rl755.pipeline.recipes import TOKENS

    for step in RECIPES[name].steps:
        for flag, value in step.flags.items():
            if isinstance(value, str) and "/" in value:
                assert value.split("/")[0] in TOKENS, (step.name, flag, value)
    # ... and each token becomes the run's own directory.
    out = "/runs/r1"
    env = Environments.from_name(RECIPES[name].environment).folder_name
    places = {"<data>": f"{out}/data/{env}", "<models>": f"{out}/models/{env}", "<out>": out}
    for step in RECIPES[name].steps:
        flags = step_flags(RECIPES[name], step, out)
        for flag, value in step.flags.items():
            if isinstance(value, str) and value.split("/")[0] in TOKENS:
                token = value.split("/")[0]
                assert flags[flag] == places[token] + value[len(token) :], (step.name, flag)


def test_a_step_that_cannot_run_is_refused_with_what_is_wrong():
    from rl755.pipeline.recipes import Step

    with pytest.raises(ValueError) as info:
        Step("fit", "train_model", {"model_dir": "<models>/m"})
    assert str(info.value) == (
        "Step 'fit': unknown stage 'train_model'; valid: collect, train_encoder, encode, "
        "train_sequential, train_controller, evaluate."
    )
    with pytest.raises(ValueError) as info:
        Step("fit", "train_encoder", {"model_dir": "<models>/m", "seed": 1, "environment": "X"})
    assert str(info.value) == "Step 'fit' sets ['environment']; the pipeline sets them."
    with pytest.raises(ValueError) as info:
        Step("fit", "train_encoder", {"model": "vae.Vae"})
    assert str(info.value) == "Step 'fit' needs --model_dir."
    assert Step("fit", "train_encoder", {"model_dir": "<models>/m"}).after is None


def test_car_racing_recipe_starts_with_the_demo_presets_collection_and_controller():
    """Its first steps are `--preset=demo`'s: the same rollouts and the same CMA-ES."""
    from rl755 import pipeline

    demo = {s.name: s.flags for s in pipeline.build_stages(pipeline.PRESETS["demo"], "/o")}
    recipe = get_recipe("car_racing_real")
    for step, stage in (("collect", "collect"), ("train_controller_demo", "train_controller")):
        flags = recipe.step(step).flags
        mine = WIRING | {"environment", "out_dir"}
        expected = {k: v for k, v in demo[stage].items() if k not in mine}
        assert {k: v for k, v in flags.items() if k not in mine} == expected, step


@pytest.mark.parametrize("name", ["doom_dream", "car_racing_real"])
def test_full_recipes_score_on_100_episodes_of_seeds_1000_with_the_random_policy(name):
    evaluations = [s for s in get_recipe(name).steps if s.stage == "evaluate"]
    assert evaluations
    for step in evaluations:
        assert step.flags["compare_random"] is True, step.name
        assert (step.flags["seed"], step.flags["num_episodes"]) == (1000, 100), step.name
        assert step.flags.get("max_steps") is None, step.name  # the environment's own limit
