"""Displayable pictures: encoded PNG or GIF bytes that Jupyter shows inline and scripts save.

    from rl755.common import pictures
    pictures.frames_image(frames)                  # frames [N, H, W, C] in a grid -> PNG
    pictures.animation(frames, fps=10)             # frames [T, H, W, C] -> looping GIF
    pictures.animation(frames).save("a.gif")       # written atomically

A `Picture` is shown when a notebook cell ends with it (`_repr_mimebundle_`; no IPython
import needed). Frames go in as uint8 [..., H, W, C] in 0-255 or floats in [0, 1] (what
decoders return); small ones are scaled up (nearest neighbour) to be visible. Matplotlib
figures are made outside pyplot (`new_figure`), so a notebook's plotting backend is never
switched. The stages' PNGs and GIFs and `rl755.visualize`'s model pictures use these.
"""

from __future__ import annotations

import base64
import dataclasses
import io

import numpy as np

from rl755.common import sharded_io

MIN_HEIGHT = 128  # small frames are scaled up (nearest neighbour) to at least this height


@dataclasses.dataclass(frozen=True)
class Picture:
    """Encoded image bytes ("png" or "gif"); shown inline by Jupyter, saved by `save`."""

    data: bytes
    format: str

    def _repr_mimebundle_(self, include=None, exclude=None):
        b64 = base64.b64encode(self.data).decode("ascii")
        if self.format == "png":
            return {"image/png": b64, "text/plain": repr(self)}
        # Animated GIFs as <img>: every front end (Lab, Notebook, nbconvert, GitHub) shows them.
        html = f'<img src="data:image/{self.format};base64,{b64}"/>'
        return {"text/html": html, "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"<Picture {self.format}, {len(self.data)} bytes>"

    def save(self, path: str) -> str:
        """Writes the bytes to `path` (temporary name, then renamed); returns `path`."""
        with sharded_io.atomic_output(path) as tmp:
            with open(tmp, "wb") as f:
                f.write(self.data)
        return path


def from_file(path: str, scale: int | None = 1) -> Picture:
    """A PNG or GIF file (e.g. a stage's output) as a Picture; `scale=None` scales small ones
    up to MIN_HEIGHT (re-encoded), 1 keeps the file's bytes."""
    with open(path, "rb") as f:
        data = f.read()
    picture = Picture(data, "gif" if data[:3] == b"GIF" else "png")
    if scale == 1:
        return picture
    from PIL import Image, ImageSequence

    with Image.open(io.BytesIO(data)) as im:
        frames = np.stack([np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)])
        duration = im.info.get("duration") or 100
    if picture.format == "gif":
        return animation(frames, fps=1000.0 / duration, scale=scale)
    return image(frames[0], scale)


def to_uint8(frames) -> np.ndarray:
    """uint8 frames from uint8 (as is) or floats in [0, 1] (clipped, scaled)."""
    frames = np.asarray(frames)
    if frames.dtype == np.uint8:
        return frames
    return (np.clip(frames, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def upscaled(image: np.ndarray, scale: int | None = None) -> np.ndarray:
    """image [..., H, W, C] repeated `scale` times along H and W (None: to MIN_HEIGHT)."""
    if scale is None:
        scale = max(1, -(-MIN_HEIGHT // image.shape[-3]))
    if scale == 1:
        return image
    return np.repeat(np.repeat(image, scale, axis=-3), scale, axis=-2)


def frame_grid(frames, columns: int | None = None) -> np.ndarray:
    """frames [N, H, W, C] -> uint8 [rows * H, columns * W, C], row-major, blank-padded."""
    frames = to_uint8(frames)
    if frames.ndim != 4:
        raise ValueError(f"frame_grid takes frames [N, H, W, C], got shape {frames.shape}.")
    n, h, w, c = frames.shape
    columns = min(n, columns or n)
    rows = -(-n // columns)
    padded = np.zeros((rows * columns, h, w, c), np.uint8)
    padded[:n] = frames
    grid = padded.reshape(rows, columns, h, w, c).transpose(0, 2, 1, 3, 4)
    return grid.reshape(rows * h, columns * w, c)


def image(array, scale: int | None = None) -> Picture:
    """An RGB image [H, W, 3] (or grey [H, W]) as a PNG Picture; small ones scaled up."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(upscaled(to_uint8(array), scale)).save(buf, format="PNG")
    return Picture(buf.getvalue(), "png")


def frames_image(frames, columns: int | None = None, scale: int | None = None) -> Picture:
    """frames [N, H, W, C] laid out in a grid, as a PNG Picture."""
    return image(frame_grid(frames, columns), scale)


def animation(frames, fps: float = 10, scale: int | None = None) -> Picture:
    """frames [T, H, W, C] as a looping animated GIF Picture; each frame lasts 1/fps s to the
    nearest 10 ms (GIF's unit), at least 20 ms (shorter frames play slower in browsers)."""
    from PIL import Image

    frames = upscaled(to_uint8(frames), scale)
    if frames.ndim != 4 or len(frames) == 0:
        raise ValueError(f"animation takes frames [T, H, W, C], T >= 1, got {frames.shape}.")
    images = [Image.fromarray(f) for f in frames]
    buf = io.BytesIO()
    images[0].save(
        buf,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        # GIF keeps centiseconds, and browsers show a frame of 0 or 1 cs for 10 cs
        duration=10 * max(2, int(round(100.0 / fps))),
        loop=0,
    )
    return Picture(buf.getvalue(), "gif")


def figure(fig, dpi: int = 100) -> Picture:
    """A matplotlib Figure as a PNG Picture. Make it with `new_figure` (no pyplot, so the
    notebook's plotting backend is left alone)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return Picture(buf.getvalue(), "png")


def new_figure(figsize=(7, 4), **subplots):
    """(fig, ax): a matplotlib Figure outside pyplot (safe in scripts and notebooks alike);
    `subplots` (e.g. ncols=3, sharey=True) go to `Figure.subplots`, and ax is then its array."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(**subplots)


def labeled_rows(rows: dict, title: str | None = None) -> Picture:
    """{label: frames [N, h, w, C]} -> one PNG, a row of frames per label, labels on the left."""
    labels = list(rows)
    strips = [frame_grid(rows[k]) for k in labels]
    width = max(s.shape[1] for s in strips)
    strips = [np.pad(s, ((0, 0), (0, width - s.shape[1]), (0, 0))) for s in strips]
    grid = np.concatenate(strips, axis=0)
    h, w = grid.shape[:2]
    scale = max(1.0, 75.0 * len(labels) / h)
    label_inches = max(1.4, 0.4 + 0.09 * max(len(str(k)) for k in labels))  # long labels fit
    fig, ax = new_figure(figsize=(w * scale / 100 + label_inches, h * scale / 100 + 0.6))
    ax.imshow(grid, interpolation="nearest")
    ax.set_anchor("E")  # spare width goes to the labels' side
    ax.set_xticks([])
    row_h = h / len(labels)
    ax.set_yticks([(i + 0.5) * row_h for i in range(len(labels))])
    ax.set_yticklabels(labels)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return figure(fig)
