"""The dream-versus-real gap of fixed policies, as one number per model.

    g = model_dream_gap("CAR_RACING", encoder_fn, model_fn, num_episodes=20, seed=0)
    g["mean_abs_gap"]        # the number (return units)
    g["relative_gap"]        # the same divided by the mean |real return|
    g["policies"]            # {name: {"dream": mean return, "real": mean return}}

`rl755.controller.dream_gap.measure_dream_gap` plays the reference policies (uniform random, and
each constant action: every discrete action, or a continuous box's center and each
dimension's ends) for the same seeds in the model's dream (episodes start from the encoded
reset frames of those seeds) and in the real environment. For policy p let D_p and R_p be
its mean dream and real returns. The number is

    mean_abs_gap = mean over the reference policies p of |D_p - R_p|

in the environment's return units. The real returns are the same for every model evaluated
with the same seeds and episodes, so the number ranks models on one scale: 0 means the
model scores every fixed policy as the real environment does. (A mean |log(D_p / R_p)| is
undefined when a return is negative or zero, which CarRacing's constant policies are.)
relative_gap divides it by the mean over p of |R_p| for a scale-free reading.
"""

from __future__ import annotations

import numpy as np


def summarize_gap(gap: dict) -> dict:
    """The number and its parts from a `dream_gap` result (its "controller" entry, if any,
    is left out: the number is about fixed policies)."""
    policies = {
        name: {"dream": float(v["dream"]["mean"]), "real": float(v["real"]["mean"])}
        for name, v in gap["policies"].items()
        if name != "controller"
    }
    diffs = [abs(v["dream"] - v["real"]) for v in policies.values()]
    scale = float(np.mean([abs(v["real"]) for v in policies.values()]))
    mean_abs = float(np.mean(diffs))
    return {
        "mean_abs_gap": mean_abs,
        "relative_gap": mean_abs / scale if scale > 0 else None,
        "policies": policies,
        "num_episodes": int(gap["num_episodes"]),
        "seed": int(gap["seed"]),
        "temperature": float(gap["temperature"]),
        "max_steps": int(gap["max_steps"]),
    }


def model_dream_gap(
    environment: str,
    encoder_fn,
    model_fn,
    num_episodes: int,
    seed: int = 0,
    temperature: float = 1.0,
    max_steps: int | None = None,
    model_name: str = "model",
    encoder_name: str = "encoder",
) -> dict:
    """Runs `dream_gap` for one model (constructors: () -> encoder, () -> SequentialModel)
    and returns `summarize_gap` of it."""
    from rl755.controller.agent import AgentSpec
    from rl755.controller.dream_gap import measure_dream_gap

    spec = AgentSpec(
        environment=environment,
        controller="LinearController",
        encoder_fn=encoder_fn,
        sequential_model_fn=model_fn,
        encoder_name=encoder_name,
        sequential_model_name=model_name,
    )
    gap = measure_dream_gap(
        spec,
        None,
        temperature=temperature,
        num_episodes=num_episodes,
        seed=seed,
        max_steps=max_steps,
    )
    return summarize_gap(gap)
