"""Sweeps: claims -> points -> backend -> store, with resume and cache as one mechanism.

Points already stored are skipped (a cache hit and a resumed run are the same thing), failed ones
included: a point that raised is a stored result with its error, and ``retry_failed`` computes
those again; ``force`` recomputes everything asked for. Each point is
written as soon as it finishes, so an interrupted run (Ctrl-C, a killed worker) keeps every
finished row and the next run computes only what is missing.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab import __version__
from attnlab.claims.base import Claim, Point, Row, Verdict
from attnlab.engine.backends import BACKENDS, WorkItem, run_items
from attnlab.engine.store import Store

__all__ = ["RunSummary", "ClaimOutcome", "run_claims", "claim_outcome", "default_workers", "git_revision"]

DB_NAME = "attnlab.sqlite"


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def git_revision() -> str | None:
    """The git revision of the source tree attnlab runs from, if it is a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=here, capture_output=True, text=True
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


@dataclass
class RunSummary:
    """What a run did: how many points were asked for, skipped, computed and failed."""

    total: int = 0
    cached: int = 0
    computed: int = 0
    failed: int = 0
    wall_s: float = 0.0
    per_claim: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "points": self.total,
            "cached": self.cached,
            "computed": self.computed,
            "failed": self.failed,
            "wall_s": round(self.wall_s, 3),
            "per_claim": self.per_claim,
        }


ProgressFn = Callable[[str, Any], None]


def run_claims(
    claims: Sequence[Claim],
    *,
    profile: str = "quick",
    out: str | Path = "results",
    backend: str = "process",
    workers: int | None = None,
    root_seed: int = 0,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    force: bool = False,
    retry_failed: bool = False,
    device: str = "cpu",
    threads: int | None = None,
    progress: ProgressFn | None = None,
) -> RunSummary:
    """Run every point of ``claims`` at ``profile`` and store the rows in ``<out>/attnlab.sqlite``.

    Parameters
    ----------
    overrides : mapping claim id -> {param: value}
        Parameter overrides per claim (``--set``).
    threads : int, optional
        Torch threads per point (default: cores / workers, at least 1). Pin it to compare backends.
    progress : callable(event, payload), optional
        Called with ``("start", {"total", "todo"})`` and ``("point", StoredPoint)``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"--backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    workers = workers or default_workers()
    if workers < 1:
        raise ValueError(f"--workers: expected an integer >= 1, got {workers}")
    if threads is None:
        threads = 1 if backend != "serial" else max(1, (os.cpu_count() or 1))
        if backend == "process":
            threads = max(1, (os.cpu_count() or 1) // workers)
    overrides = overrides or {}
    t0 = time.time()
    prov = {"attnlab": __version__, "git": git_revision()}
    summary = RunSummary()
    store = Store(Path(out) / DB_NAME)
    try:
        items: list[WorkItem] = []
        runs: list[int] = []
        for claim in claims:
            points: list[Point] = claim.points(profile, root_seed, overrides.get(claim.id), device)
            ids = [p.point_id for p in points]
            done = set() if force else store.done_ids(ids, ("ok",) if retry_failed else ("ok", "failed"))
            todo = [p for p in points if p.point_id not in done]
            summary.total += len(points)
            summary.cached += len(points) - len(todo)
            summary.per_claim[claim.id] = {"points": len(points), "cached": len(points) - len(todo)}
            runs.append(
                store.start_run(claim.id, profile, root_seed, overrides.get(claim.id, {}), ids, backend)
            )
            items.extend(WorkItem(claim.module, p, threads, prov) for p in todo)
        if progress:
            progress("start", {"total": summary.total, "todo": len(items)})
        for rec in run_items(items, backend, workers if backend != "serial" else 1):
            store.write_point(rec)
            summary.computed += 1
            summary.failed += rec.status == "failed"
            if progress:
                progress("point", rec)
        for r in runs:
            store.end_run(r)
    finally:
        summary.wall_s = time.time() - t0
        store.close()
    return summary


@dataclass(frozen=True)
class ClaimOutcome:
    """A claim's verdict from the rows of its latest run, as the report and the table show it."""

    claim: Claim
    profile: str
    rows: list[Row]
    verdict: Verdict
    missing: int
    runtime_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.claim.id,
            "kind": self.claim.kind,
            "paper": self.claim.paper,
            "statement": self.claim.statement,
            "profile": self.profile,
            "points": len(self.rows),
            "missing": self.missing,
            "failed": sum(not r.ok for r in self.rows),
            "runtime_s": round(self.runtime_s, 3),
            **self.verdict.to_dict(),
        }


def claim_outcome(store: Store, claim: Claim, point_ids: Sequence[str], profile: str) -> ClaimOutcome:
    """Collect stored rows of ``point_ids`` (with their arrays) and apply the claim's verdict."""
    rows = store.rows(point_ids, with_arrays=True)
    missing = len(point_ids) - len(rows)
    if not rows:
        v = Verdict("inconclusive", {"points": 0}, "-", "no stored rows for this run")
    else:
        try:
            v = claim.verdict(rows)
        except Exception as e:  # noqa: BLE001 - a broken verdict is reported, not fatal
            v = Verdict("inconclusive", {"points": len(rows)}, "-", f"verdict raised {type(e).__name__}: {e}")
    if missing and v.status != "inconclusive":
        v = Verdict(
            "inconclusive",
            dict(v.numbers) | {"missing_points": missing},
            v.tolerance,
            f"{missing} point(s) not computed (interrupted run?); {v.note}",
        )
    return ClaimOutcome(claim, profile, rows, v, missing, sum(r.runtime_s for r in rows))
