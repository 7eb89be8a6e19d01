"""Probe: a controller's dream score at several done_prob_scale values (256 dreams).

    python probe_done_scale.py <controller dir> <scales, e.g. 1,2,3> [ensemble override] [out.json]

SEQ_DIR=<train_sequential_model dir> replaces the controller's sequential model. The dreams start from the training's 64 initial states (seed 755) and are drawn with dream
seed 31337; out.json (optional) gets each scale's per-dream steps.
"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

from rl755.controller import resolve, saved
from rl755.controller.cma_config import derived_seeds
from rl755.controller.dream_eval import DreamEvaluator, encoded_initial_states
from rl755.controller.evaluate import spec_with_overrides

ctrl_dir = sys.argv[1]
scales = [float(s) for s in sys.argv[2].split(",")]
ens_override = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
out_json = sys.argv[4] if len(sys.argv) > 4 else None
steps_by_scale = {}
trained = saved.load_trained_controller(ctrl_dir)
seq_dir = os.environ.get("SEQ_DIR")
meta, spec = spec_with_overrides(
    trained, ctrl_dir, sequential_model=f"dir:{seq_dir}" if seq_dir else None
)
agent = spec.build()
enc, seq = agent.encoder, agent.sequential_model
names = tuple(meta.get("dream_ensemble") or ())
if ens_override is not None:
    names = tuple(n for n in ens_override.split(",") if n)
ens = resolve.ensemble_model_fns(spec.env, names, source=resolve.models_source(trained))
members = tuple(ens[n]() for n in sorted(ens))
z0 = encoded_initial_states(
    spec.env.make_fn(),
    lambda f: enc.compute_full_representation(tf.constant(f))[0].numpy(),
    derived_seeds(755, 3, n=64),
)
ids = np.arange(256) % 64
for k in scales:
    t0 = time.time()
    d = DreamEvaluator(
        seq,
        agent.controller,
        z0,
        2100,
        meta["temperature"],
        spec.action_fn,
        cell_state=spec.cell_state,
        done_threshold=0.0,
        ensemble=members,
        done_prob_scale=k,
    )
    out = d.evaluate(trained.params[None], ids, seed=31337)
    r = out["returns"][0]
    steps_by_scale[str(k)] = [int(x) for x in out["steps"][0]]
    print(
        f"{ctrl_dir.split('/')[-1]} members={len(members)+1} scale={k}: mean {r.mean():.1f} median {np.median(r):.0f} "
        f"cap {np.mean(r >= 2099):.2f} ({time.time()-t0:.0f}s)",
        flush=True,
    )
if out_json:
    with open(out_json, "w") as f:
        json.dump({"controller": ctrl_dir, "members": len(members) + 1, "steps": steps_by_scale}, f)
