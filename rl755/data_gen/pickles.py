"""Reading and checking the pickled rollouts of the original format (one `[Rollout]` per file).

paths = list_pickles(pickle_dir)      # sorted *.pickle paths (fails with advice if none)
check_pickle_header(paths[0])         # cheap: a list of Rollouts, complete (no frames loaded)
rollouts = load_rollouts(paths[0])    # [Rollout], validated
"""

from __future__ import annotations

import os
import pickle
import pickletools

from rl755.common.errors import BadInput
from rl755.common.structs import Rollout

PICKLE_SUFFIX = ".pickle"
_ROLLOUT_CLASS = ("rl755.common.structs", "Rollout")


def list_pickles(pickle_dir: str) -> list[str]:
    """Sorted paths of the (non-temporary) `*.pickle` files directly in `pickle_dir`."""
    if not pickle_dir:
        raise BadInput("--pickle_dir is empty; pass the directory collect_rollouts.py wrote.")
    if not os.path.exists(pickle_dir):
        raise BadInput(
            f"--pickle_dir={pickle_dir} does not exist. Pass the --out_dir of "
            "collect_rollouts.py (--out_format=pickle)."
        )
    if not os.path.isdir(pickle_dir):
        raise BadInput(f"--pickle_dir={pickle_dir} is a file; pass the directory holding it.")
    names = sorted(
        n for n in os.listdir(pickle_dir) if n.endswith(PICKLE_SUFFIX) and not n.startswith(".")
    )
    if not names:
        raise BadInput(
            f"--pickle_dir={pickle_dir} holds no *.pickle files. Collect rollouts first with "
            "scripts/data_gen/collect_rollouts.py --out_format=pickle "
            f"--out_dir={pickle_dir} (or point --pickle_dir at the right directory)."
        )
    return [os.path.join(pickle_dir, n) for n in names]


def check_pickle_header(path: str, max_ops: int = 64) -> None:
    """Cheaply checks that `path` is a complete pickle of a list starting with a Rollout.

    Reads the first pickle opcodes (a list, then the `rl755.common.structs.Rollout` class) and
    the final STOP byte, without loading the frames. Raises ValueError naming the file.
    """
    what = f"{path} is not a pickled list of Rollouts (as collect_rollouts.py writes)"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                raise BadInput(f"{what}: the file is empty. Delete it and rerun.")
            f.seek(size - 1)
            if f.read(1) != b".":
                raise BadInput(f"{what}: it is truncated (no pickle STOP). Delete it and rerun.")
            f.seek(0)
            strings: list[str] = []
            saw_list = False
            for i, (op, arg, _) in enumerate(pickletools.genops(f)):
                if i >= max_ops:
                    break
                if op.name in ("EMPTY_LIST", "LIST"):
                    saw_list = True
                elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "BINUNICODE8"):
                    strings.append(arg)
                elif op.name in ("GLOBAL", "STACK_GLOBAL", "INST"):
                    if op.name == "STACK_GLOBAL":
                        found = tuple(strings[-2:]) if len(strings) >= 2 else None
                    else:
                        found = tuple(str(arg).split(" ", 1))
                    if not saw_list:
                        raise BadInput(f"{what}: it holds a {found} object, not a list.")
                    if found != _ROLLOUT_CLASS:
                        raise BadInput(f"{what}: its list holds {found}, not a Rollout.")
                    return
                elif op.name == "STOP":
                    break
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - any unreadable pickle is reported the same way
        raise BadInput(f"{what}: {type(e).__name__}: {e}") from e
    if not saw_list:
        raise BadInput(f"{what}: it does not hold a list.")
    raise BadInput(f"{what}: its list holds no Rollout.")


def load_rollouts(path: str) -> list[Rollout]:
    """Loads one pickle and checks it is a non-empty list of valid Rollouts (names the file)."""
    with open(path, "rb") as f:
        try:
            data = pickle.load(f)
        except Exception as e:  # noqa: BLE001
            raise BadInput(f"{path} is not a readable pickle ({type(e).__name__}: {e}).") from e
    if not isinstance(data, list) or not data or not all(isinstance(r, Rollout) for r in data):
        kind = type(data).__name__ if not isinstance(data, list) else "a list of other things"
        raise BadInput(
            f"{path} holds {kind}, not a non-empty list of rl755.common.structs.Rollout. "
            "Remove it from the pickle dir (or regenerate it with collect_rollouts.py)."
        )
    for r in data:
        try:
            r.validate()
        except ValueError as e:
            raise BadInput(f"{path} holds an invalid Rollout: {e}") from e
    return data
