"""A built retrieval index in memory, searched from numpy or from inside a TF graph.

    memory = Memory.load("<model_dir>/retrieval_index")     # once per process and index
    values, dist, found = memory.search(windows, rollout_ids, k=4)   # numpy
    values, dist, found = memory.lookup(windows, rollout_ids, real, k=4)   # TF, any graph

    windows      float32 [..., w * (Z + A)]   the raw last-w-steps windows (queries)
    rollout_ids  int64 [...]                  fingerprint of the query's own rollout, 0: none
    values       float32 [..., k, V]          the retrieved items (retrieval_index docstring)
    dist         float32 [..., k]             mean squared difference of standardized keys
    found        float32 [..., k]             1 where an item was found (0: fewer than k)

`lookup` runs the search through `tf.numpy_function`, so it works in eager code, in
tf.function and in a `tf.while_loop` (a dream), on CPU; it is not XLA-compilable. Queries
where `real` is 0 (padding) are not searched. faiss runs single-threaded here (set in the
searching thread: OpenMP's setting is per thread): deterministic, and no OpenMP threads spinning
beside TensorFlow's.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from rl755.common import checkpoints
from rl755.models.retrieval.index import search_params

_CACHE: dict[tuple, Memory] = {}


class Memory:
    """The finished index of one directory: faiss index, values, exclusion ranges, stats."""

    def __init__(self, index, values, table: dict, info: dict):
        self.index, self.values, self.info = index, values, info
        self.mean, self.std = table["mean"], table["std"]
        w = int(info["window"])
        self._key_mean = np.tile(self.mean, w).astype(np.float32)
        self._key_std = np.tile(self.std, w).astype(np.float32)
        self.key_size = w * len(self.mean)
        starts = table["starts"]
        self._ranges = {
            int(fp): (int(starts[i]), int(starts[i + 1]))
            for i, fp in enumerate(table["fingerprints"])
        }
        self.nprobe = 16

    @property
    def value_size(self) -> int:
        return int(self.values.shape[1])

    @property
    def num_items(self) -> int:
        return int(self.values.shape[0])

    @classmethod
    def load(cls, index_dir: str) -> Memory:
        """The complete index of `index_dir` (cached per process: Ray workers and the agent's
        evaluators share one copy; values are memory-mapped)."""
        import faiss

        ckpt = checkpoints.newest_complete_checkpoint(index_dir)
        if ckpt is None or ckpt.info.get("kind") != "retrieval_index":
            raise FileNotFoundError(
                f"No complete retrieval index in {index_dir}. Stage 4 builds it: "
                "scripts/models/train_sequential_model.py --model=transformer.*_retrieval_"
                "transformer ... (rl755.models.retrieval.index.build_index)."
            )
        key = (os.path.abspath(ckpt.path("index")), os.path.getmtime(ckpt.path("index")))
        if key not in _CACHE:
            with np.load(ckpt.path("table")) as f:
                table = {k: f[k] for k in f.files}
            values = np.load(ckpt.path("values"), mmap_mode="r")
            _CACHE[key] = cls(faiss.read_index(ckpt.path("index")), values, table, ckpt.info)
        return _CACHE[key]

    def check_fits(self, settings, representation_size: int, action_size: int, what: str):
        """Fails when the index was built for other sizes or windows than `settings`."""
        want = dict(
            representation_size=int(representation_size),
            action_size=int(action_size),
            window=settings.window,
            continuation=settings.continuation,
        )
        got = {k: self.info.get(k) for k in want}
        if got != want:
            raise ValueError(
                f"{what}: the retrieval index was built for {got}, the model has {want}."
            )

    # ---- search ----------------------------------------------------------------------------------
    def _neighbours(self, queries: np.ndarray, rollout_ids: np.ndarray, k: int) -> np.ndarray:
        import faiss

        # OpenMP's thread count is per calling thread: TensorFlow runs numpy functions on its own
        # threads, which would otherwise start a team of spinning OpenMP threads per search.
        faiss.omp_set_num_threads(1)
        labels = np.full((len(queries), k), -1, np.int64)
        for fp in np.unique(rollout_ids):
            rows = np.nonzero(rollout_ids == fp)[0]
            span = self._ranges.get(int(fp)) if fp != 0 else None
            selector = None
            if span is not None and span[1] > span[0]:
                inner = faiss.IDSelectorRange(span[0], span[1])
                selector = faiss.IDSelectorNot(inner)
            params = search_params(self.index, selector, self.nprobe)
            _, labels[rows] = self.index.search(queries[rows], k, params=params)
        return labels

    def search(self, windows, rollout_ids=None, k: int = 4, real=None):
        """numpy: windows [N, wD], rollout_ids [N] (None: 0), real [N] (None: all)
        -> values [N, k, V], dist [N, k], found [N, k] (module docstring)."""
        windows = np.asarray(windows, np.float32).reshape(-1, self.key_size)
        n = len(windows)
        ids = np.zeros(n, np.int64) if rollout_ids is None else np.asarray(rollout_ids, np.int64)
        rows = np.arange(n) if real is None else np.nonzero(np.asarray(real).reshape(-1) > 0)[0]
        values = np.zeros((n, k, self.value_size), np.float32)
        dist = np.zeros((n, k), np.float32)
        found = np.zeros((n, k), np.float32)
        if len(rows):
            queries = (windows[rows] - self._key_mean) / self._key_std
            labels = self._neighbours(np.ascontiguousarray(queries), ids.reshape(-1)[rows], k)
            ok = labels >= 0
            got = np.asarray(self.values[np.where(ok, labels, 0).reshape(-1)]).reshape(
                len(rows), k, -1
            )
            got = got * ok[..., None]
            d = np.mean(np.square(got[..., : self.key_size] - queries[:, None, :]), axis=-1)
            values[rows], dist[rows], found[rows] = got, d * ok, ok
        return values, dist, found

    def lookup(self, windows, rollout_ids=None, real=None, k: int = 4):
        """TF: windows [..., wD], rollout_ids [...] int64 or None, real [...] or None
        -> (values [..., k, V], dist [..., k], found [..., k]), float32."""
        windows = tf.convert_to_tensor(windows, tf.float32)
        lead = tf.shape(windows)[:-1]
        flat = tf.reshape(windows, [-1, self.key_size])
        n = tf.shape(flat)[0]
        ids = tf.zeros([n], tf.int64) if rollout_ids is None else tf.reshape(rollout_ids, [-1])
        real = tf.ones([n]) if real is None else tf.reshape(tf.cast(real, tf.float32), [-1])

        def run(w, i, r):
            return self.search(w, i, k, r)

        values, dist, found = tf.numpy_function(
            run, [flat, tf.cast(ids, tf.int64), real], [tf.float32] * 3, stateful=False
        )
        values = tf.reshape(values, tf.concat([lead, [k, self.value_size]], 0))
        dist = tf.reshape(dist, tf.concat([lead, [k]], 0))
        found = tf.reshape(found, tf.concat([lead, [k]], 0))
        return values, dist, found
