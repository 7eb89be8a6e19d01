"""Stage scripts started from a process that has imported TensorFlow already (the suite's).

A tiny stage spends most of its run importing TensorFlow, Keras, TFP and Ray and ending the
process, and the suite starts hundreds of stage scripts. `start` launches a server that
imports them once and then, for each request, forks a process that runs one script as
`python script.py args` would: the caller's stdin/stdout/stderr, working directory,
environment, argv, __file__, sys.path and fresh random seeds.

    server = start(tmp_dir)          # a server process (answers once its imports are done)
    wait_until_ready(server)
    sys.executable = server.shim     # subprocess.run([sys.executable, "scripts/x.py", ...])
    ...
    server.stop()

The shim (`warm_client`) sends only `script.py [args]` for a script of the repository's
scripts/, benchmarks/ or tests/, outside a SLURM job. Everything else (Ray's workers too),
and every request made before the server answers, runs the real interpreter. The server
declines (the caller runs cold) when an environment variable read while those libraries are
imported differs from its own (`IMPORT_TIME`). What a forked script does not share with a
fresh interpreter: the hash seed of str (the server's), and the start-up output of the
preloaded libraries. Tests of either use the real interpreter: tests/conftest.py's
`cold_python`. docs/development.md ("Warm stage scripts") has the whole picture.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRELOADED = ("tensorflow", "keras", "tensorflow_probability", "ray", "gymnasium", "h5py", "cma")
# Environment variables the preloaded libraries (or Python) may read while importing.
IMPORT_TIME = ("TF_", "CUDA_", "KERAS_", "XLA_", "OMP_", "MKL_", "OPENBLAS_", "LD_", "MPL")
IMPORT_TIME_NAMES = ("RL755_TF_STARTUP_LOGS", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONHOME")


@dataclasses.dataclass
class WarmPython:
    """A running server: `shim` is the interpreter path to use; `stop()` ends it."""

    shim: str
    socket_path: str
    process: subprocess.Popen
    real_python: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(directory: str, python: str | None = None) -> WarmPython:
    """Starts a server (its log: `<directory>/server.log`) and writes its shim; returns at
    once. Until the server answers, the shim runs the real interpreter."""
    python = python or sys.executable
    os.makedirs(directory, exist_ok=True)
    socket_path = os.path.join(directory, "server.sock")
    shim = os.path.join(directory, os.path.basename(python))
    # The shim's directory holds what the interpreter's does (tests put it on PATH).
    bin_dir = os.path.dirname(python)
    for name in os.listdir(bin_dir):
        link = os.path.join(directory, name)
        if name != os.path.basename(python) and not os.path.lexists(link):
            if name.startswith("python"):
                os.symlink(os.path.basename(python), link)  # python3 etc.: the shim too
            else:
                os.symlink(os.path.join(bin_dir, name), link)
    client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_client.py")
    with open(shim + ".tmp", "w") as f:
        f.write(
            f"#!{python}\n"
            "import importlib.util\n"
            f"spec = importlib.util.spec_from_file_location('rl755_warm_client', {client!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            f"module.main({python!r}, {socket_path!r}, {REPO!r})\n"
        )
    os.chmod(shim + ".tmp", 0o755)
    os.replace(shim + ".tmp", shim)
    with open(os.path.join(directory, "server.log"), "ab") as log:
        process = subprocess.Popen(
            [python, "-m", "rl755.testing.warm_python", socket_path, shim],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={**os.environ, "PYTHONPATH": REPO},
        )
    return WarmPython(shim=shim, socket_path=socket_path, process=process, real_python=python)


def wait_until_ready(server: WarmPython, timeout: float = 120) -> bool:
    """Whether the server answers within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline and server.process.poll() is None:
        if os.path.exists(server.socket_path):
            return True
        time.sleep(0.1)
    return False


def _import_time(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME) or k in IMPORT_TIME_NAMES}


def _read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    header, fds, _, _ = socket.recv_fds(conn, 8, 3)
    if len(header) != 8 or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("bad request")
    size = struct.unpack("!Q", header)[0]
    payload = b""
    while len(payload) < size:
        chunk = conn.recv(size - len(payload))
        if not chunk:
            raise ValueError("short request")
        payload += chunk
    return json.loads(payload), fds


def _send(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:
        pass


def serve(socket_path: str):
    """The server loop. Returns (in a forked child only) (conn, fds, request)."""
    own = _import_time(dict(os.environ))
    for name in PRELOADED:
        try:
            __import__(name)
        except Exception as e:  # noqa: BLE001 (a script that needs it imports it itself)
            print(f"warm_python: not preloaded: {name} ({e})", flush=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = f"{socket_path}.{os.getpid()}"
    listener.bind(tmp)
    listener.listen(64)
    os.replace(tmp, socket_path)  # answers from now on
    parent = os.getppid()
    children: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        readable, _, _ = select.select([listener], [], [], 0.05)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                _send(conn, {"status": status})
                conn.close()
        if not readable:
            continue
        conn, _ = listener.accept()
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        if _import_time(request["env"]) != own:
            _send(conn, {"cold": "import-time environment differs"})
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            for other in children.values():
                other.close()
            return conn, fds, request
        for fd in fds:
            os.close(fd)
        _send(conn, {"pid": pid})
        children[pid] = conn
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    sys.exit(0)


def _become(conn: socket.socket, fds: list[int], request: dict, shim: str) -> str:
    """Turns the forked child into `python <script> <args>`; returns the script's path."""
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    old_pythonpath = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["script"]  # (real path)
    sys.argv = list(request["argv"])  # argv[0] as the caller wrote it
    new_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    rest = [p for p in sys.path[1:] if p not in old_pythonpath]
    sys.path[:] = [os.path.dirname(script), *new_pythonpath, *rest]
    sys.executable = shim
    # (random reseeds itself in a forked child; numpy's global generator does not)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        stream.reconfigure(line_buffering=unbuffered or os.isatty(fd), write_through=unbuffered)

    def end_with_the_caller():  # the shim was killed (SIGKILL reaches no handler): end too
        while conn.recv(1):
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=end_with_the_caller, daemon=True).start()
    return script


def _run_and_exit(script: str) -> None:
    """Runs the script as __main__, then ends as the interpreter would: non-daemon threads
    joined, atexit functions run, streams flushed, but without tearing down the modules
    (with TensorFlow and Ray loaded, the longest part of ending)."""
    import atexit
    import builtins
    import importlib.machinery
    import traceback
    import types

    code = 0
    try:
        # As the interpreter runs `python <argv[0]>`: __file__ is argv[0] joined to the
        # working directory, argv stays as written (runpy.run_path would rewrite argv[0]).
        path = os.path.join(os.getcwd(), sys.argv[0])
        main = types.ModuleType("__main__")
        main.__file__, main.__cached__, main.__builtins__ = path, None, builtins
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
        sys.modules["__main__"] = main
        with open(script, "rb") as f:
            source = f.read()
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 (what the interpreter prints and exits 1 for)
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    forked = serve(sys.argv[1])
    script = _become(*forked, shim=sys.argv[2])
    del forked
    _run_and_exit(script)
