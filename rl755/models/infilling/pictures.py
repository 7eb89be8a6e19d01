"""Pictures of infilled frames: what the model saw, the real frame, and several draws.

    grid = example_grid(inputs, draws)            # uint8 [N*H, (K + 2 + D)*W, C]
    picture = comparison(inputs, {"l2": draws_a, "gan": draws_b})   # labeled rows, a PNG

`inputs` is the generator's input dict (rl755.models.unet.model), `draws` float [D, B, H, W,
C] in [0, 1] (D outputs for the same inputs and D noise vectors).
"""

from __future__ import annotations

import numpy as np

from rl755.common import pictures

MASK_GREY = 0.5  # what the masked pixels look like in the "input" column


def masked_view(inputs: dict) -> np.ndarray:
    """float [B, H, W, C]: frame t as the model sees it, masked pixels grey."""
    target, mask = np.asarray(inputs["target"]), np.asarray(inputs["mask"])
    return target * (1.0 - mask) + MASK_GREY * mask


def example_grid(inputs: dict, draws, examples: int = 4) -> np.ndarray:
    """uint8 grid, a row per example: the K context frames, the masked frame t, the real
    frame t, then the D draws."""
    context = np.asarray(inputs["context"])[:examples]  # [N, K, H, W, C]
    n = context.shape[0]
    draws = np.asarray(draws)[:, :n]
    rows = [
        np.concatenate(
            [
                context[i],
                masked_view(inputs)[i : i + 1],
                np.asarray(inputs["target"])[i : i + 1],
                draws[:, i],
            ]
        )
        for i in range(n)
    ]
    columns = rows[0].shape[0]
    return pictures.frame_grid(np.concatenate(rows), columns=columns)


def comparison(
    inputs: dict, draws_by_model: dict, examples: int = 6, title: str | None = None
) -> pictures.Picture:
    """One PNG, a column per example; rows: the context frames, the masked frame t, the real
    frame t, then every model's draws ("<model> #d")."""
    context = np.asarray(inputs["context"])[:examples]
    k = context.shape[1]
    rows = {f"context t-{k - j}": context[:, j] for j in range(k)}
    rows["masked t"] = masked_view(inputs)[:examples]
    rows["real t"] = np.asarray(inputs["target"])[:examples]
    for name, draws in draws_by_model.items():
        draws = np.asarray(draws)
        for d in range(draws.shape[0]):
            rows[f"{name} #{d + 1}"] = draws[d, :examples]
    return pictures.labeled_rows(rows, title=title)
