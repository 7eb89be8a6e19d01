"""The errors rl755 raises on purpose, in one place.

BadInput             invalid flags or input files; the message says what to do, and the
                     stage scripts print it without a traceback (exit status 2)
NonFiniteLossError   a trainer met a NaN or infinite loss; the message names the step and
                     the loss term, and what to change (e.g. --learning_rate)
WorkerFailure        a Ray task or actor failed or hung more often than allowed
"""

from __future__ import annotations

import contextlib
import sys


class BadInput(ValueError):
    """Invalid flags or input files; the message says what to do (scripts print it cleanly)."""


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or infinite loss; the message says at which step and term."""


class WorkerFailure(RuntimeError):
    """A Ray task or actor failed (or hung past its timeout) more often than allowed."""


@contextlib.contextmanager
def exit_on_bad_input():
    """For a stage script's main(): a BadInput ends the process with its message on stderr
    ("error: ...") and exit status 2, without a traceback."""
    try:
        yield
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
