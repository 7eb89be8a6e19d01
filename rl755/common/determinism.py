"""Repeatable runs: the one place where a stage seeds its randomness and asks for
deterministic TensorFlow (`--seed`, `--deterministic` of every stage script).

    from rl755.common import determinism

    settings = determinism.configure(seed=3, deterministic=None)  # first thing a stage does
    settings.as_dict()
    # {"seed": 3, "deterministic": True, "decided_by": "default: no GPU visible",
    #  "op_determinism": True, "tensorflow": "2.21.0", "intra_op_threads": 0, ...}
    determinism.current()   # the same settings, read by rl755.common.run_record

What `configure` does:
  - Always: seeds Python's `random`, NumPy's global generator and TensorFlow's global seed
    (`keras.utils.set_random_seed`). Keras initializers without their own seed draw theirs
    from Python's `random`; `tf.random.*` ops and `tf.data` shuffles without their own seed
    derive theirs from TensorFlow's global seed and their position in the program. So the
    same program with the same seed makes the same random numbers.
  - Deterministic (`deterministic=True`): also `tf.config.experimental.enable_op_determinism`.
    Ops use deterministic kernels (or raise `UnimplementedError`), and tf.data produces its
    elements in a fixed order: `map`/`interleave` ignore `deterministic=False`, functions with
    stateful (random) ops run in order. That costs speed in input pipelines (and on GPUs).
    `deterministic=False` turns it off again (the setting is per process).
  - Child processes (Ray workers, subprocesses started afterwards) inherit the choice through
    the environment variable TF_DETERMINISTIC_OPS ("1" or "0"), which TensorFlow reads when
    it starts; `child_environ()` gives it for workers on other machines.

How `deterministic=None` (the flag not given) is decided: on when no GPU is visible to
TensorFlow (`tf.config.list_physical_devices("GPU")` is empty), because on a CPU the cost is
small; off on a GPU machine, where deterministic kernels can be much slower. Pass
`--deterministic` or `--nodeterministic` to choose. The decision is recorded with the run
(`runs/*.json`: "determinism").

What is bit for bit repeatable with it: docs/getting-started/repeatable-runs.md. In short: with the
same seed, the same command, the same machine (CPU type, thread counts: 1 and 2 intra-op
threads give weights ~4e-6 apart after 20 VAE steps) and the same software versions, every
stage gives the same outputs. Not across TF versions or CPU types (kernels may differ), nor
where the environment itself is not a function of its seed.
"""

from __future__ import annotations

import dataclasses
import os
import sys

# Help text of every stage script's --deterministic flag (one wording everywhere).
FLAG_HELP = (
    "Bit-for-bit repeatable run: seeded everything plus TensorFlow op determinism and ordered "
    "tf.data (slower input pipelines). Default: on when no GPU is visible, off on a GPU "
    "(pass --deterministic / --nodeterministic to choose). See docs/getting-started/"
    "repeatable-runs.md."
)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What `configure` set. Attributes:
    seed: the seed of Python, NumPy and TensorFlow's global generators.
    deterministic: whether op determinism (and ordered tf.data) is on.
    decided_by: why: "--deterministic", "--nodeterministic", or the default's reason.
    """

    seed: int
    deterministic: bool
    decided_by: str

    def as_dict(self) -> dict:
        import tensorflow as tf

        threading = tf.config.threading
        return {
            **dataclasses.asdict(self),
            "op_determinism": op_determinism_enabled(),
            "tensorflow": tf.__version__,
            # Results depend on these too (how reductions are split); 0: TF's default.
            "intra_op_threads": threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": threading.get_inter_op_parallelism_threads(),
            "cpu_count": os.cpu_count(),
        }


_CURRENT: Settings | None = None
ENV_VAR = "TF_DETERMINISTIC_OPS"  # read by TensorFlow at start-up


def gpu_visible() -> bool:
    """True if TensorFlow sees a GPU (does not initialize TensorFlow's runtime)."""
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def resolve(deterministic: bool | None) -> tuple[bool, str]:
    """(on or off, why) for a --deterministic flag value (None: not given)."""
    if deterministic is True:
        return True, "--deterministic"
    if deterministic is False:
        return False, "--nodeterministic"
    if gpu_visible():
        return False, "default: a GPU is visible (deterministic kernels are slow there)"
    return True, "default: no GPU visible"


def _tf_config():
    from tensorflow.python.framework import config

    return config


def op_determinism_enabled() -> bool:
    return bool(_tf_config().is_op_determinism_enabled())


def random_map_options(deterministic: bool = True) -> dict:
    """Keyword arguments of `tf.data.Dataset.map` for a function that draws random numbers.

    Under op determinism: none, i.e. one call at a time in order, which is how tf.data runs
    such a map then anyway. Otherwise parallel calls (`tf.data.AUTOTUNE`) with
    `deterministic`. Asked for parallel calls under determinism, tf.data rewrote the map into
    a sequential one, and the rewrite logged an ERROR line ("NodeDef mentions attribute
    use_unbounded_threadpool which is not in the op definition") each time an iterator was
    made: twice at the start of every encoder training.
    """
    import tensorflow as tf

    if op_determinism_enabled():
        return {}
    return {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": deterministic}


def set_op_determinism(enabled: bool) -> None:
    """Turns TensorFlow's op determinism on or off for this process."""
    import tensorflow as tf

    if enabled:
        tf.config.experimental.enable_op_determinism()
    else:
        _tf_config().disable_op_determinism()


def configure(seed: int, deterministic: bool | None = None) -> Settings:
    """Seeds Python, NumPy and TensorFlow with `seed` and sets op determinism; see the module
    docstring. Call it first in a stage (before any model or dataset is built)."""
    global _CURRENT
    import keras

    if seed is None or int(seed) < 0:
        raise ValueError(f"--seed must be a non-negative integer, got {seed}.")
    on, why = resolve(deterministic)
    keras.utils.set_random_seed(int(seed))
    set_op_determinism(on)
    os.environ.update(child_environ(on))
    _CURRENT = Settings(int(seed), on, why)
    return _CURRENT


def reseed_segment(seed: int, step: int, model=None) -> None:
    """Starts the checkpoint segment that begins at `step`: seeds Python, NumPy and TensorFlow
    with `seed + step` and restarts the Keras seed generators of `model` (dropout) from it.

    Call it, then re-create the segment's datasets (and traced steps holding stateful random
    ops), at the start of a run and at every checkpoint: the segment's draws are then a
    function of (seed, step) only, and a run resumed at a checkpoint draws exactly what an
    uninterrupted run drew there."""
    import keras
    import numpy as np

    keras.utils.set_random_seed(int(seed) + int(step))
    for layer in [] if model is None else model._flatten_layers():
        for generator in getattr(layer, "_seed_generators", ()):
            value = [np.random.randint(1, 2**31 - 1), 0]
            generator.state.assign(np.asarray(value, generator.state.dtype))


def child_environ(deterministic: bool | None = None) -> dict[str, str]:
    """Environment variables that give a new process the same op determinism (default: the
    current settings'; {} if `configure` never ran)."""
    if deterministic is None:
        if _CURRENT is None:
            return {}
        deterministic = _CURRENT.deterministic
    return {ENV_VAR: "1" if deterministic else "0"}


def current() -> Settings | None:
    """The settings of the last `configure` in this process (None if it never ran)."""
    return _CURRENT


def reset() -> None:
    """Back to a fresh process's state: op determinism off, no settings, no environment
    variable (tests that run stages in one process)."""
    global _CURRENT
    _CURRENT = None
    os.environ.pop(ENV_VAR, None)
    if "tensorflow" in sys.modules:
        set_op_determinism(False)


def current_dict() -> dict | None:
    return None if _CURRENT is None else _CURRENT.as_dict()
