"""Process-level TensorFlow set-up: thread pools sized to a worker's share of the cores.

Two workers each using every core for math slow each other down ~5x (measured on the
World Models PyTorch port); call `limit_threads(n)` before TF runs any op.
"""

from __future__ import annotations

import os
import sys


def quiet() -> None:
    """Silences TF's C++ start-up chatter (call before importing tensorflow)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def limit_threads(num_threads: int | None) -> None:
    """Sets TF intra/inter-op pools to `num_threads` (None/0: leave TF's default)."""
    if not num_threads:
        return
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(num_threads)
        tf.config.threading.set_inter_op_parallelism_threads(max(1, min(2, num_threads)))
    except RuntimeError:
        # TF already initialized its runtime; the pools cannot change any more.
        pass


def limit_threads_without_importing(num_threads: int) -> None:
    """Like `limit_threads`, but never imports TensorFlow itself.

    For processes that may not need TF at all (a Ray rollout worker writing pickles): if TF is
    loaded its pools are set now; otherwise TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS
    are set, which TF's runtime reads when it starts (same thread counts, measured).
    """
    if "tensorflow" in sys.modules:
        limit_threads(num_threads)
        return
    os.environ["TF_NUM_INTRAOP_THREADS"] = str(num_threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = str(max(1, min(2, num_threads)))


def split_cpu_into_logical_devices(n: int) -> None:
    """Splits the CPU into `n` logical devices (tests of multi-device code without GPUs)."""
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
    )
