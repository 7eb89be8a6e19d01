"""Ray sessions: start or join one, and the workers kept between pools of one session.

    with ray_session(num_cpus=2):          # a local cluster (or none started if connected)
        ...                                # RayWorkerPools here share it
    start_ray(num_cpus=2, address="auto")  # join a running cluster; True if this call started it

`rl755.common.ray_pool` builds its worker pools on this; `KEPT` holds the idle workers a pool
with `keep_workers=True` left for the next pool of the same kind (`kept_for` takes them and
kills the others, `drop_kept_workers` kills all; `ray_session` does that when it ends).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

# Starts of a local Ray cluster tried before giving up: on a loaded machine its node may not
# register within Ray's fixed 30 s.
START_ATTEMPTS = 3


# Workers kept between pools (`RayWorkerPool(keep_workers=True)`): the session they belong to,
# their kind, their handles.
KEPT: dict[str, Any] = {"session": None, "key": None, "actors": []}


def _drop_token_notice(record: logging.LogRecord) -> bool:
    return "Token authentication is enabled for this Ray cluster" not in record.getMessage()


def start_ray(num_cpus: int, address: str | None = None) -> bool:
    """Connects to Ray unless already connected: to `address` ("auto", "host:port"), else to a
    new local cluster with `num_cpus` CPUs. Returns True if it started the session (the caller
    shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    # Workers import TensorFlow when they unpickle rl755 code: keep its start-up chatter out
    # (local workers inherit this process's environment; remote ones get runtime_env).
    from rl755.common import determinism, tf_setup

    tf_setup.quiet()
    # Workers get the stage's op determinism too (rl755.common.determinism).
    runtime_env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2", **determinism.child_environ()}}
    if address:
        ray.init(address=address, runtime_env=runtime_env)
        return True
    # A new local cluster uses token authentication (Ray's default) and says so in a
    # warning on every start; the notice is dropped, the setting kept.
    logging.getLogger("ray._private.authentication.authentication_token_setup").addFilter(
        _drop_token_notice
    )
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            ray.init(
                num_cpus=max(1, int(num_cpus)), include_dashboard=False, runtime_env=runtime_env
            )
            return True
        except Exception as e:  # Ray raises a bare Exception when its node starts too slowly
            if "timed out during startup" not in str(e):
                raise
            if attempt == START_ATTEMPTS:
                ray.shutdown()
                raise RuntimeError(
                    f"Ray's local node did not start in {START_ATTEMPTS} attempts (its processes "
                    "got too little CPU: a loaded machine, or a run under `nice`). Work in this "
                    "process without Ray (collect_rollouts.py --parallelism=1, "
                    "train_controller.py --parallelism=0), wait for the machine to be less "
                    "busy, or join a running cluster with --ray_address."
                ) from e
            log.warning(
                "Ray did not start in time (attempt %d, a loaded machine?): retrying.", attempt
            )
            ray.shutdown()
    return True


@contextlib.contextmanager
def ray_session(num_cpus: int, address: str | None = None) -> Iterator[None]:
    """Ray for the body (see `start_ray`); shuts down only a session it started."""
    started = start_ray(num_cpus, address)
    try:
        yield
    finally:
        drop_kept_workers()
        if started:
            import ray

            ray.shutdown()


def session_id() -> tuple[str, str]:
    """Identifies the current Ray connection (a new local node or a new job gives a new one)."""
    import ray

    ctx = ray.get_runtime_context()
    return ctx.get_node_id(), ctx.get_job_id()


def kept_for(key: tuple | None, n: int) -> list:
    """Up to `n` kept workers of kind `key`; every other kept worker is killed."""
    import ray

    actors, kind, same = KEPT["actors"], KEPT["key"], KEPT["session"] == session_id()
    KEPT.update(session=None, key=None, actors=[])
    if not same:  # handles of an ended session: their processes are gone
        return []
    take = actors[:n] if key is not None and key == kind else []
    for actor in actors[len(take) :]:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
    return take


def drop_kept_workers() -> None:
    """Kills the workers kept between pools (`keep_workers`)."""
    if KEPT["actors"]:
        import ray

        if ray.is_initialized():
            kept_for(None, 0)
    KEPT.update(session=None, key=None, actors=[])
