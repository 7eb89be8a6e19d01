"""Retrieval of past experience (rl755/models/retrieval/model*.py): the windows, the faiss
index rebuilt identically after an interruption, the search against brute force with the
own rollout left out, acting = full pass at a bounded cost, dreaming, training and resume."""

import os

import faiss
import numpy as np
import pytest
import tensorflow as tf
from sequential_helpers import TINY_TRAINING, A, Z, fake_model, write_encoded_dataset

from rl755.common import checkpoints
from rl755.data import registry
from rl755.models.retrieval import index as ri
from rl755.models.retrieval.memory import Memory
from rl755.models.retrieval.model import index_dir
from rl755.models.sequential import loop
from rl755.models.sequential import train as ts

NAME = "transformer.tiny_retrieval_transformer_with_heads"


def _builder(directory, **kw):
    write_encoded_dataset(directory, **kw)
    cls = registry.encoded_rollouts_class("FAKE_PIXELS", "VaeEncodedRollouts")
    return cls(tfrecords_pattern=str(directory / "encoded-{split}*.tfrecord-*"))


def test_windows_of_one_rollout_by_hand():
    z = np.array([[0.0], [1.0], [2.0], [3.0]], np.float32)
    a = np.array([[10.0], [11.0], [12.0], [13.0]], np.float32)
    keys, cont, valid = ri.rollout_windows(z, a, ri.RetrievalSettings(window=2, continuation=2))
    np.testing.assert_array_equal(keys, [[0, 0, 0, 10], [0, 10, 1, 11], [1, 11, 2, 12]])
    np.testing.assert_array_equal(cont, [[1, 2], [1, 2], [1, 0]])
    np.testing.assert_array_equal(valid, [[1, 1], [1, 1], [1, 0]])
    keys, _, _ = ri.rollout_windows(z, a, ri.RetrievalSettings(window=2, stride=2))
    np.testing.assert_array_equal(keys[:, -2:], [[0, 10], [2, 12]])  # ends 0 and 2


def _files(directory):
    ckpt = checkpoints.newest_complete_checkpoint(str(directory))
    index = faiss.serialize_index(faiss.read_index(ckpt.path("index")))
    with np.load(ckpt.path("table")) as t:
        table = {k: t[k] for k in t.files}
    return ckpt.info, np.asarray(index), np.load(ckpt.path("values")), table


@pytest.mark.parametrize("index", ["Flat", "IVF4,Flat"])
def test_index_is_rebuilt_identically_after_an_interruption(tmp_path, monkeypatch, index):
    builder = _builder(tmp_path / "enc", rollouts_per_split=16, steps=12)
    settings = ri.RetrievalSettings(window=3, continuation=2, chunk_rollouts=3, index=index)
    args = (settings, Z, A)
    ri.build_index(builder, str(tmp_path / "a"), *args)
    calls, write = [], ri._write_chunk

    def interrupted(*a, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(1)
        return write(*a, **kw)

    monkeypatch.setattr(ri, "_write_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ri.build_index(builder, str(tmp_path / "b"), *args)
    assert checkpoints.newest_complete_checkpoint(str(tmp_path / "b")) is None
    assert len(checkpoints.list_complete_checkpoints(str(tmp_path / "b" / ri.CHUNKS))) == 2
    calls.clear()
    monkeypatch.setattr(ri, "_write_chunk", lambda *a, **kw: calls.append(1) or write(*a, **kw))
    ri.build_index(builder, str(tmp_path / "b"), *args)
    assert len(calls) == 4  # 16 rollouts in chunks of 3: the 2 finished chunks are not redone
    info_a, index_a, values_a, table_a = _files(tmp_path / "a")
    info_b, index_b, values_b, table_b = _files(tmp_path / "b")
    assert info_a == info_b and info_a["num_windows"] == 16 * 11
    assert info_a["faiss_index"] == index
    np.testing.assert_array_equal(index_a, index_b)
    np.testing.assert_array_equal(values_a, values_b)
    for k in table_a:
        np.testing.assert_array_equal(table_a[k], table_b[k])
    assert not os.path.exists(tmp_path / "b" / ri.CHUNKS)
    # Rerun: found, not rebuilt; other settings are refused.
    monkeypatch.setattr(ri, "_finish", None)
    ri.build_index(builder, str(tmp_path / "a"), *args)
    other = _builder(tmp_path / "enc2", rollouts_per_split=2, steps=8)  # training goes on elsewhere
    assert ri.build_index(other, str(tmp_path / "a"), *args).info["num_windows"] == 16 * 11
    with pytest.raises(ValueError, match="other settings: window=3 \\(now 2\\)"):
        ri.build_index(builder, str(tmp_path / "a"), ri.RetrievalSettings(window=2), Z, A)


def test_search_is_the_nearest_neighbours_without_the_own_rollout(tmp_path):
    builder = _builder(tmp_path / "enc", rollouts_per_split=6, steps=10)
    settings = ri.RetrievalSettings(window=2, continuation=3, index="Flat")
    ri.build_index(builder, str(tmp_path / "i"), settings, Z, A)
    memory = Memory.load(str(tmp_path / "i"))
    rollouts = list(ri._rollouts(builder, 0))
    z, a, fp = rollouts[2]
    keys, _, _ = ri.rollout_windows(z, a, settings)
    queries = keys[[0, 4, 8]]
    stored = np.asarray(memory.values[:, : memory.key_size])
    standardized = (queries - memory._key_mean) / memory._key_std

    def brute(exclude):
        d = np.mean(np.square(standardized[:, None] - stored[None]), -1)  # [3, M]
        lo, hi = memory._ranges[fp]
        if exclude:
            d[:, lo:hi] = np.inf
        return np.sort(d, axis=1)[:, :3], np.argsort(d, axis=1)[:, :3]

    values, dist, found = memory.search(queries, None, k=3)
    want, order = brute(False)
    np.testing.assert_allclose(dist, want, rtol=1e-5, atol=1e-7)
    assert np.all(dist[:, 0] < 1e-10) and found.all()  # each window finds itself
    np.testing.assert_allclose(values[:, 0], np.asarray(memory.values)[order[:, 0]], atol=1e-6)
    values, dist, _ = memory.search(queries, np.full(3, fp), k=3)
    np.testing.assert_allclose(dist, brute(True)[0], rtol=1e-5, atol=1e-7)
    assert np.all(dist > 1e-6)
    # Padding rows are not searched; asking for more items than exist marks them not found.
    values, dist, found = memory.search(queries, None, k=3, real=np.array([1, 0, 1]))
    assert not found[1].any() and not values[1].any() and found[[0, 2]].all()
    _, _, found = memory.search(queries[:1], None, k=memory.num_items + 2)
    assert found.sum() == memory.num_items


@pytest.fixture
def trained(tmp_path):
    """A tiny retrieval model trained 2 steps by the stage function, and its data."""
    builder = _builder(tmp_path / "data" / "fake" / "encoded_rollouts" / "vae", steps=12)
    model_dir = tmp_path / "models" / "retrieval"
    kw = dict(TINY_TRAINING, model=NAME)
    first = ts.train_sequential_model(model_dir=str(model_dir), train_steps=2, **kw)
    return builder, model_dir, first, kw


def test_stage_four_builds_the_index_trains_resumes_and_loads_it(trained, monkeypatch):
    builder, model_dir, first, kw = trained
    assert first["step"] == 2 and np.isfinite(first["validation"]["loss"])
    assert checkpoints.newest_complete_checkpoint(index_dir(model_dir)).info["num_windows"] == 44
    seen = []
    search = Memory.search

    def spy(self, windows, rollout_ids=None, k=4, real=None):
        seen.append(np.asarray(rollout_ids))
        return search(self, windows, rollout_ids, k, real)

    monkeypatch.setattr(Memory, "search", spy)
    second = ts.train_sequential_model(model_dir=str(model_dir), train_steps=3, **kw)
    assert second["start_step"] == 2 and second["step"] == 3
    assert seen and all(ids.min() != 0 for ids in seen)  # training slices name their rollout
    model = ts.load_trained_model(str(model_dir))
    x = next(iter(builder.get_autoregressive_slices(6, split="validation").batch(2)))["inputs"]
    hidden = model(x)["hidden"].numpy()
    state = model.initial_state(2)
    for t in range(6):
        h, state = model.step(x[:, t, :Z], x[:, t, Z:], state)
        np.testing.assert_allclose(h.numpy(), hidden[:, t], atol=1e-5)
    # Bounded cost: the state keeps its shapes, and each step searches one query per row.
    shapes = tf.nest.map_structure(lambda s: s.shape, state)
    seen.clear()
    for _ in range(5):
        h, state = model.step(x[:, 0, :Z], x[:, 0, Z:], state)
    assert tf.nest.map_structure(lambda s: s.shape, state) == shapes
    assert [ids.size for ids in seen] == [2] * 5 and all(ids.max() == 0 for ids in seen)
    # Without its index a model says where it comes from.
    for f in os.listdir(index_dir(model_dir)):
        if f.endswith(".json"):
            os.remove(os.path.join(index_dir(model_dir), f))
    with pytest.raises(FileNotFoundError, match="No complete retrieval index.*train_sequential"):
        ts.load_trained_model(str(model_dir))
    bare = fake_model(NAME)()
    bare.ensure_built()
    with pytest.raises(ValueError, match="has no retrieval index"):
        bare(x)


def test_resume_is_exact(tmp_path):
    builder = _builder(tmp_path / "enc", steps=12)
    ds = builder.get_autoregressive_slices(6, rollout_ids=True, shuffle_files=False).take(4)
    data = {k: np.stack([e[k] for e in ds.as_numpy_iterator()]) for k in ds.element_spec}

    def fit(model_dir, steps, save_every):
        fake_model(NAME)().build_extras(str(model_dir), builder)
        tf.keras.utils.set_random_seed(0)
        return loop.fit_sequential_model(
            fake_model(NAME),
            lambda split: tf.data.Dataset.from_tensor_slices(data).repeat(),
            model_dir=str(model_dir),
            train_steps=steps,
            batch_size=4,
            learning_rate=1e-2,
            save_every_n_steps=save_every,
            validation_steps=0,
            model_info={"environment": "FAKE_PIXELS", "model": NAME},
        )

    straight = fit(tmp_path / "a", 4, 4)
    fit(tmp_path / "b", 2, 2)
    resumed = fit(tmp_path / "b", 4, 2)
    np.testing.assert_allclose(resumed["train_losses"], straight["train_losses"][2:], rtol=1e-5)
    a, b = ts.load_trained_model(str(tmp_path / "a")), ts.load_trained_model(str(tmp_path / "b"))
    for va, vb in zip(a.weights, b.weights):
        np.testing.assert_allclose(va.numpy(), vb.numpy(), rtol=1e-5, atol=1e-6)


def test_dreams_run_on_the_index_inside_a_compiled_loop(trained):
    from rl755.controller.dream_eval import DreamEvaluator
    from rl755.controller.networks import LinearController

    _, model_dir, _, _ = trained
    model = ts.load_trained_model(str(model_dir))
    controller = LinearController(Z + model.hidden_size, A, [-1.0, 0, 0], [1.0, 1, 1])
    z0 = np.random.default_rng(0).normal(size=(3, Z)).astype(np.float32)
    dream = DreamEvaluator(model, controller, z0, max_steps=5, end_episodes=False)
    params = np.random.default_rng(1).normal(size=(2, controller.num_params)) * 0.1
    out = dream.evaluate(params, [0, 1, 2], seed=3)
    assert out["returns"].shape == (2, 3) and np.all(np.isfinite(out["returns"]))
    np.testing.assert_array_equal(out["returns"], dream.evaluate(params, [0, 1, 2], 3)["returns"])
    assert np.all(out["steps"] == 5)


# ---- the benchmark -------------------------------------------------------------------------------------
def test_benchmark_compares_retrieval_with_the_same_transformer_without(tmp_path):
    """benchmarks/research_world_models.py at tiny size (the numbers: README), then the
    evaluate_world_model.py library on the two model dirs: the retrieval model loads its
    index there, and the table says what each was trained with."""
    from sequential_helpers import load_benchmark

    from rl755.evaluation import benchmark
    from rl755.evaluation.run import run_benchmark

    research = load_benchmark("research_world_models")
    out = research.run(
        str(tmp_path / "r"),
        ["transformer", "retrieval"],
        num_rollouts=12,
        train_steps=6,
        batch_size=4,
        sequence_length=8,
        num_starts=8,
        dream_gap_episodes=2,
    )
    plain, retrieval = out["models"]
    assert plain["training"]["training_sequences"] == retrieval["training"]["training_sequences"]
    for m in (plain, retrieval):
        assert np.all(np.isfinite(m["open_loop"]["z_mse"])) and np.isfinite(m["next_step"]["z_mse"])
        assert np.isfinite(m["dream_gap"]["mean_abs_gap"])
    dirs = [str(tmp_path / "r" / "models" / name) for name in ("transformer", "retrieval")]
    again = run_benchmark(
        environment="FAKE_PIXELS",
        out_dir=str(tmp_path / "bench"),
        sequential_model_dirs=dirs,
        rollouts_pattern=str(tmp_path / "r" / "data" / "encoded-{split}*.tfrecord-*"),
        settings=benchmark.Settings(horizons=(1, 5, 10, 15), context_length=4, num_starts=8),
    )
    assert [m["training"]["train_steps"] for m in again["models"]] == [6, 6]
    assert "training steps" in again["table"]
    np.testing.assert_allclose(  # the same models and windows as the benchmark's own run
        again["models"][1]["open_loop"]["z_mse"], retrieval["open_loop"]["z_mse"], rtol=1e-5
    )


def test_index_standardizes_keys_and_continuations_by_the_rollouts_statistics(tmp_path):
    """mean and std per feature of x over every indexed step; an item's value is
    [(key - mean) / std, (z_(t+j) - z_t) / std_z, valid_j]."""
    builder = _builder(tmp_path / "enc", rollouts_per_split=3, steps=9)
    settings = ri.RetrievalSettings(window=2, continuation=3, index="Flat")
    ri.build_index(builder, str(tmp_path / "i"), settings, Z, A)
    memory = Memory.load(str(tmp_path / "i"))
    rollouts = list(ri._rollouts(builder, 0))
    x = np.concatenate([np.concatenate([z, a], 1) for z, a, _ in rollouts]).astype(np.float64)
    mean, std = x.mean(0), x.std(0)
    assert std.min() > 0.1  # (no feature falls back to std 1)
    np.testing.assert_allclose(memory.mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(memory.std, std, rtol=1e-4)
    wd, c = memory.key_size, settings.continuation
    for z, a, fp in rollouts:
        keys, cont, valid = ri.rollout_windows(z, a, settings)
        lo, hi = memory._ranges[fp]
        got = np.asarray(memory.values[lo:hi])
        np.testing.assert_allclose(
            got[:, :wd], (keys - np.tile(mean, 2)) / np.tile(std, 2), atol=1e-5
        )
        np.testing.assert_allclose(got[:, wd : wd + c * Z], cont / np.tile(std[:Z], c), atol=1e-5)
        np.testing.assert_array_equal(got[:, wd + c * Z :], valid)


def test_fusion_ignores_the_items_not_found():
    """Items with found = 0 take no part: changing them changes nothing, and with none found
    the fusion is the feed-forward block alone."""
    from rl755.models.retrieval.model import RetrievalFusion

    fusion = RetrievalFusion(num_heads=2)
    fusion.build((None, 8))
    rng = np.random.default_rng(0)
    for v in fusion.weights:
        v.assign(rng.normal(0, 0.5, v.shape).astype(np.float32))
    h = tf.constant(rng.normal(size=(3, 8)), tf.float32)
    values = rng.normal(size=(3, 4, 5)).astype(np.float32)
    dist = rng.uniform(0, 2, size=(3, 4)).astype(np.float32)
    found = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]], np.float32)
    base = fusion(h, values, dist, found).numpy()
    other_values, other_dist = values.copy(), dist.copy()
    other_values[found == 0] = rng.normal(0, 5, size=(int((found == 0).sum()), 5))
    other_dist[found == 0] = 7.0
    np.testing.assert_allclose(fusion(h, other_values, other_dist, found).numpy(), base, atol=1e-5)
    ffn = fusion.norm_out(h + fusion.ff2(fusion.ff1(fusion.norm_f(h)))).numpy()
    np.testing.assert_allclose(base[2], ffn[2], atol=1e-5)
    assert np.abs(base[:2] - ffn[:2]).max() > 1e-3  # found items do change h
