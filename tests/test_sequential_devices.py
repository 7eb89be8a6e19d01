"""Sequential training on several devices and compilers: two logical CPUs equal one, two srun
tasks train one model, XLA equals eager, and the benchmark's reference is the trainer's step."""

import glob
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import (
    Z,
    checkpoint_steps,
    fake_model,
    fixed_slices,
    write_encoded_dataset,
)

from rl755.models.sequential import loop
from rl755.models.sequential import train as ts

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def encoded_dir(tmp_path):
    return write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")


@pytest.mark.slow
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
    assert checkpoint_steps(model_dir) == [2]
    assert len(glob.glob(str(model_dir / "runs" / "*.json"))) == 2


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
