"""Shipped models (rl755.zoo.ship / rl755.zoo.shipped): tiny FAKE_PIXELS models trained here,
shipped into a tmp folder ($RL755_SHIPPED_DIR), loaded back with no models dir (rules that
need no trained model: test_shipping_rules.py)."""

import json
import logging
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from encoder_helpers import write_raw_rollouts
from sequential_helpers import train_tiny, write_encoded_dataset

from rl755 import zoo
from rl755.common.errors import BadInput
from rl755.zoo import ship, shipped

ENV = "FAKE_PIXELS"
ENCODER, SEQUENTIAL, CONTROLLER = (
    "raw_rollout_vae_4ld",
    "mdn_rnn_vae_4ld",
    "linear_controller_vae_mdn_rnn",
)
NAMES = (ENCODER, SEQUENTIAL, CONTROLLER)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """<root>/models/fake/{ENCODER, SEQUENTIAL, CONTROLLER}: trained a few steps each, the
    controller on the zoo names of the other two (as its row says)."""
    from rl755.controller.cma_train import CmaConfig, PoolConfig, train_controller
    from rl755.controller.evaluate import evaluate_controller
    from rl755.models.encoders.train import train_obs_encoder

    root = tmp_path_factory.mktemp("trained")
    models = root / "models" / "fake"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RL755_DATA_DIR", str(root / "data"))
        mp.setenv("RL755_MODELS_DIR", str(root / "models"))
        mp.setenv("RL755_CONFIG", str(root / "no_config.json"))
        mp.setenv(shipped.ENV_VAR, str(root / "nothing_shipped"))
        raw = root / "data" / "fake" / "raw_rollouts"
        write_raw_rollouts(raw, "train", 1, 4)
        train_obs_encoder(
            model_dir=str(models / ENCODER),
            train_steps=4,
            environment=ENV,
            model="vae.Vae",
            batch_size=8,
            representation_size=4,
            save_every_n_steps=2,
            obs_sampled_per_rollout=4,
            learning_rate=3e-3,
            validation_steps=0,
            run_flags={"train_steps": 4, "batch_size": 8, "representation_size": 4},
        )
        write_encoded_dataset(root / "data" / "fake" / "encoded_rollouts" / ENCODER)
        train_tiny(
            models / SEQUENTIAL,
            4,
            "mdn_rnn.mdn_rnn",
            environment=ENV,
            rollouts_dataset="RawRolloutVae4ld",
        )
        train_controller(
            environment=ENV,
            model_dir=str(models / CONTROLLER),
            encoder=ENCODER,
            sequential_model=SEQUENTIAL,
            cma_config=CmaConfig(
                mode="real",
                population_size=4,
                trials_per_member=1,
                generations=1,
                rollout_max_steps=24,
                sigma=0.5,
                seed=0,
                eval_every=0,
            ),
            pool=PoolConfig(parallelism=0),
        )
        # The same controller trained on the sequential model's training dir, not its name.
        train_controller(
            environment=ENV,
            model_dir=str(root / "by_dir" / CONTROLLER),
            encoder=ENCODER,
            sequential_model_dir=str(models / SEQUENTIAL),
            cma_config=CmaConfig(
                mode="real", population_size=4, trials_per_member=1, generations=1,
                rollout_max_steps=24, sigma=0.5, seed=0, eval_every=0,
            ),
            pool=PoolConfig(parallelism=0),
        )  # fmt: skip
        # An evaluation records its run below the controller's dir (evaluation/runs/).
        evaluate_controller(
            controller_dir=str(models / CONTROLLER), environment=ENV, num_episodes=1, seed=0
        )
    return root


@pytest.fixture
def shipped_root(tmp_path, monkeypatch):
    monkeypatch.setenv(shipped.ENV_VAR, str(tmp_path / "shipped"))
    return tmp_path / "shipped"


def _source(trained, name):
    return str(trained / "models" / "fake" / name)


def _ship_all(trained):
    return {name: ship.ship_model(ENV, name, model_dir=_source(trained, name)) for name in NAMES}


def _dtypes(h5_file) -> list:
    out = []
    h5_file.visititems(lambda _, o: out.append(o.dtype) if isinstance(o, h5py.Dataset) else None)
    return out


def _frames(n=6):
    env = __import__("rl755.environments", fromlist=["Environments"]).Environments.FAKE_PIXELS
    e = env.make()
    obs, _ = e.reset(seed=0)
    frames = [obs]
    for _ in range(n - 1):
        obs, *_ = e.step(e.action_space.sample())
        frames.append(obs)
    e.close()
    return np.stack(frames)


def test_each_kind_ships_and_loads_from_the_shipped_copy(trained, shipped_root, caplog):
    records = _ship_all(trained)
    for name, record in records.items():
        row = zoo.get(ENV, name)
        folder = shipped_root / "fake" / name
        assert record["path"] == str(folder) and record["size_bytes"] == shipped.folder_size(folder)
        on_disk = json.loads((folder / shipped.RECORD_FILE).read_text())
        assert on_disk["source"]["model_dir"] == _source(trained, name)
        assert on_disk["kind"] == row.kind and on_disk["flags"] == row.flags
        assert on_disk["export"]["time"] and "git" in on_disk["source"]["run"]
        assert not [p for p in os.listdir(folder.parent) if p.startswith(".")]  # no temp dirs
    assert records[CONTROLLER]["source"]["run"]["stage"] == "train_controller"  # not evaluate
    assert records[CONTROLLER]["total_shipped_bytes"] == shipped.folder_size(shipped_root)
    # The row's flags (--train_steps=300 --batch_size=32 ...) are not what this run used.
    assert records[ENCODER]["flags_differ"] == [
        "--train_steps=300 (run: 4)",
        "--batch_size=32 (run: 8)",
    ]
    for name in (ENCODER, SEQUENTIAL):
        assert records[name]["dtype"] == "float16"
        assert 0 < records[name]["conversion"]["max_abs_error"] < 1e-2
        [weights] = (shipped_root / "fake" / name).glob("model-*.weights.h5")
        with h5py.File(weights) as f:
            assert "optimizer" not in f
            dtypes = _dtypes(f)
        assert dtypes and set(dtypes) == {np.dtype(np.float16)}
    # No models dir (conftest points it at an empty tmp dir): every kind loads the shipped copy.
    with caplog.at_level(logging.INFO, logger="rl755.zoo.entry"):
        encoder = zoo.get(ENV, ENCODER)()
        model = zoo.get(ENV, SEQUENTIAL)()
        controller = zoo.get(ENV, CONTROLLER)()
    for name, obj in ((ENCODER, encoder), (SEQUENTIAL, model), (CONTROLLER, controller)):
        assert obj.zoo_source == "shipped"
        assert (
            f"{ENV} {name}: loaded the shipped copy {shipped_root / 'fake' / name}" in caplog.text
        )
    # Outputs match the float32 originals within float16's precision.
    original = {n: zoo.get(ENV, n).load_from(_source(trained, n)) for n in NAMES}
    frames = _frames()
    z, _ = encoder.compute_full_representation(frames)
    z0, _ = original[ENCODER].compute_full_representation(frames)
    assert all(w.dtype == "float32" for w in encoder.weights)
    np.testing.assert_allclose(z.numpy(), z0.numpy(), rtol=1e-2, atol=1e-2)
    assert not np.array_equal(z.numpy(), z0.numpy())  # float16 weights really were loaded
    a = np.full((len(frames), 3), 0.5, np.float32)
    h, _ = model.step(z0, a, model.initial_state(len(frames)))
    h0, _ = original[SEQUENTIAL].step(z0, a, original[SEQUENTIAL].initial_state(len(frames)))
    np.testing.assert_allclose(h.numpy(), h0.numpy(), rtol=1e-2, atol=1e-2)
    p, p0 = model.predict_from_hidden(h0), original[SEQUENTIAL].predict_from_hidden(h0)
    np.testing.assert_allclose(p["mdn_locs"].numpy(), p0["mdn_locs"].numpy(), atol=2e-2)
    assert controller.params.dtype == np.float32
    np.testing.assert_array_equal(controller.params, original[CONTROLLER].params.astype(np.float32))
    assert controller.meta == original[CONTROLLER].meta


def test_shipped_controller_plays_the_originals_returns(
    trained, shipped_root, tmp_path, monkeypatch
):
    """Real episodes on the same seeds: the original (float32 models) and the shipped copy
    (float16 weights, cast back) act alike. The encoder's z differ by ~1e-3, which moves the
    actions by as little; the fake environment's returns are continuous in the actions, so the
    returns agree to a small tolerance, and the episodes last the same number of steps."""
    from rl755.controller.evaluate import evaluate_controller

    _ship_all(trained)
    # A user's own (different) encoder of the same name must not be used by the shipped
    # controller: it was trained with the shipped one.
    from encoder_helpers import save_untrained_vae

    save_untrained_vae(tmp_path / "models" / "fake" / ENCODER, seed=5)
    kwargs = dict(environment=ENV, num_episodes=4, seed=1000)
    got = evaluate_controller(saved_controller=CONTROLLER, **kwargs)
    assert got["controller_source"] == "shipped"
    assert got["out_dir"] == str(tmp_path / "models" / "fake" / CONTROLLER / "evaluation")
    assert not (shipped_root / "fake" / CONTROLLER / "evaluation").exists()
    with open(os.path.join(got["out_dir"], "evaluation.json")) as f:
        on_disk = json.load(f)
    assert {"mean", "std", "returns", "seeds"} <= set(on_disk)
    monkeypatch.setenv("RL755_MODELS_DIR", str(trained / "models"))
    want = evaluate_controller(
        saved_controller=CONTROLLER, out_dir=str(tmp_path / "original"), **kwargs
    )
    assert want["controller_source"] == "trained"
    assert got["seeds"] == want["seeds"] == list(range(1000, 1004))
    assert got["steps"] == want["steps"]
    np.testing.assert_allclose(got["returns"], want["returns"], rtol=0.02, atol=0.05)


def test_a_trained_copy_wins_and_a_missing_model_names_both_ways(
    trained, shipped_root, monkeypatch
):
    ship.ship_model(ENV, ENCODER, model_dir=_source(trained, ENCODER))
    monkeypatch.setenv("RL755_MODELS_DIR", str(trained / "models"))
    assert zoo.get(ENV, ENCODER)().zoo_source == "trained"
    assert zoo.get(ENV, ENCODER).load("shipped").zoo_source == "shipped"
    with pytest.raises(
        FileNotFoundError, match="is not shipped: .* scripts/dev/ship_model.py --environment"
    ):
        zoo.get(ENV, SEQUENTIAL).load("shipped")
    row = zoo.get("DOOM_TAKE_COVER", "dream_controller")
    with pytest.raises(FileNotFoundError) as e:
        row()
    assert row.train_command(row.model_dir()) in str(e.value)
    assert "not shipped yet" in str(e.value) and "ship_model.py" in str(e.value)


def test_shipping_refuses_bad_sources_and_leaves_nothing(
    trained, shipped_root, tmp_path, monkeypatch
):
    def refused(match, name, model_dir):
        with pytest.raises(BadInput, match=match):
            ship.ship_model(ENV, name, model_dir=str(model_dir))
        assert shipped.folder_size(shipped_root) == 0 and not shipped.shipped_rows()
        if shipped_root.exists():  # only what earlier successful calls made, no temp dirs
            assert not list(shipped_root.rglob(".*"))

    refused("Unknown model 'nope' .* raw_rollout_vae_4ld", "nope", tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused(f"{empty} holds no complete checkpoint.*Train it first.*--model_dir", ENCODER, empty)
    partial = tmp_path / "partial"  # weights without their marker: a killed save
    partial.mkdir()
    [weights] = [p for p in os.listdir(_source(trained, ENCODER)) if p.endswith("002.weights.h5")]
    os.link(os.path.join(_source(trained, ENCODER), weights), partial / weights)
    refused("no complete checkpoint", ENCODER, partial)
    refused(
        "trained with model='vae.Vae'.*says 'mdn_rnn.mdn_rnn'",
        SEQUENTIAL,
        _source(trained, ENCODER),
    )
    refused("no trained controller", CONTROLLER, empty)
    refused(
        "reads the encoder raw_rollout_vae_4ld, which is not shipped.*Ship it first: python "
        "scripts/dev/ship_model.py --environment=FAKE_PIXELS --name=raw_rollout_vae_4ld",
        CONTROLLER,
        _source(trained, CONTROLLER),
    )
    refused(
        "trained with sequential_model 'mdn_rnn_vae_4ld'.* says --sequential_model=none",
        "linear_controller_vae",
        _source(trained, CONTROLLER),
    )
    monkeypatch.setattr(shipped, "SIZE_LIMIT_BYTES", 10_000)
    refused("over the 0 MB limit", ENCODER, _source(trained, ENCODER))


def test_a_controller_trained_on_model_dirs_ships_as_its_row(trained, shipped_root, tmp_path):
    """--sequential_model_dir runs ship when that dir is the one the shipped row came from."""
    import shutil

    by_dir = trained / "by_dir" / CONTROLLER
    copy = tmp_path / "copy_of_sequential"
    shutil.copytree(_source(trained, SEQUENTIAL), copy)
    ship.ship_model(ENV, ENCODER, model_dir=_source(trained, ENCODER))
    ship.ship_model(ENV, SEQUENTIAL, model_dir=str(copy))
    with pytest.raises(
        BadInput, match=f"comes from {copy}.*--model_dir={_source(trained, SEQUENTIAL)}"
    ):
        ship.ship_model(ENV, CONTROLLER, model_dir=str(by_dir))
    assert not (shipped_root / "fake" / CONTROLLER).exists()
    ship.ship_model(ENV, SEQUENTIAL, model_dir=_source(trained, SEQUENTIAL))
    record = ship.ship_model(ENV, CONTROLLER, model_dir=str(by_dir))
    assert (
        record["reads"]["sequential_model"]["trained_as"] == f"dir:{_source(trained, SEQUENTIAL)}"
    )
    loaded = zoo.get(ENV, CONTROLLER)()
    assert loaded.zoo_source == "shipped" and loaded.meta["sequential_model"] == SEQUENTIAL


def test_reshipping_replaces_the_copy(trained, shipped_root):
    first = ship.ship_model(ENV, ENCODER, model_dir=_source(trained, ENCODER))
    (shipped_root / "fake" / ENCODER / "stale_file").write_text("x")
    second = ship.ship_model(ENV, ENCODER, model_dir=_source(trained, ENCODER))
    assert sorted(os.listdir(second["path"])) == sorted(first["files"]) + [shipped.RECORD_FILE]
    assert os.listdir(shipped_root / "fake") == [ENCODER]


def test_reshipping_counts_the_old_copy_once_against_the_limit(trained, shipped_root, monkeypatch):
    """The copy being replaced leaves the total: at a limit that holds one copy (and not two),
    re-shipping succeeds and the total stays the same."""
    first = ship.ship_model(ENV, ENCODER, model_dir=_source(trained, ENCODER))
    assert first["total_shipped_bytes"] == first["size_bytes"] == shipped.folder_size(shipped_root)
    monkeypatch.setattr(shipped, "SIZE_LIMIT_BYTES", first["size_bytes"] + 1000)
    second = ship.ship_model(ENV, ENCODER, model_dir=_source(trained, ENCODER))
    assert second["total_shipped_bytes"] == first["total_shipped_bytes"]
    assert shipped.folder_size(shipped_root) == first["size_bytes"]


def test_script_ships_and_refuses_clearly(trained, shipped_root, repo_root):
    script = os.path.join(repo_root, "scripts", "dev", "ship_model.py")
    ok = subprocess.run(
        [sys.executable, script, f"--environment={ENV}", f"--name={SEQUENTIAL}",
         f"--model_dir={_source(trained, SEQUENTIAL)}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    size = shipped.folder_size(shipped_root / "fake" / SEQUENTIAL)
    assert f"{size / 1e6:.2f} MB; all shipped models {size / 1e6:.2f} MB of 60 MB" in ok.stdout
    bad = subprocess.run(
        [sys.executable, script, "--environment=FAKE_PIXELS", "--name=nope"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "error: Unknown model 'nope'" in bad.stderr


def test_a_controller_with_non_finite_parameters_is_refused(trained, shipped_root, tmp_path):
    import shutil

    copy = tmp_path / "nan_controller"
    shutil.copytree(_source(trained, CONTROLLER), copy)
    params_file = copy / shipped.CONTROLLER_FILES[1]
    params = np.load(params_file)
    params[0] = np.nan
    with open(params_file, "wb") as f:
        np.save(f, params)
    with pytest.raises(BadInput, match=f"^{copy}/{shipped.CONTROLLER_FILES[1]} holds non-finite"):
        ship.ship_model(ENV, CONTROLLER, model_dir=str(copy))
    assert not (shipped_root / "fake" / CONTROLLER).exists()
