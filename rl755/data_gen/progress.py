"""A tiny Ray actor holding {task key: rollouts finished} for the driver's progress bar.

Kept in its own module without TensorFlow so the actor process starts fast.
"""

from __future__ import annotations


class ProgressCounts:
    def __init__(self):
        self.counts: dict[str, int] = {}

    def set(self, key: str, n: int) -> None:
        self.counts[key] = n

    def get(self) -> dict[str, int]:
        return self.counts
