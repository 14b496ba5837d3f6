"""Failures of the results store (:mod:`attnlab.engine.store`): the one-line errors and the full-disk
wrapper of its writes."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

__all__ = ["StoreError", "StoreFull", "writes", "check_wal_of"]


class StoreError(ValueError):
    """The store cannot be used as asked (damaged, another schema, read-only, locked): one line."""


class StoreFull(StoreError):
    """The disk (or the file system's quota) filled while a point was written; earlier points are kept."""

    def __init__(self, message: str, stored: int):
        super().__init__(message)
        self.stored = stored


def writes(method):
    """A write of the store: a full disk (SQLITE_FULL, or an I/O error writing) becomes
    :class:`StoreFull`, whose one line says how many points are stored and how to resume."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as e:
            if "full" not in str(e) and "disk I/O" not in str(e):
                raise
            self._rollback()
            stored = self.count_points()
            raise StoreFull(
                f"store: the disk is full ({e}); {stored} points are stored in {str(self.path)!r}; free some "
                "space and rerun the same command to resume",
                stored,
            ) from None

    return wrapper


def check_wal_of(db: Path) -> None:
    """Refuse a store whose write-ahead log is damaged or truncated (never read it as "no points")."""
    from attnlab.engine.wal import wal_problem

    problem = wal_problem(db)
    if problem:
        raise StoreError(problem)
