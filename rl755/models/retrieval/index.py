"""The nearest-neighbour index of a retrieval model: windows of the training rollouts (faiss).

    settings = RetrievalSettings(window=4, num_neighbors=4, continuation=4)
    build_index(builder, "<model_dir>/retrieval_index", settings, representation_size=32,
                action_size=3)                          # stage 4, before training; resumable
    memory = Memory.load("<model_dir>/retrieval_index")  # cached per process
    values, dist, found = memory.search(windows, rollout_ids, k=4)

What is indexed. For every training rollout (its steps x_t = [z_t, a_t], D = Z + A), one item
per `stride` steps t that have a next step:
    key    the window x_{t-w+1} .. x_t (w = window; zeros before the rollout's start), [w D],
           standardized per feature of x (mean and std over the indexed rollouts' steps);
    value  [key, (z_{t+j} - z_t) / std_z for j = 1..c, valid_j]   [w D + c Z + c]
           (c = continuation: what followed, zero and not valid past the rollout's end).
A query is built the same way from the model's own last w steps. The search is faiss's
(`index`: "auto" = exact "Flat" up to 20,000 items, else "IVF<nlist>,Flat" probing `nprobe`
lists; or any faiss factory string of the Flat, IVF or HNSW families). Cost per query: the
index's, independent of how long an episode has run. Distances given to the model are
recomputed in numpy (mean squared difference of standardized keys), so they do not depend
on how faiss batched the queries.

Own-rollout exclusion: items of one rollout are contiguous; a query carrying a rollout's
fingerprint (rl755.data.common.rollout_datasets.rollout_fingerprint; training slices carry
it) gets no item of that rollout (faiss IDSelectorNot(IDSelectorRange)), else training would
retrieve the very continuation it must predict. Acting and dreaming pass 0: no exclusion.

On disk (rl755.common.checkpoints, so a reader only sees complete files):
    <index_dir>/model-001.json, .faiss, .values.npy, .table.npz   the finished index
    <index_dir>/windows/model-NNN.json, .windows.npz               chunk N of `chunk_rollouts`
                                                                   rollouts, while building
Rollouts are read in sorted shard order; rerunning after an interruption reads the finished
chunks back and continues after them, so an interrupted build gives the same index as an
uninterrupted one (the chunks must come from the same data). The chunks are deleted once the
index is complete; a complete index is kept when training resumes on other data.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import numpy as np
from absl import logging

from rl755.common import checkpoints

CHUNKS = "windows"
_FLAT_LIMIT = 20_000


@dataclasses.dataclass(frozen=True)
class RetrievalSettings:
    """What a retrieval model retrieves (see the module docstring).

    Attributes:
      window: w, steps in a key window.
      num_neighbors: k, items retrieved per step.
      continuation: c, steps after a window stored with it.
      stride: index a window every `stride` steps of a rollout.
      max_windows: index at most this many windows (the first rollouts, sorted shard order).
      index: "auto" or a faiss index factory string (Flat, IVF or HNSW family).
      nprobe: inverted lists probed per query (IVF indexes).
      chunk_rollouts: rollouts per saved chunk while building (the unit of resuming).
    """

    window: int = 4
    num_neighbors: int = 4
    continuation: int = 4
    stride: int = 1
    max_windows: int = 50_000
    index: str = "auto"
    nprobe: int = 16
    chunk_rollouts: int = 64

    def __post_init__(self):
        for name in ("window", "num_neighbors", "continuation", "stride", "max_windows"):
            if int(getattr(self, name)) < 1:
                raise ValueError(
                    f"RetrievalSettings.{name} must be >= 1, got {getattr(self, name)}."
                )

    def index_identity(self) -> dict:
        """The settings an index is built with (num_neighbors and nprobe are read at search)."""
        keep = ("window", "continuation", "stride", "max_windows", "index", "chunk_rollouts")
        return {k: getattr(self, k) for k in keep}


def value_size(settings: RetrievalSettings, z: int, a: int) -> int:
    return settings.window * (z + a) + settings.continuation * (z + 1)


# ---- windows of one rollout ----------------------------------------------------------------------
def rollout_windows(z: np.ndarray, a: np.ndarray, settings: RetrievalSettings):
    """z [n, Z], a [n, A] -> raw keys [m, w D], continuations [m, c Z] (z_{t+j} - z_t),
    valid [m, c], for the m window ends t = 0, stride, ... < n - 1."""
    w, c = settings.window, settings.continuation
    x = np.concatenate([z, a], axis=1).astype(np.float32)
    n = len(x)
    ends = np.arange(0, max(n - 1, 0), settings.stride)
    xp = np.concatenate([np.zeros((w - 1, x.shape[1]), np.float32), x])
    keys = np.stack([xp[ends + j] for j in range(w)], axis=1).reshape(len(ends), -1)
    zp = np.concatenate([z, np.zeros((c, z.shape[1]), z.dtype)]).astype(np.float32)
    later = ends[:, None] + np.arange(1, c + 1)[None, :]  # [m, c]
    valid = (later <= n - 1).astype(np.float32)
    cont = (zp[later] - z[ends][:, None, :]) * valid[..., None]
    return keys, cont.reshape(len(ends), -1), valid


# ---- building ------------------------------------------------------------------------------------
def _identity(settings, z, a, pattern) -> dict:
    return dict(
        kind="retrieval_index",
        representation_size=int(z),
        action_size=int(a),
        rollouts_pattern=pattern,
        **settings.index_identity(),
    )


def _check_identity(ckpt, identity: dict, where: str) -> None:
    diff = {k: (ckpt.info.get(k), v) for k, v in identity.items() if ckpt.info.get(k) != v}
    if diff:
        details = ", ".join(f"{k}={old!r} (now {new!r})" for k, (old, new) in diff.items())
        raise ValueError(
            f"{where} holds a retrieval index built with other settings: {details}. Use "
            "another --model_dir, or the original model and data to resume."
        )


def _write_chunk(chunks_dir, number, rollouts, settings, identity) -> dict:
    keys, conts, valids, fps, counts = [], [], [], [], []
    sums, sumsq, steps = 0.0, 0.0, 0
    for z, a, fp in rollouts:
        k, c, v = rollout_windows(z, a, settings)
        keys.append(k), conts.append(c), valids.append(v)
        fps.append(fp), counts.append(len(k))
        x = np.concatenate([z, a], axis=1).astype(np.float64)
        sums, sumsq, steps = sums + x.sum(0), sumsq + np.square(x).sum(0), steps + len(x)
    arrays = dict(
        keys=np.concatenate(keys),
        continuations=np.concatenate(conts),
        valid=np.concatenate(valids),
        fingerprints=np.asarray(fps, np.int64),
        counts=np.asarray(counts, np.int64),
        sums=np.asarray(sums, np.float64),
        sumsq=np.asarray(sumsq, np.float64),
        steps=np.asarray(steps, np.int64),
    )

    def write(path):
        with open(path, "wb") as f:
            np.savez(f, **arrays)

    info = dict(identity, step=number, windows=int(arrays["counts"].sum()))
    checkpoints.write_checkpoint(chunks_dir, number, {"windows": (".windows.npz", write)}, info)
    return arrays


def _read_chunks(chunks_dir, identity) -> list[dict]:
    done = checkpoints.list_complete_checkpoints(chunks_dir)
    chunks = []
    for i, ckpt in enumerate(done, start=1):
        if ckpt.number != i:  # a gap: what follows it was written out of order; redo it
            break
        _check_identity(ckpt, identity, chunks_dir)
        with np.load(ckpt.path("windows")) as f:
            chunks.append({k: f[k] for k in f.files})
    return chunks


def _rollouts(builder, skip: int):
    """(z [n, Z], a [n, A], fingerprint) of the training rollouts, sorted order, after `skip`."""
    from rl755.data.common.rollout_datasets import rollout_fingerprint

    ds = builder.rollouts_ds("train", repeat=False, shuffle_files=False).skip(skip)
    ds = ds.map(lambda r: (r["observations"], r["actions"], rollout_fingerprint(r["observations"])))
    for z, a, fp in ds.as_numpy_iterator():
        yield z, a, int(fp)


def make_faiss_index(description: str, dim: int, num_items: int):
    """A faiss index for `num_items` keys of `dim` dimensions ("auto": module docstring)."""
    import faiss

    if description == "auto":
        nlist = int(min(4096, max(1, 4 * np.sqrt(num_items)), max(1, num_items // 39)))
        description = "Flat" if num_items <= _FLAT_LIMIT else f"IVF{nlist},Flat"
    try:
        index = faiss.index_factory(int(dim), description, faiss.METRIC_L2)
    except RuntimeError as e:
        raise ValueError(
            f"Retrieval index {description!r} is not a faiss factory string: {e}"
        ) from None
    search_params(index, None, 1)  # fails for unsupported families
    return index, description


def search_params(index, selector, nprobe: int):
    """faiss SearchParameters of the right family for `index`, with `selector` (or None)."""
    import faiss

    kw = {"sel": selector} if selector is not None else {}
    if isinstance(index, faiss.IndexFlat):
        return faiss.SearchParameters(**kw)
    if isinstance(index, faiss.IndexHNSW):
        return faiss.SearchParametersHNSW(**kw)
    try:
        faiss.extract_index_ivf(index)
    except RuntimeError:
        raise ValueError(
            f"Retrieval index {type(index).__name__} is not supported: use 'auto' or a faiss "
            "factory string of the Flat, IVF or HNSW family (e.g. 'Flat', 'IVF256,Flat', 'HNSW32')."
        ) from None
    return faiss.SearchParametersIVF(nprobe=int(nprobe), **kw)


def _finish(index_dir, chunks, settings, identity) -> checkpoints.Checkpoint:
    import faiss

    if not chunks or sum(int(c["counts"].sum()) for c in chunks) == 0:
        raise ValueError(
            f"No window to index for {index_dir}: the training rollouts need at least 2 steps."
        )
    keys = np.concatenate([c["keys"] for c in chunks])[: settings.max_windows]
    conts = np.concatenate([c["continuations"] for c in chunks])[: len(keys)]
    valid = np.concatenate([c["valid"] for c in chunks])[: len(keys)]
    fps = np.concatenate([c["fingerprints"] for c in chunks])
    starts = np.minimum(
        np.concatenate([[0], np.cumsum(np.concatenate([c["counts"] for c in chunks]))]), len(keys)
    )
    steps = sum(int(c["steps"]) for c in chunks)
    mean = sum(c["sums"] for c in chunks) / steps
    var = sum(c["sumsq"] for c in chunks) / steps - np.square(mean)
    std = np.sqrt(np.maximum(var, 0.0))
    std = np.where(std > 1e-6, std, 1.0)
    z = identity["representation_size"]
    w, c = settings.window, settings.continuation
    keys_std = ((keys - np.tile(mean, w)) / np.tile(std, w)).astype(np.float32)
    values = np.concatenate(
        [keys_std, (conts / np.tile(std[:z], c)).astype(np.float32), valid], axis=1
    ).astype(np.float32)
    index, description = make_faiss_index(settings.index, keys_std.shape[1], len(keys_std))
    if not index.is_trained:
        rng = np.random.default_rng(0)
        sample = keys_std
        if len(sample) > 256 * 4096:
            sample = sample[np.sort(rng.choice(len(sample), 256 * 4096, replace=False))]
        index.train(sample)
    index.add(keys_std)
    table = dict(
        fingerprints=fps,
        starts=starts.astype(np.int64),
        mean=mean.astype(np.float32),
        std=std.astype(np.float32),
    )

    def write_table(path):
        with open(path, "wb") as f:
            np.savez(f, **table)

    def write_values(path):
        with open(path, "wb") as f:
            np.save(f, values)

    info = dict(
        identity,
        step=len(values),
        num_windows=len(values),
        num_rollouts=len(fps),
        num_steps=steps,
        faiss_index=description,
    )
    ckpt = checkpoints.write_checkpoint(
        index_dir,
        1,
        {
            "index": (".faiss", lambda p: faiss.write_index(index, p)),
            "values": (".values.npy", write_values),
            "table": (".table.npz", write_table),
        },
        info,
    )
    logging.info(
        "Retrieval index %s: %d windows of %d rollouts (%s).",
        index_dir,
        len(values),
        len(fps),
        description,
    )
    return ckpt


def build_index(
    builder,
    index_dir: str,
    settings: RetrievalSettings,
    representation_size: int,
    action_size: int,
) -> checkpoints.Checkpoint:
    """Builds (or finishes, or finds) the index of `builder`'s training rollouts in
    `index_dir`; returns its checkpoint. Settings that differ from a previous run's fail."""
    identity = _identity(settings, representation_size, action_size, builder.tfrecords_pattern())
    done = checkpoints.newest_complete_checkpoint(index_dir)
    if done is not None:  # finished: kept, also when training goes on with other data
        _check_identity(
            done, {k: v for k, v in identity.items() if k != "rollouts_pattern"}, index_dir
        )
        if done.info.get("rollouts_pattern") != identity["rollouts_pattern"]:
            logging.info("Keeping the retrieval index of %s.", done.info.get("rollouts_pattern"))
        return done
    chunks_dir = os.path.join(index_dir, CHUNKS)
    chunks = _read_chunks(chunks_dir, identity)
    windows = sum(int(c["counts"].sum()) for c in chunks)
    read = sum(len(c["fingerprints"]) for c in chunks)
    if chunks:
        logging.info("Retrieval index: resuming after %d rollouts (%d chunks).", read, len(chunks))
    pending = []
    for rollout in _rollouts(builder, read) if windows < settings.max_windows else ():
        pending.append(rollout)
        if len(pending) == settings.chunk_rollouts:
            chunks.append(_write_chunk(chunks_dir, len(chunks) + 1, pending, settings, identity))
            pending = []
            windows += int(chunks[-1]["counts"].sum())
            if windows >= settings.max_windows:
                break
    if pending:
        chunks.append(_write_chunk(chunks_dir, len(chunks) + 1, pending, settings, identity))
    ckpt = _finish(index_dir, chunks, settings, identity)
    shutil.rmtree(chunks_dir, ignore_errors=True)
    return ckpt
