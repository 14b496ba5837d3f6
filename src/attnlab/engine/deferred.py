"""Interrupts held over a block that must not be cut in half (a point being written to the store).

Ctrl-C raises ``KeyboardInterrupt`` wherever the main thread is. Inside ``np.savez`` (a point's arrays are
packed as zip archives) the archive's cleanup then raises ``ValueError`` ("Can't close the ZIP file while
there is an open writing handle"), which replaces the interrupt: the run ended with a one-line error and
exit status 2 instead of stopping as interrupted (130). :func:`interrupts_deferred` records SIGINT and SIGTERM
during the block and raises each again, once, right after it, where its own handler runs as it would have.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["interrupts_deferred"]

_HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM during the block and deliver them after it (in arrival order, each once).

    Outside the main thread (where handlers cannot be set) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        got.append(signum)

    before = {}
    for signum in _HELD:
        try:
            before[signum] = signal.signal(signum, hold)
        except (ValueError, OSError):  # pragma: no cover - an embedding that forbids handlers
            pass
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(got):
            signal.raise_signal(signum)  # its own handler now: KeyboardInterrupt, Terminated, the default
