"""Signals and streams of the command line: SIGTERM handled as Ctrl-C, closed standard streams.

``kill PID`` and cluster schedulers (before their SIGKILL) send SIGTERM. :func:`install` makes it
raise :class:`Terminated`, a ``KeyboardInterrupt``, in the main thread, so a run stops exactly as
on Ctrl-C: the workers are stopped, every finished point is already stored, one line says so and
the exit status is 143 (128 + 15, what a shell reports for SIGTERM) instead of 130.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

__all__ = [
    "STATUS_DISK_FULL",
    "Terminated",
    "install",
    "interrupt_status",
    "report_disk_full",
    "report_interrupted",
    "stdout_problem",
    "terminated",
]

#: Exit statuses of an interrupted command: Ctrl-C (SIGINT) and SIGTERM.
STATUS_SIGINT = 130
STATUS_SIGTERM = 143
#: Exit status of a run stopped by a full disk (sysexits' EX_IOERR); the points before it are stored.
STATUS_DISK_FULL = 74


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stop as on Ctrl-C."""


_received: list[int] = []


def _on_term(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise Terminated()


def install() -> None:
    """Handle SIGTERM as Ctrl-C in this (main) thread; a no-op elsewhere or where it cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        signal.signal(signal.SIGTERM, _on_term)
    except (ValueError, OSError):  # pragma: no cover - an embedding that forbids handlers
        pass


def terminated() -> bool:
    """Whether SIGTERM arrived during this command (a worker dying of it is then no failure)."""
    return bool(_received)


def interrupt_status(exc: BaseException | None = None) -> int:
    """143 after SIGTERM, else 130 (Ctrl-C)."""
    return STATUS_SIGTERM if isinstance(exc, Terminated) or _received else STATUS_SIGINT


def report_interrupted(out: Any, exc: BaseException | None = None) -> int:
    """One line on stderr for an interrupted run; returns its exit status (130, or 143 after SIGTERM)."""
    status = interrupt_status(exc)
    why = "terminated (SIGTERM)" if status == STATUS_SIGTERM else "interrupted"
    print(
        f"{why}: every finished point is stored in {out}; rerun the same command to resume",
        file=sys.stderr,
        flush=True,
    )
    return status


def report_disk_full(exc: BaseException) -> int:
    """One line on stderr for a run stopped by a full disk; returns :data:`STATUS_DISK_FULL`."""
    print(f"error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
    return STATUS_DISK_FULL


def stdout_problem() -> str | None:
    """Why standard output cannot take the command's output (closed: ``>&-``), else None.

    Python sets ``sys.stdout`` to None when descriptor 1 is closed at start; a stream without a
    descriptor (a test's capture) is fine.
    """
    import io
    import os

    out = sys.stdout
    if out is None or getattr(out, "closed", False):
        return "a closed standard output"
    try:
        fd = out.fileno()
    except (io.UnsupportedOperation, AttributeError, ValueError):
        return None
    try:
        os.fstat(fd)
    except OSError:
        return "a closed standard output"
    return None
