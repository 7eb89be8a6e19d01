"""What a stage-1 collection did: `CollectionSummary` and its one-line timing.

summary = collect_rollouts(...)
print(summary.rollouts, timing_line(summary))
"""

from __future__ import annotations

import dataclasses

from rl755.common.results import Result


@dataclasses.dataclass(frozen=True)
class CollectionSummary(Result):
    """What `collect_rollouts` did.

    Attributes:
      out_dir: where the rollouts are.
      seed: the base seed used (drawn when none was given).
      tag: the run tag in every file name (seed and settings).
      files: every output file of the run, made now or before.
      written: files (tasks) written by this call.
      skipped: files that existed already (a resumed run).
      rollouts: rollouts in the files written by this call.
      frames: frames in them.
      bytes: bytes written.
      cpu_seconds: CPU time of the tasks run by this call.
      seconds: wall time of the whole call.
      ray: whether it ran on Ray.
      ray_start_s: on Ray, `ray.init`'s time (0 when joining a session); else None.
      workers_ready_s: on Ray, the time until the first worker answered; else None.
    """

    out_dir: str
    seed: int
    tag: str
    files: list[str]
    written: int
    skipped: int
    rollouts: int
    frames: int
    bytes: int
    cpu_seconds: float
    seconds: float
    ray: bool
    ray_start_s: float | None
    workers_ready_s: float | None


def timing_line(summary: dict) -> str:
    """How long a `collect_rollouts` call took, Ray's start-up apart: "Took <t> s, of which Ray
    start-up <r> s (local cluster <c> s, first worker ready after <r> s)." or "Took <t> s in
    this process (no Ray)."."""
    seconds = summary["seconds"]
    if not summary["ray"]:
        return f"Took {seconds:.1f} s in this process (no Ray)."
    ready = summary["workers_ready_s"]
    if ready is None:
        return f"Took {seconds:.1f} s on Ray (no worker started)."
    start = summary["ray_start_s"]
    where = f"local cluster {start:.1f} s" if start else "joined a running session"
    return (
        f"Took {seconds:.1f} s, of which Ray start-up {ready:.1f} s ({where}, first worker "
        f"ready after {ready:.1f} s)."
    )
