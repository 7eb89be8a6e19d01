"""The errors rl755 raises on purpose, in one place.

BadInput             invalid flags or input files; the message says what to do, and the
                     stage scripts print it without a traceback (exit status 2)
MissingData          a BadInput (and a FileNotFoundError): data a stage reads is not there;
                     the message says how to make it or which flag points at it
NonFiniteLossError   a trainer met a NaN or infinite loss; the message names the step and
                     the loss term, and what to change (e.g. --learning_rate)
WorkerFailure        a Ray task or actor failed or hung more often than allowed
"""

from __future__ import annotations

import contextlib
import math
import sys


class BadInput(ValueError):
    """Invalid flags or input files; the message says what to do (scripts print it cleanly)."""


class MissingData(BadInput, FileNotFoundError):
    """Data a stage reads is not there; the message says how to make it or point at it."""


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN or infinite loss; the message says at which step and term."""

    @classmethod
    def at_step(
        cls,
        step: int,
        terms: dict,
        last_good: str | None,
        advice: str,
        total: float | None = None,
    ) -> NonFiniteLossError:
        """The error of a training loop whose loss `terms` ({name: float}) are not all finite
        at `step`: names the bad terms, every value (and the `total` when given), the last
        good checkpoint (`last_good`, a path or None) and what to try (`advice`)."""
        bad = [k for k, v in terms.items() if not math.isfinite(v)]
        values = ", ".join(f"{k}={v:.6g}" for k, v in terms.items())
        if total is not None:
            values += f"; total {total}"
        return cls(
            f"Non-finite loss at training step {step}: loss term(s) {', '.join(bad) or 'total'} "
            f"not finite ({values}). Training stopped; the last good checkpoint is "
            f"{last_good or 'none'}. Rerun with --check_numerics "
            "(tf.debugging.enable_check_numerics) to stop at the first operation that produces "
            f"a NaN/Inf, and {advice}."
        )


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
