"""One writer per store: an exclusive lock on the results folder while a run writes to it."""

from __future__ import annotations

import os
from pathlib import Path

from attnlab.engine.store import StoreError

__all__ = ["StoreLocked", "store_lock"]


class StoreLocked(StoreError):
    """Another attnlab process is writing to this store."""


class store_lock:
    """An exclusive lock on ``<out>/attnlab.lock`` held while a run writes (one writer per store).

    A second writer is refused at once (:class:`StoreLocked`, status 2 on the command line) rather
    than made to wait: two runs on one store would compute the same points twice.
    """

    def __init__(self, out: str | Path):
        self.path = Path(out) / "attnlab.lock"
        self._fh = None

    def __enter__(self) -> store_lock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held for the duration of the run
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "?"
            fh.close()
            raise StoreLocked(
                f"--out: expected a store no other run is writing to, got {str(self.path.parent)!r} "
                f"(locked by process {holder}); wait for that run to end or choose another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            import fcntl

            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None
