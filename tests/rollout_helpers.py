"""Shared by the stage-1 tests: reading shards back, comparing rollouts, running a script."""

import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from rl755.common import sharded_io
from rl755.common.structs import Rollout

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_shards(files):
    """Rollouts from shard files, in file order then record order."""
    out = []
    for f in files:
        ds = tf.data.TFRecordDataset(f, compression_type=sharded_io.detect_compression(f))
        out.extend(Rollout.deserialize(r.numpy()) for r in ds)
    return out


def assert_same_rollout(a: Rollout, b: Rollout):
    assert len(a) == len(b) and a.done == b.done
    for x, y in zip(a.obs_l, b.obs_l):
        assert x.dtype == y.dtype == np.uint8
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(np.stack(a.action_l), np.stack(b.action_l))
    np.testing.assert_array_equal(np.float32(a.reward_l), np.float32(b.reward_l))


def run_script(*args, timeout=120):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO
    )
