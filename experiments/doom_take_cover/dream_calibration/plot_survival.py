"""Survival curves: the fraction of episodes still alive at each step, real against dreams.

    python plot_survival.py out.png real:<label>:<evaluation.json>[,<more.json>] \
        dream:<label>:<probe.json>:<scale> ...

real: evaluate_controller.py's evaluation.json files (their "returns" are steps survived in
DoomTakeCover); dream: probe_done_scale.py's out.json and one of its scales.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def steps_of(spec: str) -> tuple[str, np.ndarray]:
    kind, label, rest = spec.split(":", 2)
    if kind == "real":
        steps = []
        for path in rest.split(","):
            steps += json.load(open(path))["returns"]
        return label, np.asarray(steps)
    path, scale = rest.rsplit(":", 1)
    return label, np.asarray(json.load(open(path))["steps"][scale])


def main(out, *specs):
    t = np.arange(0, 2101, 10)
    fig, ax = plt.subplots(figsize=(7, 5.6))
    for spec in specs:
        label, s = steps_of(spec)
        style = "-" if spec.startswith("real") else "--"
        ax.plot(t, [(s >= x).mean() for x in t], style, label=f"{label} (mean {s.mean():.0f})")
    ax.axvline(500, color="grey", lw=0.8)
    ax.text(510, 0.98, "500: where the first MDN-RNNs' training slices end", fontsize=8, va="top")
    ax.set_xlabel("step")
    ax.set_ylabel("episodes still alive")
    ax.set_xlim(0, 2100)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    ax.set_title("The shipped dream_controller: real game against dreams")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:])
