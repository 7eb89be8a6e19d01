"""The sequential trainer's optimizer: Adam's learning rate and its decay, gradient clipping, the
schedule across a resume, and batches split into parts (equal to one batch)."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import (
    fake_model,
    fixed_slices,
    train_mdn,
    write_encoded_dataset,
)

from rl755.common import checkpoints
from rl755.models.sequential import loop, schedule, sharding
from rl755.models.sequential import train as ts

_INITIAL = {}


@pytest.fixture
def encoded_dir(tmp_path):
    return write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")


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

    out = train_mdn(
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
