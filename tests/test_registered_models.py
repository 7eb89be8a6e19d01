"""What every registered sequential model gets, automatically: parametrized over
rl755.models.registry (not a hand-kept list), including the worked example
examples/gru_world_model.py, which this module registers by importing it.

For each builder (its registration with heads where there is one: rows that differ only in
preset values or heads build the same code, and the heads add to it):
  - `step`, one position at a time, gives the full pass's hidden representations, and
    padding at the end of a sequence leaves its real positions unchanged;
  - a run resumed from its checkpoint ends with the weights of the run never stopped;
  - it trains a few steps through `train_sequential_model` (stage 4) and loads back;
  - scripts/models/evaluate_world_model.py scores every trained model in one run, the
    example beside the MDN-RNN;
  - with heads: a controller acts with it in the real fake environment and in its dream.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import A, Z, fixed_slices, run_steps, train_tiny, write_encoded_dataset

import examples.gru_world_model  # noqa: F401  (registers gru.gru_with_heads)
from rl755.common import checkpoints, devices
from rl755.models import catalogue, registry
from rl755.models.common.sequential import SequentialModel
from rl755.models.sequential import loop as sequential_loop
from rl755.models.sequential.train import load_trained_model, resolve_rollouts_dataset

ENV = "FAKE_PIXELS"
EXAMPLE = "gru.gru_with_heads"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _one_per_builder() -> list[str]:
    """A registration per builder, the first with heads where there is one (it runs every
    path of the one without, and its heads)."""
    chosen: dict[str, registry.Sequential] = {}
    for entry in registry.registered():
        old = chosen.get(entry.builder_name)
        if old is None or (entry.heads and not old.heads):
            chosen[entry.builder_name] = entry
    return [e.name for e in chosen.values()]


MODELS = _one_per_builder()
WITH_HEADS = [name for name in MODELS if registry.get(name).heads]


def test_the_example_and_every_builder_are_covered():
    assert EXAMPLE in MODELS and "mdn_rnn.mdn_rnn_with_heads" in MODELS
    builders = {e.builder_name for e in registry.registered()}
    assert sorted(registry.get(n).builder_name for n in MODELS) == sorted(builders)


# ---- the model alone ------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_step_agrees_with_the_full_pass(name):
    tf.keras.utils.set_random_seed(0)
    model = catalogue.build(ENV, name)
    assert isinstance(model, SequentialModel)
    assert (model.representation_size, model.action_size) == (Z, A)
    x = tf.random.normal([2, 11, Z + A])  # longer than the fake environment's windows (8)
    if getattr(model, "needs_rollout_ids", False):
        pytest.skip(f"{name} steps with its index only (covered after training below)")
    full = model(x)["hidden"].numpy()
    assert full.shape == (2, 11, model.hidden_size)
    np.testing.assert_allclose(run_steps(model, x), full, atol=2e-5)
    np.testing.assert_allclose(
        model.get_hidden_representation(x, position=4).numpy(), full[:, 4], atol=1e-6
    )
    mask = np.ones([2, 11], np.float32)
    mask[0, 7:] = 0.0  # padded steps (at the end, as in training slices)
    padded = model(tf.where(mask[..., None] > 0, x, 1e3), mask=mask)["hidden"].numpy()
    np.testing.assert_allclose(padded[0, :7], full[0, :7], atol=2e-5)
    np.testing.assert_allclose(padded[1], full[1], atol=2e-5)


# ---- training ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pattern(tmp_path_factory):
    directory = tmp_path_factory.mktemp("encoded") / "vae"
    write_encoded_dataset(directory, rollouts_per_split=4, steps=12)
    return str(directory / "encoded-{split}*.tfrecord-*")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, pattern):
    """name -> the model dir of a 2-step stage-4 run (trained on first use)."""
    root = tmp_path_factory.mktemp("trained")
    dirs = {}

    def get(name):
        if name not in dirs:
            model_dir = root / name.replace(".", "_")
            result = train_tiny(model_dir, 2, name, rollouts_pattern=pattern, batch_shards=1)
            dirs[name] = (str(model_dir), result)
        return dirs[name]

    return get


@pytest.mark.parametrize("name", MODELS)
def test_trains_a_few_steps_through_the_stage_and_loads_back(name, trained):
    model_dir, result = trained(name)
    assert result["start_step"] == 0 and result["step"] == 2
    assert len(result["train_losses"]) == 2 and np.all(np.isfinite(result["train_losses"]))
    model = load_trained_model(model_dir)
    assert model.has_reward_head == model.has_done_head == registry.get(name).heads
    terms = {"loss", "z"} | ({"reward", "done"} if registry.get(name).heads else set())
    assert terms <= set(result["validation"])
    x = tf.random.normal([2, 5, Z + A], seed=1)
    again = load_trained_model(model_dir)
    np.testing.assert_array_equal(model(x)["hidden"].numpy(), again(x)["hidden"].numpy())
    if model.needs_rollout_ids:  # with its index loaded it steps as it runs
        np.testing.assert_allclose(run_steps(model, x), model(x)["hidden"].numpy(), atol=2e-5)


def _fit(name, model_dir, steps, pattern):
    fn = catalogue.model_fn(ENV, name)
    probe = fn()
    builder = resolve_rollouts_dataset(ENV, "VaeEncodedRollouts")(tfrecords_pattern=pattern)
    probe.build_extras(str(model_dir), builder)  # (nothing for most models)
    tf.keras.utils.set_random_seed(0)
    return sequential_loop.fit_sequential_model(
        fn,
        fixed_slices(n=4, length=5, rollout_ids=probe.needs_rollout_ids),
        str(model_dir),
        train_steps=steps,
        batch_size=4,
        learning_rate=1e-2,
        save_every_n_steps=2,
        validation_steps=0,
        strategy=devices.cpu_strategy(1),
        batch_shards=1,
    )


@pytest.mark.parametrize("name", MODELS)
def test_a_resumed_run_ends_where_the_unbroken_one_does(name, tmp_path, pattern):
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    _fit(name, whole, 4, pattern)
    shutil.copytree(whole, resumed)
    last = checkpoints.newest_complete_checkpoint(str(resumed))
    assert last.step == 4
    for path in last.files.values():
        os.remove(path)
    os.remove(os.path.join(resumed, checkpoints.marker_name(last.number)))
    assert _fit(name, resumed, 4, pattern)["start_step"] == 2
    a = checkpoints.newest_complete_checkpoint(str(whole)).weights_path
    b = checkpoints.newest_complete_checkpoint(str(resumed)).weights_path
    ma, mb = catalogue.build(ENV, name).ensure_built(), catalogue.build(ENV, name).ensure_built()
    ma.load_weights(a)
    mb.load_weights(b)
    for va, vb in zip(ma.weights, mb.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-5, atol=1e-6, err_msg=va.path)


# ---- the benchmark and the controller -----------------------------------------------------------
def test_evaluate_world_model_scores_every_model_beside_the_mdn_rnn(trained, pattern, tmp_path):
    dirs = [trained(name)[0] for name in MODELS]
    out_dir = tmp_path / "bench"
    env = {**os.environ, "PYTHONPATH": REPO, catalogue.MODULES_VARIABLE: "examples.gru_world_model"}
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "scripts/models/evaluate_world_model.py"),
            f"--environment={ENV}",
            *[f"--sequential_model_dir={d}" for d in dirs],
            f"--rollouts_pattern={pattern}",
            "--horizons=1,2",
            "--context_length=2",
            "--num_starts=4",
            "--chunk_length=6",
            "--num_examples=0",
            f"--out_dir={out_dir}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out_dir / "world_model_benchmark.json").read_text())
    scored = {m["model"]: m for m in result["models"]}
    assert list(scored) == [os.path.basename(d) for d in dirs]
    for name, m in scored.items():
        assert np.isfinite(m["next_step"]["z_mse"]), name
        assert len(m["open_loop"]["z_mse"]) == 2 and np.all(np.isfinite(m["open_loop"]["z_mse"]))
    table = (out_dir / "table.txt").read_text()
    assert "gru_gru_with_heads" in table and "mdn_rnn_mdn_rnn_with_heads" in table


@pytest.mark.parametrize("name", WITH_HEADS)
def test_a_controller_acts_with_it_in_the_real_environment_and_in_the_dream(name, trained):
    from rl755.controller.agent import AgentSpec, run_episodes
    from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
    from rl755.controller.resolve import SequentialModelFromDir
    from rl755.environments import Environments

    env = Environments.FAKE_PIXELS
    spec = AgentSpec(
        ENV,
        "LinearController",
        encoder_fn=catalogue.model_fn(ENV, "vae.Vae"),
        sequential_model_fn=SequentialModelFromDir(trained(name)[0]),
    )
    agent = spec.build()
    assert agent.controller.input_size == Z + agent.sequential_model.hidden_size
    params = np.random.default_rng(4).normal(0, 0.1, (2, agent.num_params))
    real = run_episodes([env.make(), env.make()], agent, params, [0, 1], 6)
    assert real["steps"].tolist() == [6, 6] and np.all(np.isfinite(real["returns"]))
    z0 = encoded_initial_states(env.make_fn(), agent.encode, [0, 1])
    dream = DreamEvaluator(agent.sequential_model, agent.controller, z0, 6, end_episodes=False)
    d = dream.evaluate(params, [0, 1])
    assert d["steps"].tolist() == [[6, 6], [6, 6]] and np.all(np.isfinite(d["returns"]))
    assert len(set(np.round(d["returns"].ravel(), 6))) > 1  # the rewards come from the model
