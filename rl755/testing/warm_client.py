"""The client half of `rl755.testing.warm_python`: standard library only, so it starts in
milliseconds. The shim `warm_python.start` writes runs `main(...)`.

`<shim> <script.py> [args]`, for a script of the repository's scripts/, benchmarks/ or
tests/ outside a SLURM job, asks the server to fork a process that runs the script, passes it
this process's stdin, stdout and stderr, forwards the signals it receives, and exits as the
script did (its code, or the same signal). Anything else (`-c`, `-m`, options, another file,
a server that does not answer or declines) execs the real interpreter with the same arguments.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

# The repository's directories whose scripts run forked.
SCRIPT_DIRS = ("scripts", "benchmarks", "tests")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1)


def _cold(real_python: str, args: list[str]) -> None:
    os.execv(real_python, [real_python, *args])


def _warm_script(args: list[str], repo: str) -> str | None:
    """The script's real path if `args` is `script [args]` for a file of `SCRIPT_DIRS`, else
    None (`-c code`, `-m module`, options: their first argument is no such file)."""
    if not args:
        return None
    if "SLURM_JOB_ID" in os.environ:  # a SLURM job runs the real interpreter, as on a cluster
        return None
    script = os.path.realpath(args[0])
    roots = [os.path.join(repo, d, "") for d in SCRIPT_DIRS]
    if not any(script.startswith(r) for r in roots) or not os.path.isfile(script):
        return None  # (not a library's script either: Ray starts its workers with one)
    return script


def main(real_python: str, socket_path: str, repo: str) -> None:
    args = sys.argv[1:]
    script = _warm_script(args, repo)
    if script is None:
        _cold(real_python, args)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(socket_path)
        payload = json.dumps(
            {"script": script, "argv": args, "cwd": os.getcwd(), "env": dict(os.environ)}
        ).encode()
        socket.send_fds(sock, [struct.pack("!Q", len(payload))], [0, 1, 2])
        sock.sendall(payload)
        replies = sock.makefile("r")
        first = json.loads(replies.readline() or "{}")
    except (OSError, ValueError):
        first = {}
    if "pid" not in first:
        _cold(real_python, args)  # no server, or it declined (see warm_python.IMPORT_TIME)
    pid = int(first["pid"])

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    line = replies.readline()
    if not line:
        os.write(2, b"rl755 warm_python: the server ended before the script did\n")
        os._exit(1)
    code = os.waitstatus_to_exitcode(int(json.loads(line)["status"]))
    if code < 0:  # ended by a signal: end by the same one
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)
