"""Run records: every stage run leaves a small JSON file in its output directory.

Usage in a stage script (after absl has parsed the flags):

    from rl755.common import run_record

    def main(argv):
        with run_record.record_run(FLAGS.out_dir, run_record.flags_dict(), stage="collect"):
            collect_rollouts(...)

This writes `<out_dir>/runs/<YYYYmmdd-HHMMSS>-<host>-<pid>-<random>.json` when the run starts
(status "running") and rewrites it when the run ends, each time atomically
(`sharded_io.atomic_output`), so several runs and several concurrent instances (array
tasks) can share one out_dir. A record holds:

    stage, out_dir, flags (resolved), argv, cwd, host, pid, python,
    git: {commit, dirty, root} of the rl755 checkout (None outside a git checkout),
    slurm: {job_id, array_job_id, array_task_id, node_list, partition, restart_count}
           (only the SLURM_* variables present; {} outside SLURM),
    start_time, end_time (ISO 8601 UTC), status, error,
    determinism: {seed, deterministic, decided_by, op_determinism, tensorflow, thread counts}
           as the stage set it (`rl755.common.determinism.configure`; None if it never did).
    cpu: {model, machine, vector_isa, cores}: the processor and the vector instruction sets
           TensorFlow's CPU kernels choose from (`cpu_info`). A deterministic run repeats bit
           for bit on the same kind of CPU; on another one (e.g. AVX2 instead of AVX-512) the
           kernels sum in another order and the weights differ after the first steps.

status is "running", then "completed", "failed" (error = the exception text) or
"interrupted" (KeyboardInterrupt, or SIGTERM as sent by `scancel`, preemption and
`scontrol requeue`: while the context is active SIGTERM raises KeyboardInterrupt so the
record is finalised before the process exits). `read_records(dir)` reads them back;
`rl755.slurm.status` builds the `scripts/status.py` table from them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator

from rl755.common import determinism, sharded_io
from rl755.common.errors import BadInput

RUNS_SUBDIR = "runs"

_SLURM_VARS = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "node_list": "SLURM_JOB_NODELIST",
    "partition": "SLURM_JOB_PARTITION",
    "restart_count": "SLURM_RESTART_COUNT",
}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def git_info(path: str | None = None) -> dict | None:
    """{"commit", "dirty", "root"} of the git checkout holding `path` (default: rl755's), or
    None outside one, or if a git call fails or takes more than 20 s (a hung file system)."""
    path = path or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", path, *args], capture_output=True, text=True, check=True, timeout=20
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        root = git("rev-parse", "--show-toplevel")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty, "root": root}


# Vector instruction sets that change which kernels TensorFlow (oneDNN, Eigen) runs on a CPU.
VECTOR_ISA = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "neon",
    "asimd",
    "sve",
)


def cpu_info(cpuinfo: str | None = None) -> dict:
    """{"model", "machine", "vector_isa", "cores"} of this machine's CPU, from /proc/cpuinfo
    (or the given text of one); where it is not readable, model and vector_isa are None."""
    import platform

    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    model, flags = None, None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if model is None and key in ("model name", "cpu model", "hardware"):
            model = value.strip()
        if flags is None and key in ("flags", "features"):
            flags = set(value.split())
    return {
        "model": model or platform.processor() or None,
        "machine": platform.machine(),
        "vector_isa": None if flags is None else [f for f in VECTOR_ISA if f in flags],
        "cores": os.cpu_count(),
    }


def slurm_info(environ: dict | None = None) -> dict:
    """The SLURM job's identity from its environment variables ({} outside SLURM)."""
    environ = os.environ if environ is None else environ
    return {key: environ[var] for key, var in _SLURM_VARS.items() if var in environ}


def flags_dict(module_name: str | None = None, flag_values=None) -> dict:
    """absl's parsed flags of the main module (the stage script) as {name: value}.

    "Key flags" are the flags the module defines plus those it adopted with
    `flags.adopt_module_key_flags`. Call after absl has parsed argv (inside `main`).
    `module_name` defaults to the main script (absl names it by sys.argv[0]);
    `flag_values` to absl's global `flags.FLAGS`.
    """
    from absl import flags

    flag_values = flags.FLAGS if flag_values is None else flag_values
    module_name = module_name or sys.argv[0]
    return {f.name: f.value for f in flag_values.get_key_flags_for_module(module_name)}


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return str(value)


class RunRecord:
    """The record of one run; `record_run` yields it. `path` is where it lives."""

    def __init__(self, out_dir: str, flags: dict, stage: str):
        self.data = {
            "stage": stage,
            "out_dir": os.path.abspath(out_dir),
            "flags": _jsonable(dict(flags)),
            "argv": list(sys.argv),
            "cwd": os.getcwd(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "python": sys.executable,
            "git": git_info(),
            "slurm": slurm_info(),
            "cpu": cpu_info(),
            "determinism": determinism.current_dict(),
            "start_time": _now(),
            "end_time": None,
            "status": "running",
            "error": None,
        }
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        host = self.data["host"].split(".")[0]
        name = f"{stamp}-{host}-{os.getpid()}-{uuid.uuid4().hex[:6]}.json"
        self.path = os.path.join(self.data["out_dir"], RUNS_SUBDIR, name)

    def write(self) -> None:
        sharded_io.write_json_atomic(self.path, self.data)


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum} (SIGTERM)")


@contextlib.contextmanager
def record_run(out_dir: str, flags: dict, stage: str) -> Iterator[RunRecord]:
    """Writes a run record for the body: "running" now, the final status on exit.

    Args:
      out_dir: the stage's output directory; the record goes to `<out_dir>/runs/`.
      flags: the resolved flags, e.g. `flags_dict()`.
      stage: a short stage name ("collect", "encode", "train_vae", ...).
    Exceptions propagate unchanged after the record is written; a run that made `out_dir`
    and fails on a BadInput with nothing else written removes it again (bad input leaves
    nothing behind).

    Starting a stage on a directory also deletes the temporary files that killed writers left
    in it (`sharded_io.remove_stale_tmp_files`); the record counts them.
    """
    created = not os.path.isdir(out_dir)
    removed = sharded_io.remove_stale_tmp_files(out_dir)
    record = RunRecord(out_dir, flags, stage)
    bad_input = False
    if removed:
        record.data["removed_stale_tmp_files"] = len(removed)
    record.write()
    restore = None
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            restore = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        yield record
    except KeyboardInterrupt as e:
        record.data.update(status="interrupted", error=str(e) or "KeyboardInterrupt")
        raise
    except SystemExit as e:
        ok = e.code in (None, 0)
        if e.code == signal.SIGTERM:
            # Ray's driver replaces our SIGTERM handler with one that calls sys.exit(15).
            record.data.update(status="interrupted", error="SystemExit(15) (SIGTERM)")
        else:
            record.data.update(
                status="completed" if ok else "failed",
                error=None if ok else f"SystemExit({e.code})",
            )
        raise
    except BaseException as e:
        record.data.update(status="failed", error=f"{type(e).__name__}: {e}")
        bad_input = isinstance(e, BadInput)
        raise
    else:
        record.data["status"] = "completed"
    finally:
        if restore is not None:
            signal.signal(signal.SIGTERM, restore)
        record.data["end_time"] = _now()
        record.data["determinism"] = determinism.current_dict()
        if not (bad_input and created and _remove_if_only_record(record)):
            record.write()


def _remove_if_only_record(record: RunRecord) -> bool:
    """Removes a run's output directory when it holds nothing but this record (a run that
    created it and failed on bad input leaves nothing behind); True if it did."""
    out_dir = record.data["out_dir"]
    if _files_under(out_dir) - {os.path.relpath(record.path, out_dir)}:
        return False
    shutil.rmtree(out_dir, ignore_errors=True)
    return True


def _files_under(root: str) -> set[str]:
    out = set()
    for dirpath, _, filenames in os.walk(root):
        out.update(os.path.relpath(os.path.join(dirpath, n), root) for n in filenames)
    return out


@contextlib.contextmanager
def removed_on_failure(out_dir: str, is_progress: Callable[[str], bool]) -> Iterator[None]:
    """If the body raises, deletes the files it created in `out_dir` (and directories left
    empty), except run records, unless it created progress worth resuming from
    (`is_progress(relative path)`, e.g. a checkpoint marker), which keeps them all. For a
    directory that one run writes at a time (a model_dir). The exception propagates."""
    before = _files_under(out_dir)
    dirs_before = {d for d, _, _ in os.walk(out_dir)}
    try:
        yield
    except BaseException:
        new = sorted(_files_under(out_dir) - before)
        new = [p for p in new if p.split(os.sep)[0] != RUNS_SUBDIR]
        if not any(is_progress(p) for p in new):
            for rel in new:
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(out_dir, rel))
            for dirpath, _, _ in sorted(os.walk(out_dir), key=lambda w: -len(w[0])):
                if dirpath not in dirs_before and not os.listdir(dirpath):
                    with contextlib.suppress(OSError):
                        os.rmdir(dirpath)
        raise


def json_files_in(root: str, folder: str, name_pattern: str) -> Iterator[tuple[str, dict]]:
    """(path, dict) of every JSON object file whose whole name matches `name_pattern` in a
    directory called `folder` under `root` (any depth, hidden directories skipped), in name
    order per directory; unreadable or non-object files are passed over."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if os.path.basename(dirpath) != folder:
            continue
        for name in sorted(filenames):
            if not re.fullmatch(name_pattern, name):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path) as f:
                    data = json.load(f)
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, dict):
                yield path, data


def read_records(root: str) -> list[dict]:
    """All run records under `root` (any depth), oldest first; each gets a "record_path" key."""
    records = []
    # Not temp files: ".<name>.tmp-".
    for path, data in json_files_in(root, RUNS_SUBDIR, r"[^.].*\.json"):
        if "stage" in data:
            data["record_path"] = path
            records.append(data)
    records.sort(key=lambda r: (r.get("start_time") or "", r["record_path"]))
    return records
