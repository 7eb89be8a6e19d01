"""rl755.evaluation.figures: what the benchmark's pictures show."""

import numpy as np
from PIL import Image

from rl755.evaluation import figures


def _pixels(path):
    return np.asarray(Image.open(path).convert("RGB"))


def test_frames_outside_0_1_are_drawn_clipped(tmp_path):
    """A dreamed frame may leave [0, 1]; it is drawn as its clip, so grey frames keep one
    scale (matplotlib would stretch each grey image over its own range)."""
    rng = np.random.default_rng(0)
    real = rng.uniform(0.2, 0.8, (1, 3, 8, 8, 1))
    wild = real.copy()
    wild[0, 1, :2] = 1.7  # above 1 ...
    wild[0, 2, :2] = -0.6  # ... and below 0
    frames = {"real": real, "predicted": wild}
    clipped = {"real": real, "predicted": np.clip(wild, 0.0, 1.0)}
    a = figures.frames_figure(str(tmp_path / "a.png"), frames, horizons=[1, 2], title="t")
    b = figures.frames_figure(str(tmp_path / "b.png"), clipped, horizons=[1, 2], title="t")
    np.testing.assert_array_equal(_pixels(a), _pixels(b))
