"""Sweeps over claim grids on a backend, stored in SQLite (see ``runner`` and ``store``)."""

from attnlab.engine.backends import BACKENDS, WorkerDied
from attnlab.engine.runner import (
    DB_NAME,
    ClaimOutcome,
    RunSummary,
    default_workers,
    git_revision,
    run_claims,
)
from attnlab.engine.store import Store

__all__ = [
    "BACKENDS",
    "DB_NAME",
    "ClaimOutcome",
    "RunSummary",
    "Store",
    "WorkerDied",
    "default_workers",
    "git_revision",
    "run_claims",
]
