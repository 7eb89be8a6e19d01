"""The same 8 real frames (seed 1000, random actions held 15 steps, every 60th frame) as the
VAE sees them, reconstructed by the shipped VAE, and by a train_obs_encoder.py run's newest
checkpoint; prints each one's squared error per frame (all rows, and rows 20-43: the wall band).

    python reconstructions.py <model_dir> <out.png>
"""

import sys

import numpy as np
from PIL import Image

from rl755 import visualize, zoo
from rl755.environments import Environments
from rl755.models.encoders.saved import load_encoder

env = Environments.DOOM_TAKE_COVER.make_fn()()
shipped = zoo.get("DOOM_TAKE_COVER", "raw_rollout_vae_64ld").load()
more = load_encoder("DOOM_TAKE_COVER", "vae.Vae", sys.argv[1], representation_size=64)
obs, _ = env.reset(seed=1000)
frames, rng, a = [], np.random.default_rng(0), 0
for t in range(600):
    if t % 15 == 0:
        a = rng.integers(3)
    obs, r, term, trunc, _ = env.step(a)
    if t % 60 == 59:
        frames.append(obs)
    if term or trunc:
        break
fr = np.stack(frames[:8])
rows = [visualize.as_seen(shipped, fr)]
for enc in (shipped, more):
    rows.append(visualize.decode(enc, visualize.encode(enc, fr)))
    err = ((rows[-1] - rows[0]) ** 2).sum(axis=(1, 2, 3))
    band = ((rows[-1] - rows[0])[:, 20:44] ** 2).sum(axis=(1, 2, 3))
    print(f"squared error per frame: {err.mean():.1f} (rows 20-43: {band.mean():.1f})")
g = np.concatenate([np.concatenate(list(r), axis=1) for r in rows], axis=0)
g = (np.clip(g, 0, 1) * 255).astype(np.uint8)
Image.fromarray(g).resize((g.shape[1] * 3, g.shape[0] * 3), Image.NEAREST).save(sys.argv[2])
