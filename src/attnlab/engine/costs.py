"""What the rest of a run will cost, from stored per-claim runtimes (never from the rate of points).

Points of different claims differ in cost by orders of magnitude (a paper-C point runs minutes where a
paper-A point runs milliseconds), so a rate of points says nothing about the points left. The cost of a
point is the mean stored CPU time of its claim's finished points at the same profile; points of a claim
with no runtime stored at that profile are *unknown* (shown as such, never as 0). While a run goes on,
:class:`Eta` learns each claim's cost from the points just finished, and turns CPU time into wall time
with the parallelism it observes (CPU seconds finished per wall second), so the estimate improves as
the run proceeds.

A claim with no runtime stored at the profile is priced at the reference machine's measured cost of its
points (:mod:`attnlab.engine.reference_costs`, from a sample of each claim's points) where it has one:
such claims are named as priced by the reference, and a stored runtime always takes precedence.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Estimate", "Eta", "claim_costs", "estimate", "format_duration"]


def format_duration(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


@dataclass(frozen=True)
class Estimate:
    """CPU seconds of the points whose claim has a cost, and the claims (with points) that have none."""

    cpu_s: float
    unknown: dict[str, int] = field(default_factory=dict)  # claim id -> points of unknown cost

    @property
    def complete(self) -> bool:
        return not self.unknown

    def text(self, workers: float) -> str:
        """``about 12 min on 4 workers``, ``at least 3 min (+ 40 points of 2 claims never timed)``, or
        ``unknown (no claim timed yet)``."""
        if not self.unknown:
            return f"about {format_duration(self.cpu_s / workers)}"
        n = sum(self.unknown.values())
        untimed = f"{n} points of {len(self.unknown)} claim(s) never timed"
        if self.cpu_s <= 0:
            return f"unknown ({untimed})"
        return f"at least {format_duration(self.cpu_s / workers)} (+ {untimed})"


def claim_costs(stored: Mapping[str, float], profile: str) -> tuple[dict[str, float], frozenset[str]]:
    """CPU s per point of each claim at ``profile``: the store's mean where it has one, else the
    reference machine's (``engine.reference_costs``); and the claims priced by the reference."""
    from attnlab.engine.reference_costs import REFERENCE

    ref = {c: v for c, v in REFERENCE.get(profile, {}).items() if c not in stored}
    return {**ref, **stored}, frozenset(ref)


def estimate(todo: Mapping[str, int], cost: Mapping[str, float | None]) -> Estimate:
    """The cost of ``todo`` (claim id -> points left) at ``cost`` (claim id -> CPU s per point or None)."""
    cpu, unknown = 0.0, {}
    for cid, n in todo.items():
        if n <= 0:
            continue
        c = cost.get(cid)
        if c is None:
            unknown[cid] = n
        else:
            cpu += c * n
    return Estimate(cpu, unknown)


class Eta:
    """The remaining wall time of a run, from per-claim costs (stored, then learnt as points finish).

    ``todo``: claim id -> points to compute; ``stored``: claim id -> stored mean CPU s per point at the
    run's profile (None: unknown); ``workers``: the parallelism assumed until some points have finished.
    """

    def __init__(self, todo: Mapping[str, int], stored: Mapping[str, float | None], workers: int):
        self.todo = {k: int(v) for k, v in todo.items() if v}
        self.stored = dict(stored)
        self.workers = max(1, int(workers))
        self._sum: dict[str, float] = {}
        self._n: dict[str, int] = {}
        self._cpu_done = 0.0
        self._t0 = time.monotonic()

    def done(self, claim_id: str, runtime_s: float) -> None:
        """A point of ``claim_id`` finished after ``runtime_s`` CPU seconds."""
        if self.todo.get(claim_id, 0) > 0:
            self.todo[claim_id] -= 1
        self._sum[claim_id] = self._sum.get(claim_id, 0.0) + max(0.0, runtime_s)
        self._n[claim_id] = self._n.get(claim_id, 0) + 1
        self._cpu_done += max(0.0, runtime_s)

    def cost(self, claim_id: str) -> float | None:
        """CPU s per point: learnt in this run when a point has finished, else the stored mean."""
        if self._n.get(claim_id):
            return self._sum[claim_id] / self._n[claim_id]
        return self.stored.get(claim_id)

    def parallelism(self) -> float:
        """CPU seconds finished per wall second (the workers' share actually used), at most ``workers``."""
        elapsed = time.monotonic() - self._t0
        if self._cpu_done <= 0 or elapsed < 5.0:
            return float(self.workers)
        return max(0.5, min(float(self.workers), self._cpu_done / elapsed))

    def remaining(self) -> Estimate:
        return estimate(self.todo, {c: self.cost(c) for c in self.todo})

    def text(self) -> str:
        left = self.remaining()
        if not left.unknown and left.cpu_s <= 0:
            return "ETA 0 s"
        return "ETA " + left.text(self.parallelism())
