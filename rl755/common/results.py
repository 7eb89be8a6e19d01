"""The typed results of the stage entry points: attributes, and `result["key"]` for old callers.

    @dataclasses.dataclass(frozen=True)
    class CollectionSummary(Result):
        out_dir: str
        rollouts: int

    summary = CollectionSummary(out_dir="/d", rollouts=4)
    summary.rollouts          # 4: what the docs show
    summary["rollouts"]       # 4: callers written when these were dicts
    summary.to_dict()         # {"out_dir": "/d", "rollouts": 4}, nested results too

A result class that sets `omit_none = True` (one that stands for a JSON file whose optional
keys are left out) reads a field whose value is None as absent through the dict interface:
`"key" in result` is False, `result["key"]` raises KeyError and `to_dict()` leaves it out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, ClassVar


class Result:
    """Base of a result dataclass; read its attributes, or it as a read-only mapping."""

    omit_none: ClassVar[bool] = False

    def keys(self) -> list[str]:
        """The names of the fields (with `omit_none`, of those that are not None)."""
        names = [f.name for f in dataclasses.fields(self)]
        return [n for n in names if not self.omit_none or getattr(self, n) is not None]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)

    def __contains__(self, key: object) -> bool:
        return key in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def get(self, key: str, default: Any = None) -> Any:
        """The field's value, or `default` when it is not set."""
        return self[key] if key in self else default

    def to_dict(self) -> dict:
        """The set fields as a plain dict (nested results as dicts), e.g. to write as JSON."""
        return {k: _plain(getattr(self, k)) for k in self.keys()}


def _plain(value: Any) -> Any:
    if isinstance(value, Result):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
