"""Carrying a long run to another machine: its resumable state in one archive, and back.

    pack_run("runs/doom", "doom.tar.gz")            # scripts/pack_run.py
    unpack_run("doom.tar.gz", "/scratch/me/doom")   # scripts/unpack_run.py (then resumes)

What goes in: everything under the run's directory (trained models and their checkpoints,
optimizer and CMA-ES states, encoded rollouts, evaluations, run records, TensorBoard logs,
SLURM logs, the run's recipe.json / pipeline.json and summary), except:
  - the raw rollouts of every collection step (their directories, shards and run records):
    a collection step's seed and flags re-create them exactly, so the resumed run collects
    them again (its run records are left out so that the step counts as not done);
  - temporary files of writers that were killed (`sharded_io.is_tmp_path`);
  - SLURM chain records (`slurm/chain-*.json`): their job ids belong to the old cluster.

`pack.json` in the archive lists the files, what was left out and the run's old absolute
directory; unpacking rewrites that directory to the new one in every JSON file (run records,
controller.json, checkpoint markers), so the run's records match the flags it resumes with.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import re
import shutil
import tarfile
import tempfile

from rl755.common import run_record, sharded_io
from rl755.common.errors import BadInput

MANIFEST = "pack.json"
LEFT_OUT_PATTERNS = ("slurm/chain-*.json",)


def run_kind(out_dir: str) -> tuple[str, dict]:
    """("recipe", recipe.json) or ("preset", pipeline.json) of the run in out_dir."""
    from rl755.pipeline.recipes import RECIPE_FILE
    from rl755.pipeline.stages import RUN_FILE

    for kind, name in (("recipe", RECIPE_FILE), ("preset", RUN_FILE)):
        path = os.path.join(out_dir, name)
        if os.path.exists(path):
            try:
                with open(path) as f:
                    return kind, json.load(f)
            except (OSError, ValueError) as e:
                raise BadInput(f"{path} is unreadable ({e}); is {out_dir} a whole run?") from e
    raise BadInput(
        f"{out_dir} holds no run of scripts/pipeline.py (no recipe.json or pipeline.json); "
        "pass the --out_dir the run was started with."
    )


def collection_dirs(out_dir: str) -> list[str]:
    """The run's collection output directories (absolute), which a pack leaves out."""
    from rl755.pipeline.recipe_book import get_recipe
    from rl755.pipeline.recipes import collection_dirs as recipe_collection_dirs
    from rl755.pipeline.runners import read_run_file
    from rl755.pipeline.stages import build_stages

    out_dir = os.path.abspath(out_dir)
    kind, data = run_kind(out_dir)
    if kind == "recipe":
        return recipe_collection_dirs(get_recipe(data["recipe"]), out_dir)
    preset, seed = read_run_file(out_dir)
    return [s.flags["out_dir"] for s in build_stages(preset, out_dir, seed) if s.name == "collect"]


def packed_files(out_dir: str) -> tuple[list[str], list[str]]:
    """(files that go in, directories left out), relative to out_dir, sorted."""
    out_dir = os.path.abspath(out_dir)
    left_out = [os.path.relpath(d, out_dir) for d in collection_dirs(out_dir)]
    files = []
    for root, dirs, names in os.walk(out_dir):
        rel_root = os.path.relpath(root, out_dir)
        dirs[:] = sorted(
            d for d in dirs if os.path.normpath(os.path.join(rel_root, d)) not in left_out
        )
        for name in names:
            rel = os.path.normpath(os.path.join(rel_root, name))
            if sharded_io.is_tmp_path(name) or rel == MANIFEST:
                continue
            if any(fnmatch.fnmatch(rel, p) for p in LEFT_OUT_PATTERNS):
                continue
            files.append(rel)
    return sorted(files), sorted(left_out)


def pack_run(out_dir: str, archive: str) -> dict:
    """Writes the run's resumable state into `archive` (.tar.gz, written temp-then-rename);
    returns the manifest. Raises BadInput if out_dir holds no run or archive is inside it."""
    out_dir = os.path.abspath(out_dir)
    if not os.path.isdir(out_dir):
        raise BadInput(f"--out_dir {out_dir} does not exist.")
    archive = os.path.abspath(archive)
    if archive.startswith(out_dir + os.sep):
        raise BadInput(f"--archive {archive} is inside the run's directory; put it elsewhere.")
    kind, data = run_kind(out_dir)
    files, left_out = packed_files(out_dir)
    manifest = {
        "out_dir": out_dir,
        "kind": kind,
        "run": data,
        "files": files,
        "left_out": left_out,
        "left_out_why": "raw rollouts: the collection steps make them again from their flags",
        "packed_by": run_record.git_info(),
    }
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    tmp = sharded_io.tmp_path_for(archive)
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            blob = json.dumps(manifest, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
            for rel in files:
                tar.add(os.path.join(out_dir, rel), arcname=rel)  # files only
        os.replace(tmp, archive)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return manifest


def _read_manifest(tar: tarfile.TarFile, archive: str) -> dict:
    try:
        return json.load(tar.extractfile(MANIFEST))
    except (KeyError, ValueError, AttributeError) as e:
        raise BadInput(f"{archive} has no readable {MANIFEST}: not made by pack_run.py.") from e


def relocate(directory: str, old: str, new: str) -> int:
    """Rewrites path `old` (followed by "/", a quote or the end) to `new` in every .json
    file under `directory`; returns how many files changed."""
    pattern = re.compile(re.escape(old) + r'(?=[/"\\]|$)')
    changed = 0
    for root, _, names in os.walk(directory):
        for name in names:
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            with open(path) as f:
                text = f.read()
            new_text = pattern.sub(new.replace("\\", "\\\\"), text)
            if new_text != text:
                sharded_io.write_text_atomic(path, new_text)
                changed += 1
    return changed


def unpack_run(archive: str, out_dir: str) -> dict:
    """Unpacks `archive` into `out_dir` (which must not exist or be empty) and points its
    records at the new directory; returns the manifest (its "kind" and "run" say how to
    resume). Nothing is left behind when it fails."""
    archive, out_dir = os.path.abspath(archive), os.path.abspath(out_dir)
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        raise BadInput(f"--out_dir {out_dir} is not empty; unpack into a new directory.")
    try:
        tar = tarfile.open(archive, "r:gz")
    except (OSError, tarfile.TarError) as e:
        raise BadInput(f"--archive {archive} cannot be read as a .tar.gz ({e}).") from e
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".unpack-", dir=parent)
    try:
        with tar:
            manifest = _read_manifest(tar, archive)
            members = [m for m in tar.getmembers() if m.name != MANIFEST]
            for m in members:
                if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in m.name:
                    raise BadInput(f"{archive} holds {m.name!r}, not a file of a packed run.")
            tar.extractall(tmp, members=members, filter="data")
        missing = [f for f in manifest["files"] if not os.path.isfile(os.path.join(tmp, f))]
        if missing:
            raise BadInput(f"{archive} lacks {len(missing)} listed files, e.g. {missing[0]}.")
        relocate(tmp, manifest["out_dir"], out_dir)
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def resume_unpacked(manifest: dict, out_dir: str) -> dict:
    """Resumes an unpacked run here, as rerunning its scripts/pipeline.py command would:
    the left-out collections run again, finished steps are skipped, an interrupted one
    continues. Returns the run's summary."""
    if manifest["kind"] == "recipe":
        from rl755.pipeline.recipe_runner import run_recipe

        run = manifest["run"]
        return run_recipe(run["recipe"], out_dir, run["seed"], run.get("deterministic"))
    from rl755.pipeline.runners import read_run_file, run_local

    preset, seed = read_run_file(out_dir)
    return run_local(preset, out_dir, seed=seed)
