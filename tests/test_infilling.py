"""Infilling transformers (rl755/models/infilling/model.py, rl755/models/sequential/tasks.py): the tasks'
masks, what the infilling head reads (both sides, never the hidden z), acting step by step,
training by --task through the stage function and the script, exact resume."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import A, Z, fake_model, fixed_slices, train_tiny, write_encoded_dataset

from rl755.common import checkpoints
from rl755.models.sequential import loop
from rl755.models.sequential import train as ts
from rl755.models.sequential.tasks import resolve_task

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "transformer.tiny_infilling_transformer_with_heads"


def _batch(b=3, t=8, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "inputs": tf.constant(rng.normal(size=(b, t, Z + A)), tf.float32),
        "targets": tf.constant(rng.normal(size=(b, t, Z)), tf.float32),
        "rewards": tf.zeros([b, t]),
        "dones": tf.zeros([b, t]),
        "mask": tf.ones([b, t]),
        "target_mask": tf.ones([b, t]),
    }


# ---- tasks -----------------------------------------------------------------------------------------
def test_task_masks_are_seeded_spans_inside_real_steps():
    task = resolve_task("infill")
    mask = np.ones((64, 32), np.float32)
    mask[:8, 20:] = 0.0  # padding is never hidden
    m = task.infill_mask(mask, 5).numpy()
    np.testing.assert_array_equal(m, task.infill_mask(mask, 5).numpy())  # same step, same mask
    assert not np.array_equal(m, task.infill_mask(mask, 6).numpy())
    assert np.all(m <= mask) and m.sum(axis=1).min() >= 1
    assert 0.05 < m.mean() < 0.3  # two spans of at most 8 of 32 steps
    runs = [len(r) for row in m.astype(int) for r in "".join(map(str, row)).split("0") if r]
    assert max(runs) <= 16  # two merged spans at most
    kinds = [bool(resolve_task("mixed").is_infill_batch(s)) for s in range(200)]
    assert 70 < sum(kinds) < 130
    assert all(resolve_task("infill").is_infill_batch(s) for s in range(20))
    assert not any(resolve_task("autoregressive").is_infill_batch(s) for s in range(20))
    with pytest.raises(ValueError, match="autoregressive, infill, mixed"):
        resolve_task("denoise")


def test_infilling_reads_both_sides_never_the_hidden_z():
    model = fake_model(NAME)()
    model.ensure_built()
    x = _batch(b=1, t=10)["inputs"].numpy()
    hidden = np.zeros((1, 10), np.float32)
    hidden[0, 4:6] = 1.0
    mask = np.ones((1, 10), np.float32)

    def infill(x):
        return model.infill(tf.constant(x), mask, hidden)[0, 4].numpy()

    base = infill(x)
    for t, changes in ((4, False), (5, False), (1, True), (8, True)):
        y = x.copy()
        y[0, t, :Z] += 3.0  # the hidden z's (4, 5), a step before, a step after
        assert (np.abs(infill(y) - base).max() > 1e-4) == changes, t


def test_acting_is_the_causal_transformer_and_matches_the_full_pass():
    model = fake_model(NAME)()
    model.ensure_built()
    x = _batch(b=2, t=7)["inputs"]
    full = model(x)["hidden"].numpy()
    state = model.initial_state(2)
    for t in range(7):
        h, state = model.step(x[:, t, :Z], x[:, t, Z:], state)
        np.testing.assert_allclose(h.numpy(), full[:, t], atol=1e-5)
    # Causal: a change at step 5 leaves steps 0..4 as they were.
    y = x.numpy()
    y[:, 5] += 1.0
    np.testing.assert_allclose(
        model(tf.constant(y))["hidden"].numpy()[:, :5], full[:, :5], atol=1e-6
    )
    # The infilling head plays no part in acting.
    for w in model.infill_head.weights + model.infill_blocks[0].weights:
        w.assign(w + 1.0)
    np.testing.assert_allclose(model(x)["hidden"].numpy(), full, atol=1e-6)


def test_losses_of_each_task():
    model = fake_model(NAME)()
    model.ensure_built()
    batch = _batch()
    step = tf.constant(3, tf.int64)
    ar_sums, ar_counts = model.task_loss_sums(batch, resolve_task("autoregressive"), step, True)
    assert set(ar_sums) == {"z", "reward", "done"} and float(ar_counts["z"]) == 24
    inf_sums, inf_counts = model.task_loss_sums(batch, resolve_task("infill"), step, True)
    hidden = resolve_task("infill").infill_mask(batch["mask"], step)
    assert set(inf_sums) == {"infill"} and float(inf_counts["infill"]) == float(
        hidden.numpy().sum()
    )
    pred = model.infill(batch["inputs"], batch["mask"], hidden).numpy()
    err = np.mean(np.square(pred - batch["inputs"].numpy()[..., :Z]), -1)
    np.testing.assert_allclose(float(inf_sums["infill"]), err[hidden.numpy() > 0].sum(), rtol=1e-5)
    # Validation reports both kinds; a mixed training batch is of one kind.
    val, _ = model.task_loss_sums(batch, resolve_task("mixed"), step, False)
    assert set(val) == {"z", "reward", "done", "infill"}
    mixed = resolve_task("mixed")
    for s in range(6):
        sums, _ = model.task_loss_sums(batch, mixed, tf.constant(s, tf.int64), True)
        infills = bool(mixed.is_infill_batch(s))
        assert (float(sums["infill"]) > 0) == infills and (float(sums["z"]) > 0) != infills


# ---- training ----------------------------------------------------------------------------------------
def _fit(model_dir, steps, task, save_every):
    tf.keras.utils.set_random_seed(0)
    return loop.fit_sequential_model(
        fake_model(NAME),
        fixed_slices(n=4, length=6),
        model_dir=str(model_dir),
        train_steps=steps,
        batch_size=4,
        learning_rate=1e-2,
        save_every_n_steps=save_every,
        validation_steps=0,
        task=task,
    )


def test_mixed_training_resumes_exactly(tmp_path):
    mixed = resolve_task("mixed")
    assert len({bool(mixed.is_infill_batch(s)) for s in (2, 3)}) == 2  # both kinds after resuming
    straight = _fit(tmp_path / "a", 4, "mixed", 4)
    _fit(tmp_path / "b", 2, "mixed", 2)
    resumed = _fit(tmp_path / "b", 4, "mixed", 2)
    assert resumed["start_step"] == 2
    np.testing.assert_allclose(resumed["train_losses"], straight["train_losses"][2:], rtol=1e-5)
    a = ts.load_trained_model(str(tmp_path / "a"), fake_model(NAME))
    b = ts.load_trained_model(str(tmp_path / "b"), fake_model(NAME))
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-5, atol=1e-6)
    assert checkpoints.newest_complete_checkpoint(str(tmp_path / "a")).info["task"] == "mixed"


def _train(model_dir, steps, **kw):
    return train_tiny(model_dir, steps, kw.pop("model", NAME), **kw)


def test_infilling_pretraining_then_autoregressive_in_one_model_dir(tmp_path):
    write_encoded_dataset(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae")
    model_dir = tmp_path / "models" / "inf"
    first = _train(model_dir, 2, task="infill")
    assert set(first["last_terms"]) == {"infill"}
    assert set(first["validation"]) == {"loss", "z", "reward", "done", "infill"}
    second = _train(model_dir, 4, task="autoregressive")
    assert second["start_step"] == 2 and set(second["last_terms"]) == {"z", "reward", "done"}
    assert [c.info["task"] for c in checkpoints.list_complete_checkpoints(str(model_dir))] == [
        "infill",
        "autoregressive",
    ]
    loaded = ts.load_trained_model(str(model_dir))
    assert loaded.has_done_head and loaded.infill_head.built
    # Models without an infilling head refuse the task before anything is written.
    with pytest.raises(ValueError, match="--task=mixed.*autoregressive only.*infilling"):
        _train(tmp_path / "models" / "lstm", 2, model="lstm.deterministic_lstm", task="mixed")
    with pytest.raises(ValueError, match="--task='fill'"):
        _train(tmp_path / "models" / "bad", 2, task="fill")
    assert not os.path.exists(tmp_path / "models" / "lstm")
    assert not os.path.exists(tmp_path / "models" / "bad")


def test_script_takes_the_task_flag(tmp_path):
    data = write_encoded_dataset(tmp_path / "enc")
    model_dir = tmp_path / "m"
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "scripts/models/train_sequential_model.py"),
            "--environment=FAKE_PIXELS",
            f"--model={NAME}",
            "--rollouts_dataset=VaeEncodedRollouts",
            f"--rollouts_pattern={data}/encoded-{{split}}*.tfrecord-*",
            f"--model_dir={model_dir}",
            "--train_steps=2",
            "--batch_size=4",
            "--sequence_length=6",
            "--save_every_n_steps=2",
            "--validation_steps=0",
            "--task=mixed",
            "--num_threads=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": REPO},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert checkpoints.newest_complete_checkpoint(str(model_dir)).info["task"] == "mixed"


# ---- the benchmark -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_benchmark_compares_infilling_pretraining_at_equal_compute(tmp_path):
    """benchmarks/research_world_models.py at tiny size: autoregressive training alone,
    mixed, and infilling pretraining then autoregressive, the same steps each, scored by the
    world-model benchmark on held-out FAKE_PIXELS episodes (the numbers: README)."""
    from sequential_helpers import load_benchmark

    research = load_benchmark("research_world_models")
    variants = ["autoregressive", "mixed", "infill->AR"]
    out = research.run(
        str(tmp_path / "r"),
        variants,
        num_rollouts=12,
        train_steps=6,
        batch_size=4,
        sequence_length=8,
        num_starts=8,
        dream_gap_episodes=2,
    )
    models = {m["model"]: m for m in out["models"]}
    assert list(models) == variants
    assert {m["training"]["training_sequences"] for m in models.values()} == {24}
    assert models["infill->AR"]["training"]["task"] == "infill then autoregressive"
    for m in models.values():
        assert (
            np.all(np.isfinite(m["open_loop"]["z_mse"])) and len(m["open_loop"]["frame_mse"]) == 4
        )
        assert np.isfinite(m["dream_gap"]["mean_abs_gap"]) and m["episode_end"] is not None
    assert "infill then autoregressive" in out["table"] and "dream gap" in out["table"]
    assert (tmp_path / "r" / "research.json").exists() and (tmp_path / "r" / "table.txt").exists()


def test_span_lengths_are_uniform_up_to_the_longest_span():
    """One span per sequence, T = 32, max_span_fraction 0.25: lengths 1..8, each about 1/8
    of the spans that do not reach the end; starts among the real steps only."""
    task = resolve_task("infill", num_spans=1)
    m = task.infill_mask(np.ones((800, 32), np.float32), 7).numpy().astype(int)
    lengths, ends = m.sum(1), np.array([np.nonzero(row)[0].max() for row in m])
    unclipped = lengths[ends < 31]
    counts = np.bincount(unclipped, minlength=10)
    assert counts[0] == 0 and counts[9] == 0 and lengths.max() == 8
    assert np.all(np.abs(counts[1:9] / len(unclipped) - 1 / 8) < 0.05), counts
    short = np.zeros((800, 32), np.float32)
    short[:, :5] = 1.0  # 5 real steps: every sequence still hides at least one
    m = task.infill_mask(short, 7).numpy()
    assert m.sum(1).min() >= 1 and not m[:, 5:].any()


def test_infilling_head_never_reads_padded_steps():
    model = fake_model(NAME)()
    model.ensure_built()
    x = _batch(b=2, t=8)["inputs"].numpy()
    mask = np.ones((2, 8), np.float32)
    mask[:, 5:] = 0.0
    hidden = np.zeros((2, 8), np.float32)
    hidden[:, 2:4] = 1.0
    base = model.infill(tf.constant(x), mask, hidden).numpy()[:, :5]
    y = x.copy()
    y[:, 5:] = np.random.default_rng(1).normal(0, 10, size=y[:, 5:].shape)
    np.testing.assert_allclose(
        model.infill(tf.constant(y), mask, hidden).numpy()[:, :5], base, atol=1e-5
    )
