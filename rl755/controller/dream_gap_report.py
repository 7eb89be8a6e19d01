"""Reading a dream gap (`rl755.controller.dream_gap`): where in an episode the dream's ends
part from the real ones (`end_rates`), and the printed title and tables.

    rates = end_rates(steps, max_steps=2100)  # [{"from", "to", "alive", "ended", "per_100_steps"}]
    print(format_title(gap)); print(format_table(gap))
"""

from __future__ import annotations

import numpy as np

END_WINDOWS = 4  # end_rates' parts of the step limit


def end_rates(steps, max_steps: int, windows: int = END_WINDOWS) -> list[dict]:
    """Episode ends per 100 steps lived in each of `windows` equal parts of [0, max_steps].

    `steps` [E]: each episode's length; one of `max_steps` was cut there and did not end.
    Returns [{"from", "to", "alive" (episodes longer than `from`), "ended" (of those, ended
    at most at `to`), "per_100_steps" (ended per 100 steps lived in the part; 0 where none
    was lived)}], one per part."""
    if max_steps < windows:
        raise ValueError(f"max_steps must be >= {windows}, got {max_steps}.")
    n = np.asarray(steps, np.int64)
    edges = np.linspace(0, max_steps, windows + 1).round().astype(np.int64)
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        alive = n > a
        ended = int(np.sum(alive & (n <= b) & (n < max_steps)))
        lived = int(np.sum(np.minimum(n[alive], b) - a))
        out.append(
            {
                "from": int(a),
                "to": int(b),
                "alive": int(alive.sum()),
                "ended": ended,
                "per_100_steps": 100.0 * ended / lived if lived else 0.0,
            }
        )
    return out


def format_title(gap: dict) -> str:
    """One line saying which dream the table is of."""
    members = gap["dream_ensemble"]
    ensemble = (
        f" with {', '.join(members)} (reward = mean - {gap['dream_disagreement_penalty']:g} x std)"
        if members
        else ""
    )
    scale = gap.get("done_prob_scale", 1.0)
    ends = f", episode ends x{scale:g}" if scale != 1.0 else ""
    only = ", the dream only" if gap.get("real") is False else ""
    return (
        f"{gap['environment']}, {gap['sequential_model']}{ensemble}, temperature "
        f"{gap['temperature']:g}{ends}{only}, {gap['num_episodes']} episodes per policy (mean +- "
        "std of returns):"
    )


def format_table(gap: dict) -> str:
    """A plain-text table: policy, dream mean +- std, real mean +- std, dream / real, and
    with an ensemble the members' per-step reward std."""
    members = bool(gap.get("dream_ensemble"))
    rows = [
        f"{'policy':28s} {'dream':>18s} {'real':>18s} {'dream/real':>10s}"
        + (f" {'members std':>11s}" if members else "")
    ]
    for name, v in gap["policies"].items():
        d, r = v["dream"], v["real"]
        ratio = "-" if v["ratio"] is None else f"{v['ratio']:.2f}"
        real = f"{r['mean']:9.1f} +- {r['std']:6.1f}" if r else f"{'-':>18s}"
        rows.append(
            f"{name:28s} {d['mean']:9.1f} +- {d['std']:6.1f} {real} {ratio:>10s}"
            + (f" {d['members_reward_std']:11.3f}" if members else "")
        )
    first = next(iter(gap["policies"].values()), {}).get("dream", {}).get("end_rates")
    if first:  # (dream_gap.json files written before end rates have none)
        parts = [f"{w['from']}-{w['to']}" for w in first]
        rows += ["", "Episode ends per 100 steps lived, dream / real, by part of the episode:"]
        rows.append(f"{'policy':28s}" + "".join(f" {p:>13s}" for p in parts))
        for name, v in gap["policies"].items():
            reals = [f"{r['per_100_steps']:.2f}" for r in (v["real"] or {}).get("end_rates", [])]
            dreams = [f"{d['per_100_steps']:.2f}" for d in v["dream"]["end_rates"]]
            cells = [f"{d} / {r}" for d, r in zip(dreams, reals or ["-"] * len(dreams))]
            rows.append(f"{name:28s}" + "".join(f" {c:>13s}" for c in cells))
    return "\n".join(rows)
