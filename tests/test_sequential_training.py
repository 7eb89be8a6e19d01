"""Training sequential models: the script's library function end to end, resume, 1 vs 2
devices, data flags, NaN stop, fail-fast checks."""

import glob
import json
import logging
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import Z, fake_model, fixed_slices, train_tiny, write_encoded_dataset

from rl755.common import checkpoints, tensorboard
from rl755.common.errors import NonFiniteLossError
from rl755.data.fake.encoded_rollouts import VaeEncodedRollouts
from rl755.models import catalogue
from rl755.models.sequential import data as seq_data
from rl755.models.sequential import loop, schedule, sharding
from rl755.models.sequential import train as ts

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def encoded_dir(tmp_path):
    return write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")


def _train(model_dir, steps, **kw):
    return train_tiny(model_dir, steps, kw.pop("model", "mdn_rnn.mdn_rnn_with_heads"), **kw)


def _steps(model_dir):
    return [c.step for c in checkpoints.list_complete_checkpoints(str(model_dir))]


def test_train_checkpoints_tensorboard_record_and_resume(encoded_dir, tmp_path):
    model_dir = tmp_path / "models" / "mdn"
    first = _train(model_dir, 2)
    assert first["start_step"] == 0 and first["step"] == 2 and len(first["train_losses"]) == 2
    assert set(first["validation"]) == {"loss", "z", "reward", "done"}
    assert os.path.basename(first["checkpoint"]) == "model-001.weights.h5"
    assert glob.glob(str(model_dir / "tensorboard" / "train" / "events.*"))
    assert glob.glob(str(model_dir / "tensorboard" / "validation" / "events.*"))
    records = glob.glob(str(model_dir / "runs" / "*.json"))
    assert records and json.load(open(records[0]))["status"] == "completed"
    info = ts.read_model_info(str(model_dir))
    assert info["model"] == "mdn_rnn.mdn_rnn_with_heads" and info["environment"] == "FAKE_PIXELS"
    # The numbers logged are the run's own: by value, not only by key.
    assert info["train_loss"] == pytest.approx(first["train_losses"][-1])
    assert info["validation_loss"] == pytest.approx(first["validation"]["loss"])
    from rl755.common import tensorboard

    train = tensorboard.read_dir(model_dir / "tensorboard" / "train")
    ((step, total),) = train["losses/total"]
    assert step == 2 and total == pytest.approx(np.mean(first["train_losses"]), rel=1e-5)
    ((_, steps_per_s),) = train["perf/steps_per_second"]
    ((_, seqs_per_s),) = train["perf/sequences_per_second"]
    assert seqs_per_s == pytest.approx(4 * steps_per_s, rel=1e-5)  # batch_size 4
    val = tensorboard.read_dir(model_dir / "tensorboard" / "validation")
    for term in ("z", "reward", "done"):
        assert val[f"losses/{term}"][0][1] == pytest.approx(first["validation"][term], rel=1e-5)
    # Rerun with more steps: resumes at step 2, ends at 4.
    second = _train(model_dir, 4)
    assert second["start_step"] == 2 and second["step"] == 4 and len(second["train_losses"]) == 2
    assert _steps(model_dir) == [2, 4]
    assert not [f for f in os.listdir(model_dir) if ".tmp" in f]
    # Rerun with the same steps: nothing to do.
    assert _train(model_dir, 4)["train_losses"] == []
    # A different model in the same dir is refused.
    with pytest.raises(ValueError, match="different settings"):
        _train(model_dir, 6, model="lstm.deterministic_lstm")
    loaded = ts.load_trained_model(str(model_dir))
    assert loaded.has_done_head and loaded.count_params() > 0


def test_resume_restores_optimizer_state_exactly(tmp_path):
    data = fixed_slices(n=4, length=5)
    kw = dict(dataset_fn=data, batch_size=4, learning_rate=1e-2, validation_steps=0)
    tf.keras.utils.set_random_seed(0)
    loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        model_dir=str(tmp_path / "a"),
        train_steps=4,
        save_every_n_steps=4,
        **kw,
    )
    tf.keras.utils.set_random_seed(0)
    loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        model_dir=str(tmp_path / "b"),
        train_steps=2,
        save_every_n_steps=2,
        **kw,
    )
    resumed = loop.fit_sequential_model(
        fake_model("lstm.deterministic_lstm"),
        model_dir=str(tmp_path / "b"),
        train_steps=4,
        save_every_n_steps=2,
        **kw,
    )
    assert resumed["start_step"] == 2
    a = ts.load_trained_model(str(tmp_path / "a"), fake_model("lstm.deterministic_lstm"))
    b = ts.load_trained_model(str(tmp_path / "b"), fake_model("lstm.deterministic_lstm"))
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-5, atol=1e-6)


def test_dropout_draws_are_a_function_of_the_checkpoint_segment(tmp_path):
    """A transformer with dropout on fixed data, stopped at a checkpoint and resumed, ends
    with the losses and weights of an uninterrupted run: every segment restarts the dropout
    seed generators from (seed, step), which the checkpoint does not hold."""
    model = catalogue.model_fn("FAKE_PIXELS", "transformer.tiny_deterministic_transformer",
                               dropout=0.5)  # fmt: skip
    kw = dict(dataset_fn=fixed_slices(n=4, length=5), batch_size=4, learning_rate=1e-2,
              validation_steps=0, save_every_n_steps=2, seed=3)  # fmt: skip

    def fit(name, steps):
        tf.keras.utils.set_random_seed(0)  # the same initial weights
        return loop.fit_sequential_model(model, model_dir=str(tmp_path / name),
                                         train_steps=steps, **kw)  # fmt: skip

    whole = fit("whole", 4)
    fit("split", 2)
    split = fit("split", 4)
    assert split["start_step"] == 2 and split["train_losses"] == whole["train_losses"][2:]
    assert whole["train_losses"][0] != whole["train_losses"][1]  # the draws do differ
    a, b = (ts.load_trained_model(str(tmp_path / n), model) for n in ("whole", "split"))
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(vb.numpy(), va.numpy())


def test_tensorboard_step_means_restart_at_every_checkpoint(tmp_path):
    """Logging every 3 steps and saving every 2: a run resumed at step 2 writes the
    TensorBoard values of an uninterrupted run (each save is logged, so no mean spans one)."""
    kw = dict(dataset_fn=fixed_slices(n=4, length=5), batch_size=4, learning_rate=1e-2,
              validation_steps=0, save_every_n_steps=2, log_every_n_steps=3)  # fmt: skip

    def fit(name, steps):
        tf.keras.utils.set_random_seed(0)
        loop.fit_sequential_model(fake_model("lstm.deterministic_lstm"),
                                  model_dir=str(tmp_path / name), train_steps=steps, **kw)  # fmt: skip
        return tensorboard.read_dir(str(tmp_path / name / "tensorboard" / "train"))["losses/total"]

    whole = fit("whole", 4)
    fit("split", 2)
    assert [s for s, _ in whole] == [2, 3, 4]
    assert fit("split", 4) == whole


def test_initial_weights_start_a_new_run_from_another_runs_weights(tmp_path):
    """--initial_weights: a warm start (e.g. from a shipped model), step 0 and a new optimizer;
    a resumed run keeps its own checkpoint; another model's weights fail naming the file."""
    data = fixed_slices(n=4, length=5)
    kw = dict(dataset_fn=data, batch_size=4, validation_steps=0, save_every_n_steps=1)
    mdn = fake_model("mdn_rnn.mdn_rnn")
    tf.keras.utils.set_random_seed(0)
    loop.fit_sequential_model(
        mdn, model_dir=str(tmp_path / "a"), train_steps=4, learning_rate=1e-2, **kw
    )
    a = ts.load_trained_model(str(tmp_path / "a"), mdn)
    # A tiny learning rate: one Adam step moves each weight by ~1e-9, so the run's weights
    # are where it started.
    tf.keras.utils.set_random_seed(1)
    warm = loop.fit_sequential_model(
        mdn,
        model_dir=str(tmp_path / "b"),
        train_steps=1,
        learning_rate=1e-9,
        initial_weights=str(tmp_path / "a"),
        **kw,
    )
    assert warm["start_step"] == 0 and warm["step"] == 1
    b = ts.load_trained_model(str(tmp_path / "b"), mdn)
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), atol=1e-6)
    assert ts.read_model_info(str(tmp_path / "b"))["initial_weights"].endswith(
        "model-004.weights.h5"
    )
    tf.keras.utils.set_random_seed(1)
    loop.fit_sequential_model(
        mdn, model_dir=str(tmp_path / "c"), train_steps=1, learning_rate=1e-9, **kw
    )
    c = ts.load_trained_model(str(tmp_path / "c"), mdn)
    assert max(np.abs(va.numpy() - vc.numpy()).max() for va, vc in zip(a.weights, c.weights)) > 1e-2
    # Resuming b ignores --initial_weights (its checkpoint holds the optimizer too).
    resumed = loop.fit_sequential_model(
        mdn,
        model_dir=str(tmp_path / "b"),
        train_steps=2,
        learning_rate=1e-9,
        initial_weights=str(tmp_path / "c"),
        **kw,
    )
    assert resumed["start_step"] == 1
    assert ts.read_model_info(str(tmp_path / "b"))["initial_weights"].endswith(
        os.path.join("a", "model-004.weights.h5")
    )
    # Another model's weights, or a dir without a checkpoint: refused, naming the file.
    with pytest.raises(ValueError, match=r"a/model-004\.weights\.h5 does not fit"):
        loop.fit_sequential_model(
            fake_model("lstm.deterministic_lstm"),
            model_dir=str(tmp_path / "d"),
            train_steps=1,
            learning_rate=1e-3,
            initial_weights=str(tmp_path / "a"),
            **kw,
        )
    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        loop.fit_sequential_model(
            mdn,
            model_dir=str(tmp_path / "e"),
            train_steps=1,
            learning_rate=1e-3,
            initial_weights=str(tmp_path / "nothing"),
            **kw,
        )
    assert not checkpoints.list_complete_checkpoints(str(tmp_path / "d"))


def test_initial_weights_reach_the_stage_and_another_model_is_named(encoded_dir, tmp_path):
    _train(tmp_path / "a", 2)  # mdn_rnn.mdn_rnn_with_heads
    with pytest.raises(ValueError, match=r"model='mdn_rnn.mdn_rnn_with_heads', this run trains"):
        _train(tmp_path / "b", 1, model="mdn_rnn.mdn_rnn", initial_weights=str(tmp_path / "a"))
    assert not checkpoints.list_complete_checkpoints(str(tmp_path / "b"))
    _train(tmp_path / "c", 1, initial_weights=str(tmp_path / "a"))
    assert ts.read_model_info(str(tmp_path / "c"))["initial_weights"] == str(
        tmp_path / "a" / "model-001.weights.h5"
    )


def test_two_devices_give_the_same_losses_as_one(tmp_path):
    """Logical devices must be configured before TF initializes: run in a subprocess."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {TESTS_DIR!r})
        from rl755.common import tf_setup
        tf_setup.split_cpu_into_logical_devices(2)
        import tensorflow as tf
        from rl755.common import devices
        from rl755.models.sequential import loop
        from sequential_helpers import fake_model, fixed_slices
        out = {{}}
        for name, fn, clip in [
            ("transformer", fake_model("transformer.base_deterministic_transformer_with_heads"), 0),
            ("mdn", fake_model("mdn_rnn.mdn_rnn_with_heads"), 0),
            ("clipped", fake_model("lstm.deterministic_lstm_with_heads"), 0.05),
        ]:
            for n in (1, 2):
                tf.keras.utils.set_random_seed(0)
                r = loop.fit_sequential_model(
                    fn, fixed_slices(n=8, length=6), model_dir=f"{tmp_path}/{{name}}{{n}}",
                    train_steps=3, batch_size=4, learning_rate=1e-2, save_every_n_steps=3,
                    validation_steps=0, strategy=devices.cpu_strategy(n), clip_norm=clip)
                assert r["replicas"] == n
                out[f"{{name}}{{n}}"] = r["train_losses"] + r.get("gradient_norms", [])
        print("RESULT" + json.dumps(out))
        """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT")[-1])
    # All three loss terms (z, reward, done) and the padding mask are in play.
    assert len(out["transformer2"]) == 3
    np.testing.assert_allclose(out["transformer2"], out["transformer1"], rtol=1e-4)
    # The MDN-RNN: its CPU LSTM kernel and XLA-compiled loss on each replica.
    np.testing.assert_allclose(out["mdn2"], out["mdn1"], rtol=1e-4)
    # Clipping scales the whole gradient (the replicas' sum), as on one device; the clip
    # binds (norms before it above 0.05) and the norms agree too.
    assert len(out["clipped2"]) == 6 and min(out["clipped1"][3:]) > 0.05
    np.testing.assert_allclose(out["clipped2"], out["clipped1"], rtol=1e-4)


def test_difference_targets_and_sample_observations_reach_the_batches(encoded_dir):
    from rl755.data.fake.encoded_rollouts import VaeEncodedRollouts

    builder = VaeEncodedRollouts()

    def first(**kw):
        tf.random.set_seed(0)
        fn = seq_data.autoregressive_dataset_fn(builder, 6, shuffle_buffer=1, **kw)
        return next(iter(fn("train").batch(64).take(1)))

    plain = first()
    for b in [plain]:
        # Inputs carry the stored means: each target z_{t+1} is the next input's z.
        both = (b["target_mask"][:, :-1] == 1) & (b["mask"][:, 1:] == 1)
        np.testing.assert_allclose(
            tf.boolean_mask(b["targets"][:, :-1], both),
            tf.boolean_mask(b["inputs"][:, 1:, :Z], both),
        )
    diff = first(difference_targets=True)
    m = diff["target_mask"][:, :-1] == 1
    np.testing.assert_allclose(
        tf.boolean_mask(diff["targets"][:, :-1], m),
        tf.boolean_mask(diff["inputs"][:, 1:, :Z] - diff["inputs"][:, :-1, :Z], m),
        atol=1e-6,
    )
    sampled = first(sample_observations=True)
    # With sampled observations the inputs are means + 0.3 * noise: not on the stored grid.
    stored = {tuple(np.round(r, 5)) for r in plain["inputs"][..., :Z].numpy().reshape(-1, Z)}
    got = {tuple(np.round(r, 5)) for r in sampled["inputs"][..., :Z].numpy().reshape(-1, Z)}
    assert len(got & stored) <= 1  # only padding rows (zeros) may coincide


def test_difference_targets_is_recorded_for_loading(encoded_dir, tmp_path):
    model_dir = tmp_path / "models" / "diff"
    _train(
        model_dir,
        1,
        model="lstm.deterministic_lstm",
        difference_targets=True,
        validation_steps=0,
        save_every_n_steps=1,
    )
    assert ts.read_model_info(str(model_dir))["difference_targets"] is True
    assert ts.load_trained_model(str(model_dir)).difference_targets


def test_nan_loss_stops_training_with_a_message(tmp_path):
    with pytest.raises(NonFiniteLossError) as e:
        loop.fit_sequential_model(
            fake_model("mdn_rnn.mdn_rnn"),
            fixed_slices(poison=True),
            model_dir=str(tmp_path / "nan"),
            train_steps=5,
            batch_size=2,
            learning_rate=1e-3,
            validation_steps=0,
        )
    msg = str(e.value)
    assert "step 1" in msg and "loss term(s) z" in msg and "--check_numerics" in msg
    assert _steps(tmp_path / "nan") == []


def test_mismatched_sizes_and_unknown_names_fail_before_training(encoded_dir, tmp_path):
    other = write_encoded_dataset(tmp_path / "z6", z=6)
    with pytest.raises(ValueError, match="representations of size 6 .* expects Z=4"):
        _train(tmp_path / "m1", 1, rollouts_pattern=str(other / "encoded-{split}*.tfrecord-*"))
    with pytest.raises(LookupError, match="mdn_rnn_with_heads"):
        _train(tmp_path / "m2", 1, model="mdn_rnn.no_such_model")
    with pytest.raises(LookupError, match="VaeEncodedRollouts"):
        _train(tmp_path / "m3", 1, rollouts_dataset="NoSuchDataset")
    with pytest.raises(FileNotFoundError, match="no 'train' shards"):
        _train(tmp_path / "m4", 1, rollouts_pattern=str(tmp_path / "nowhere-{split}*"))
    with pytest.raises(ValueError, match=r"batch_shards=3 must be a positive divisor .* \(4\)"):
        _train(tmp_path / "m5", 1, batch_shards=3)
    for d in ("m1", "m2", "m3", "m4", "m5"):
        assert not os.path.exists(tmp_path / d)


@pytest.mark.slurm
def test_two_srun_tasks_train_one_model_with_multi_worker_strategy(encoded_dir, tmp_path):
    """The script under `srun --ntasks=2` (one node, no GPUs): MultiWorkerMirroredStrategy
    via SlurmClusterResolver; both workers see the same losses, only the chief saves."""
    from slurm_helpers import slurm_unavailable_reason

    if slurm_unavailable_reason():
        pytest.skip(slurm_unavailable_reason())
    repo = os.path.dirname(TESTS_DIR)
    model_dir = tmp_path / "mw"
    cmd = [
        "srun",
        "--ntasks=2",
        "--nodes=1",
        "--time=5",
        "--job-name=rl755-test-mw",
        sys.executable,
        os.path.join(repo, "scripts/models/train_sequential_model.py"),
        "--environment=FAKE_PIXELS",
        "--model=lstm.deterministic_lstm",
        "--rollouts_dataset=VaeEncodedRollouts",
        f"--rollouts_pattern={encoded_dir}/encoded-{{split}}*.tfrecord-*",
        f"--model_dir={model_dir}",
        "--train_steps=2",
        "--batch_size=4",
        "--sequence_length=6",
        "--save_every_n_steps=2",
        "--validation_steps=0",
        "--num_threads=1",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=repo)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Training on 2 replica(s)") == 2
    losses = [
        line.split("loss")[1].split()[0]
        for line in proc.stderr.splitlines()
        if "step 2/2  loss" in line
    ]
    assert len(losses) == 2 and losses[0] == losses[1]
    assert _steps(model_dir) == [2]
    assert len(glob.glob(str(model_dir / "runs" / "*.json"))) == 2


def test_saved_models_load_trained_sequential_models(tmp_path):
    from rl755.common import config
    from rl755.models import catalogue
    from rl755.models.car_racing import saved_models

    with pytest.raises(FileNotFoundError, match="Train it first: python scripts/models/"):
        saved_models.mdn_rnn_vae_32ld()
    model_dir = config.env_models_dir("car_racing") / "mdn_rnn_vae_32ld"
    model_dir.mkdir(parents=True)
    trained = catalogue.build("CAR_RACING", "mdn_rnn.mdn_rnn").ensure_built()
    trained.z_head.dense.kernel.assign(tf.ones_like(trained.z_head.dense.kernel))
    opt = keras.optimizers.Adam()
    opt.build(trained.trainable_variables)
    info = {"environment": "CAR_RACING", "model": "mdn_rnn.mdn_rnn", "difference_targets": True}
    checkpoints.save_checkpoint(str(model_dir), 1, trained, dict(info, step=7), optimizer=opt)
    loaded = saved_models.mdn_rnn_vae_32ld()
    assert loaded.difference_targets
    for a, b in zip(trained.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_old_format_model_dirs_load_but_do_not_resume(tmp_path):
    """sequential_model.json + model-<step>.weights.h5 + .optimizer.npz (before the common
    checkpoint format): load_trained_model reads them; training into them is refused."""
    model_dir = tmp_path / "old"
    model_dir.mkdir()
    trained = fake_model("lstm.deterministic_lstm")().ensure_built()
    trained.save_weights(str(model_dir / "model-007.weights.h5"))
    np.savez(model_dir / "model-007.optimizer.npz", step=np.int64(7))
    (model_dir / "model-009.weights.h5").write_bytes(b"")  # no optimizer file: incomplete
    info = {"environment": "FAKE_PIXELS", "model": "lstm.deterministic_lstm"}
    (model_dir / "sequential_model.json").write_text(json.dumps(info))
    loaded = ts.load_trained_model(str(model_dir))
    for a, b in zip(trained.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert ts.read_model_info(str(model_dir))["step"] == 7
    with pytest.raises(ValueError, match="old format.*another --model_dir"):
        loop.fit_sequential_model(
            fake_model("lstm.deterministic_lstm"),
            fixed_slices(),
            model_dir=str(model_dir),
            train_steps=9,
            batch_size=2,
            learning_rate=1e-3,
            validation_steps=0,
        )


def test_benchmark_reference_is_the_trainers_computation(tmp_path):
    """benchmarks/sequential_training.py times the trainer against a plain step: both must
    compute the same losses and updates (masks, MDN NLL, heads, Adam), step after step."""
    from sequential_helpers import load_benchmark

    bench = load_benchmark("sequential_training")
    data = bench.synthetic_slices(batch_size=4, length=6, z=Z, a=3)
    assert (data["mask"] == 0).any() and (data["target_mask"] != data["mask"]).any()
    model_fn = fake_model("mdn_rnn.mdn_rnn_with_heads")
    steps = 3
    tf.keras.utils.set_random_seed(0)
    r = loop.fit_sequential_model(
        model_fn,
        lambda split: tf.data.Dataset.from_tensor_slices(data).repeat(),
        model_dir=str(tmp_path),
        train_steps=steps,
        batch_size=4,
        learning_rate=bench.LEARNING_RATE,
        validation_steps=0,
    )
    tf.keras.utils.set_random_seed(0)
    reference = bench.Reference(model_fn)
    batches = [{k: tf.constant(v[i : i + 4]) for k, v in data.items()} for i in range(0, 16, 4)]
    losses = [float(reference.step(batches[i])) for i in range(steps)]
    np.testing.assert_allclose(losses, r["train_losses"], rtol=1e-5)
    trained = ts.load_trained_model(str(tmp_path), model_fn)
    for a, b in zip(trained.weights, reference.model.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_xla_compiled_training_gives_the_same_losses(tmp_path):
    """The MDN-RNN's loss and gradients compile with XLA on CPUs by default (model.xla_training):
    the same losses and weights as without, and the choice can be forced off."""
    model_fn = fake_model("mdn_rnn.mdn_rnn_with_heads")
    assert model_fn().xla_training
    assert not fake_model("transformer.tiny_deterministic_transformer")().xla_training
    kw = dict(dataset_fn=fixed_slices(n=8, length=6), train_steps=3, batch_size=4)
    kw.update(learning_rate=1e-2, validation_steps=0)
    runs = {}
    for jit in (None, False):
        tf.keras.utils.set_random_seed(0)
        d = str(tmp_path / str(jit))
        runs[jit] = loop.fit_sequential_model(model_fn, model_dir=d, jit_compile=jit, **kw)
    np.testing.assert_allclose(runs[None]["train_losses"], runs[False]["train_losses"], rtol=1e-5)
    a = ts.load_trained_model(str(tmp_path / "None"), model_fn)
    b = ts.load_trained_model(str(tmp_path / "False"), model_fn)
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-4, atol=1e-5)


def test_learning_rate_sets_adams_first_step_and_validation_averages_its_batches(tmp_path):
    """Adam's first step moves each weight by lr * g / (|g| + eps), i.e. lr where the gradient
    is not tiny; the validation losses are the mean over `validation_steps` batches (here
    batches 0:4, 4:8, 0:4 of the fixed slices) of the trained model's masked loss."""
    made, initial = [], []

    def model_fn():
        model = fake_model("lstm.deterministic_lstm_with_heads")()
        model.ensure_built()
        made.append(model)
        initial.extend(v.numpy() for v in model.trainable_variables)
        return model

    lr, data = 0.05, fixed_slices(n=8, length=5)
    result = loop.fit_sequential_model(
        model_fn,
        data,
        str(tmp_path / "m"),
        train_steps=1,
        batch_size=4,
        learning_rate=lr,
        validation_steps=3,
        save_every_n_steps=1,
    )
    (model,) = made
    moves = [np.abs(v.numpy() - w) for v, w in zip(model.trainable_variables, initial)]
    biggest = max(float(m.max()) for m in moves)
    assert biggest == pytest.approx(lr, rel=1e-3) and all(m.max() <= lr * 1.0001 for m in moves)

    slices = next(iter(data("validation").batch(8)))
    losses = []
    for rows in (slice(0, 4), slice(4, 8), slice(0, 4)):
        batch = {k: v[rows] for k, v in slices.items()}
        predictions = model(batch["inputs"], mask=batch["mask"])
        losses.append(float(model.get_loss_fn()(batch, predictions)))
    assert result["validation"]["loss"] == pytest.approx(np.mean(losses), rel=1e-5)


def _fit_and_replay(tmp_path, name, steps, rates, clip=None, **kw):
    """(weights after `fit_sequential_model` with `kw`, the same steps written out by hand:
    Adam at the given per-step `rates`, the whole gradient clipped to `clip`, result). Four
    slices in a batch of four: every step trains the same batch."""
    made = []

    def model_fn():
        model = fake_model("lstm.deterministic_lstm_with_heads")()
        model.ensure_built()
        made.append(model)
        return model

    data = fixed_slices(n=4, length=5)
    result = loop.fit_sequential_model(
        model_fn, data, str(tmp_path / name), train_steps=steps, batch_size=4,
        validation_steps=0, save_every_n_steps=steps, seed=1, **kw,
    )  # fmt: skip
    tf.keras.utils.set_random_seed(0)
    (trained,) = made[-1:]
    reference = model_fn()
    for v, w in zip(reference.trainable_variables, _initial_weights(tmp_path, name)):
        v.assign(w)
    adam = keras.optimizers.Adam(float(rates[0]))
    adam.build(reference.trainable_variables)
    batch = next(iter(data("train").batch(4)))
    for s in range(steps):
        with tf.GradientTape() as tape:
            loss = reference.get_loss_fn()(batch, reference(batch["inputs"], mask=batch["mask"]))
        grads = tape.gradient(loss, reference.trainable_variables)
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip)
        adam.learning_rate = float(rates[s])  # (a constant-rate Adam's rate variable)
        adam.apply_gradients(zip(grads, reference.trainable_variables))
    return [v.numpy() for v in trained.trainable_variables], reference, result


_INITIAL = {}


def _initial_weights(tmp_path, name):
    return _INITIAL[(str(tmp_path), name)]


@pytest.fixture
def record_initial(monkeypatch, tmp_path):
    """Keeps each run's initial weights (the model as `model_fn` built it, before step 1)."""
    original = loop.fit_sequential_model

    def fit(model_fn, dataset_fn, model_dir, **kw):
        def recording():
            model = model_fn()
            _INITIAL[(str(tmp_path), os.path.basename(model_dir))] = [
                v.numpy() for v in model.trainable_variables
            ]
            return model

        return original(recording, dataset_fn, model_dir, **kw)

    monkeypatch.setattr(loop, "fit_sequential_model", fit)


def test_learning_rate_decays_per_step_to_its_floor(tmp_path, record_initial):
    """--learning_rate_decay / --min_learning_rate: the update at step s uses
    max(min, lr x decay^s), checked against Adam stepped by hand at those rates."""
    lr, decay, floor = 0.08, 0.5, 0.015
    rates = [0.08, 0.04, 0.02, 0.015]
    assert [schedule.learning_rate_at(s, lr, decay, floor) for s in range(4)] == rates
    weights, reference, result = _fit_and_replay(
        tmp_path, "decay", 4, rates, learning_rate=lr, learning_rate_decay=decay,
        min_learning_rate=floor,
    )  # fmt: skip
    # (the trainer's gradients are XLA's, the replay's eager: Adam's steps of ~lr, 1e-2 here,
    # carry their rounding; a rate one step off moves weights by more than 1e-2)
    for w, v in zip(weights, reference.trainable_variables):
        np.testing.assert_allclose(w, v.numpy(), rtol=2e-4, atol=2e-5)
    assert result["learning_rate"] == pytest.approx(floor)
    constant, _, _ = _fit_and_replay(tmp_path, "constant", 4, [lr] * 4, learning_rate=lr)
    assert max(np.abs(a - b).max() for a, b in zip(weights, constant)) > 0.01  # it matters


def test_gradients_are_clipped_to_their_global_norm(tmp_path, record_initial):
    """--clip_norm: the whole gradient scaled to the norm (not each tensor to it), checked
    against Adam stepped by hand on clipped gradients; the norms before clipping are kept."""
    clip = 1e-6  # tiny: Adam's epsilon (1e-7) then shows how far each gradient was scaled
    weights, reference, result = _fit_and_replay(
        tmp_path, "clipped", 2, [0.05, 0.05], clip=clip, learning_rate=0.05, clip_norm=clip
    )
    for w, v in zip(weights, reference.trainable_variables):
        np.testing.assert_allclose(w, v.numpy(), rtol=2e-4, atol=1e-7)
    assert len(result["gradient_norms"]) == 2 and min(result["gradient_norms"]) > 100 * clip
    free, _, plain = _fit_and_replay(tmp_path, "free", 2, [0.05, 0.05], learning_rate=0.05)
    assert "gradient_norms" not in plain
    moved = max(np.abs(a - b).max() for a, b in zip(free, weights))
    assert moved > 0.05  # unclipped, Adam's steps are ~lr; clipped this hard, far smaller


def test_a_resumed_run_keeps_the_schedule_and_takes_its_own_rate(tmp_path):
    """A decaying run split in two resumes exactly; a resume with another --learning_rate
    uses the new rate (the checkpoint holds no rate), and one written by a constant-rate
    optimizer (which saved its rate) still resumes."""
    data = fixed_slices(n=4, length=5)

    def fit(name, steps, **kw):
        tf.keras.utils.set_random_seed(0)
        kw.setdefault("learning_rate", 0.05)
        return loop.fit_sequential_model(
            fake_model("lstm.deterministic_lstm_with_heads"), data, str(tmp_path / name),
            train_steps=steps, batch_size=4, validation_steps=0, save_every_n_steps=1, **kw,
        )  # fmt: skip

    whole = fit("whole", 4, learning_rate_decay=0.5)
    fit("split", 2, learning_rate_decay=0.5)
    split = fit("split", 4, learning_rate_decay=0.5)
    assert split["start_step"] == 2 and split["learning_rate"] == whole["learning_rate"]
    np.testing.assert_allclose(split["train_losses"], whole["train_losses"][2:], rtol=1e-6)

    # An optimizer file of the old kind (the step counter, the rate, then the moments), resumed
    # with another rate: the new rate, not the saved one.
    fit("legacy", 1)
    (ckpt,) = checkpoints.list_complete_checkpoints(str(tmp_path / "legacy"))
    with np.load(ckpt.path("optimizer")) as f:
        values = [f[k] for k in sorted(f.files)]
    values.insert(1, np.float32(0.05))
    with open(ckpt.path("optimizer"), "wb") as f:
        np.savez(f, **{f"v{i:05d}": v for i, v in enumerate(values)})
    resumed = fit("legacy", 2, learning_rate=0.02)
    assert resumed["start_step"] == 1 and resumed["learning_rate"] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="learning_rate_decay must be in"):
        fit("bad", 1, learning_rate_decay=1.5)
    with pytest.raises(ValueError, match="min_learning_rate must be in"):
        fit("bad", 1, min_learning_rate=0.1)
    with pytest.raises(ValueError, match="clip_norm must be >= 0"):
        fit("bad", 1, clip_norm=-1.0)


def test_the_stage_passes_the_schedule_and_clipping_on(encoded_dir, tmp_path):
    """train_sequential_model (the script's library function) hands --learning_rate_decay,
    --min_learning_rate, --clip_norm and --batch_shards to the loop, and TensorBoard plots the
    rate and norm."""
    from rl755.common import tensorboard

    out = _train(
        tmp_path / "m", 3, learning_rate=0.04, learning_rate_decay=0.5, min_learning_rate=0.006,
        clip_norm=0.5, batch_shards=2,
    )  # fmt: skip
    assert out["batch_shards"] == 2  # (and --batch_shards)
    assert out["learning_rate"] == pytest.approx(0.006)  # 0.04 x 0.5^3 = 0.005, floored
    assert len(out["gradient_norms"]) == 3
    scalars = tensorboard.read_dir(str(tmp_path / "m" / "tensorboard" / "train"))
    assert [v for _, v in scalars["optimizer/learning_rate"]] == pytest.approx([0.01, 0.006])
    assert [v for _, v in scalars["optimizer/gradient_norm"]] == pytest.approx(
        [np.mean(out["gradient_norms"][:2]), out["gradient_norms"][2]]
    )


def test_batch_parts_give_the_same_losses_and_weights_as_one_batch(tmp_path):
    """batch_shards: each replica's batch in parts, each part's loss and gradient compiled
    apart; the parts' sums over the global counts make the same loss, gradient norm and
    Adam steps as the whole batch's, with XLA or without it (the plain path). The parts see
    different masks (sequence 1 is padded), so a part divided by its own counts, or a part's
    gradient left out, changes the numbers."""
    model_fn = fake_model("mdn_rnn.mdn_rnn_with_heads")
    kw = dict(dataset_fn=fixed_slices(n=8, length=6), train_steps=3, batch_size=8)
    kw.update(learning_rate=1e-2, validation_steps=0, clip_norm=50.0)
    runs = {}
    for name, extra in [
        ("plain", dict(jit_compile=False)),
        ("one", dict(batch_shards=1)),
        ("two", dict(batch_shards=2)),
        ("four", dict(batch_shards=4)),
    ]:
        tf.keras.utils.set_random_seed(0)
        runs[name] = loop.fit_sequential_model(
            model_fn, model_dir=str(tmp_path / name), **kw, **extra
        )
    assert [runs[n]["batch_shards"] for n in ("plain", "one", "two", "four")] == [1, 1, 2, 4]
    marker = checkpoints.newest_complete_checkpoint(str(tmp_path / "two"))
    assert marker.info["batch_shards"] == 2  # recorded: the parts sum in their own order
    weights = {n: ts.load_trained_model(str(tmp_path / n), model_fn).weights for n in runs}
    for name in ("one", "two", "four"):
        for key in ("train_losses", "gradient_norms"):
            np.testing.assert_allclose(runs[name][key], runs["plain"][key], rtol=1e-5)
        for a, b in zip(weights[name], weights["plain"]):  # (Adam's steps are ~1e-2)
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
        assert runs[name]["last_terms"].keys() == {"z", "reward", "done"}
        for k, v in runs[name]["last_terms"].items():
            assert v == pytest.approx(runs["plain"]["last_terms"][k], rel=1e-5)


def test_batch_parts_are_chosen_by_the_executors_threads_and_checked(monkeypatch):
    """Automatic parts: with XLA and an autoregressive task, the largest divisor of the
    replica's batch up to the threads (shared by the replicas), 8, and 4 sequences a part;
    one part without XLA or for infilling tasks. A requested count must divide the batch."""
    from rl755.models.sequential import tasks

    ar, infill = tasks.resolve_task("autoregressive"), tasks.resolve_task("infill")
    choose = sharding.choose_batch_shards
    assert choose(None, 16, True, ar, threads=2) == 2
    assert choose(None, 16, True, ar, threads=1) == 1
    assert choose(None, 16, True, ar, threads=32) == 4  # at least 4 sequences a part
    assert choose(None, 100, True, ar, threads=32) == 5  # 8 at most, a divisor of 100
    assert choose(None, 12, True, ar, threads=8) == 3
    assert choose(None, 15, True, ar, threads=2) == 1  # 15 has no divisor 2
    assert choose(None, 16, True, ar, replicas=2, threads=2) == 1
    assert choose(None, 16, False, ar, threads=2) == 1  # no XLA (cuDNN's LSTM on a GPU)
    assert choose(None, 16, True, infill, threads=2) == 1
    if not tf.config.threading.get_inter_op_parallelism_threads():  # (TF's default pool)
        monkeypatch.setattr(sharding, "usable_cores", lambda: 3)
        assert choose(None, 16, True, ar) == 2  # the usable cores, 3, have no divisor 3 of 16
    assert choose(4, 16, True, ar) == 4
    with pytest.raises(ValueError, match=r"batch_shards=3 must be a positive divisor .* \(16\)"):
        choose(3, 16, True, ar)
    with pytest.raises(ValueError, match="batch_shards=0"):
        choose(0, 16, True, ar)
    with pytest.raises(ValueError, match="autoregressive batches only"):
        choose(2, 16, True, infill)


def test_training_from_episode_starts_names_the_episodes_it_cuts(encoded_dir, tmp_path, caplog):
    """--slice_start=episode_start never trains on a rollout's steps after the first L (its end
    included): training says so once, naming how many rollouts and the longest. Slices long
    enough, or uniform slices, say nothing."""
    with caplog.at_level(logging.WARNING):
        _train(tmp_path / "cut", 1, slice_start="episode_start")
    cut = [r.getMessage() for r in caplog.records if "--sequence_length" in r.getMessage()]
    assert len(cut) == 1, cut
    assert cut[0].startswith(
        "4 of the first 4 train rollouts are longer than --sequence_length=6 (the longest: "
        "12 steps). With --slice_start=episode_start their later steps and their ends are "
        "never trained on"
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _train(tmp_path / "whole", 1, slice_start="episode_start", sequence_length=12)
        _train(tmp_path / "uniform", 1)
    assert not [r for r in caplog.records if "--sequence_length" in r.getMessage()]
    builder = VaeEncodedRollouts()
    assert seq_data.warn_if_episodes_are_cut(builder, 11, "episode_start") == (4, 4, 12)
    assert seq_data.warn_if_episodes_are_cut(builder, 12, "episode_start") == (0, 4, 12)
    assert seq_data.warn_if_episodes_are_cut(builder, 6, "uniform") == (0, 0, 0)
    assert seq_data.warn_if_episodes_are_cut(builder, 11, "episode_start", sample=2)[:2] == (2, 2)
