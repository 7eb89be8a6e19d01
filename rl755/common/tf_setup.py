"""Process-level TensorFlow set-up: quiet start-up, thread pools sized to a worker's share
of the cores.

Quiet start-up. Importing TensorFlow 2.21 writes a dozen lines to stderr from C++ code that
logs before absl's logging is initialized, so TF_CPP_MIN_LOG_LEVEL does not reach them:
"All log messages before absl::InitializeLog() ...", the oneDNN notice, "Could not find cuda
drivers", and on a machine without an NVIDIA device the cuInit error of the first device
query. Every Ray worker repeats them. `quiet()` (run by `import rl755`, so in every stage and
every worker that unpickles rl755 code) sets TF_CPP_MIN_LOG_LEVEL=2 and catches stderr while
TensorFlow is first imported and its devices are first listed, then writes back every line
except those (`NOISE`). Other warnings and errors pass; the cuInit error too on a machine
with an NVIDIA device. RL755_TF_STARTUP_LOGS=1 shows everything.

One more line comes later, at the first op of an integer type that oneDNN declines: "oneDNN
supports DT_INT32 only on platforms with AVX-512. Falling back to the default Eigen-based
implementation", at error level, once per process, even on CPUs that have AVX-512 (TFP's
mixture sampling transposes int32 indices: every dream worker printed it). Nothing is wrong:
Eigen computes it. `absorb_onednn_type_notice()` (the MDN head calls it) runs one such op
under the filter first, so the process has printed it and never shows it.

Workers that each use every core for math slow each other down; call `limit_threads(n)`
before TF runs any op.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import tempfile

# Start-up lines that say nothing a user can act on (substrings).
NOISE = (
    "All log messages before absl::InitializeLog() is called are written to STDERR",
    "oneDNN custom operations are on",
    "Could not find cuda drivers on your machine",
    "TF-TRT Warning: Could not find TensorRT",
    "Unable to register cuDNN factory",
    "Unable to register cuFFT factory",
    "Unable to register cuBLAS factory",
    "computation placer already registered",
)
# Printed once per process at the first integer op oneDNN declines (`absorb_onednn_type_notice`).
ONEDNN_TYPE_NOTICE = "Falling back to the default Eigen-based implementation"
# ... and on a machine without an NVIDIA device (on a GPU node they matter).
NOISE_WITHOUT_GPU = ("failed call to cuInit",)


def _has_nvidia_device() -> bool:
    return os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")


def is_noise(line: str) -> bool:
    """Whether a stderr line is TensorFlow start-up chatter (see `NOISE`)."""
    if any(n in line for n in NOISE):
        return True
    return not _has_nvidia_device() and any(n in line for n in NOISE_WITHOUT_GPU)


@contextlib.contextmanager
def filtered_stderr(also: tuple[str, ...] = ()):
    """Catches what the process writes to file descriptor 2 in the body (C++ code too) and
    writes it back without the `is_noise` lines (nor those containing one of `also`) when the
    body ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines = tmp.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(
                line for line in lines if not is_noise(line) and not any(a in line for a in also)
            )
            if kept:
                os.write(2, kept.encode())


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Runs the first `import tensorflow` (and its first device listing) in `filtered_stderr`."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "tensorflow":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def quiet_exec_module(module):
            with filtered_stderr():
                exec_module(module)
                with contextlib.suppress(Exception):  # CUDA is probed (cuInit) here
                    module.config.list_physical_devices()

        spec.loader.exec_module = quiet_exec_module
        return spec


def quiet() -> None:
    """Silences TensorFlow's start-up chatter in this process (see the module docstring).
    Call before TensorFlow is imported; `import rl755` does."""
    if os.environ.get("RL755_TF_STARTUP_LOGS") == "1":
        return  # everything TensorFlow prints, at its own log level
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:
        return
    if not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


_absorbed = False


def absorb_onednn_type_notice() -> None:
    """Runs one int32 op (eagerly, also while a tf.function traces) with its oneDNN notice
    filtered out, once per process, so the notice (module docstring) never reaches the
    user. A no-op with RL755_TF_STARTUP_LOGS=1."""
    global _absorbed
    if _absorbed or os.environ.get("RL755_TF_STARTUP_LOGS") == "1":
        return
    _absorbed = True
    import tensorflow as tf

    with filtered_stderr(also=(ONEDNN_TYPE_NOTICE,)), tf.init_scope():
        tf.transpose(tf.zeros([1, 2], tf.int32))


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
    are set, which TF's runtime reads when it starts (the same thread counts).
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
