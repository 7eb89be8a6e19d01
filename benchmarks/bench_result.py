"""The one line a benchmark prints per result for `benchmarks/quick.py` to read.

    report("rollout_throughput/CAR_RACING", "collection frames/s", 110.0,
           "raw env.step frames/s", 136.7, ratio=0.924, target=0.9)
    # -> BENCHMARK-RESULT {"key": "rollout_throughput/CAR_RACING", ...}

`better` says which way the ratio should go: "higher" (ratio >= target is met) or "lower"
(ratio <= target is met). `target` None: the ratio is reported, not judged.
"""

from __future__ import annotations

import json

PREFIX = "BENCHMARK-RESULT "


def report(
    key: str,
    metric: str,
    value: float,
    reference: str | None,
    reference_value: float | None,
    ratio: float | None,
    target: float | None = None,
    better: str = "higher",
    **extra,
) -> None:
    """Prints one result line (see the module docstring); `extra` holds more figures."""
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', got {better!r}.")
    row = {
        "key": key,
        "metric": metric,
        "value": value,
        "reference": reference,
        "reference_value": reference_value,
        "ratio": ratio,
        "target": target,
        "better": better,
        **extra,
    }
    print(PREFIX + json.dumps(row), flush=True)


def parse(stdout: str) -> list[dict]:
    """The result rows printed in `stdout`, in order."""
    return [
        json.loads(line[len(PREFIX) :]) for line in stdout.splitlines() if line.startswith(PREFIX)
    ]
