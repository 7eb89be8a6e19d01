"""Atomic small-file writes for the SLURM tools, without importing TensorFlow.

Same convention as `rl755.common.sharded_io.atomic_output` (temp name `.<name>.tmp-<hex>`
in the same directory, renamed when complete), which imports TensorFlow at module load;
the launcher and `status` stay fast on login nodes by not importing it.
"""

from __future__ import annotations

import json
import os
import uuid


def write_text_atomic(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    d, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(d, f".{base}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_json_atomic(path: str, data: object) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
