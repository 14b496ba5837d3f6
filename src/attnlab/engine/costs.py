"""What the rest of a run will cost, from stored per-claim runtimes (never from the rate of points).

Points of different claims differ in cost by orders of magnitude (a paper-C point runs minutes where a
paper-A point runs milliseconds), so a rate of points says nothing about the points left. The cost of a
point is the mean stored CPU time of its claim's finished points at the same profile (the worker's CPU
seconds for the point, all its threads; points stored before CPU time was recorded count their wall
runtime, which load from other processes inflates); points of a claim with no runtime stored at that
profile are *unknown* (shown as such, never as 0). While a run goes on, :class:`Eta` learns each claim's
cost from the CPU time of the points just finished, and turns CPU time into wall time by dividing by the
parallelism it observes: CPU seconds finished per wall second, which falls below the number of workers
on loaded cores and can exceed it when a worker runs several torch threads (it is capped at
``cap``, the CPU seconds per wall second the run can use: workers x threads, at most the cores).

A claim with no runtime stored at the profile is priced at the reference machine's measured cost of its
points (:mod:`attnlab.engine.reference_costs`, from a sample of each claim's points) where it has one:
such claims are named as priced by the reference, and a stored runtime always takes precedence.

Where a claim's points differ in cost by orders of magnitude along its grid (paper A's Monte Carlo
sweeps: a point at n = 30000 training samples costs 300 times one at n = 100), a constant per point is
wrong, and the reference prices each point as ``k · size(params)``: ``size`` is the operation count of
the point's dominant work, read from the claim's code (:data:`SIZE_MODELS`: Monte Carlo kernel sums over
reps x training points x head dimensions x (queries + input dimension)), and ``k`` (CPU s per unit) is
fitted on the measured sample (``reference_costs.PER_SIZE``). The reference table's constant for such a
claim is the mean of ``k · size`` over its whole grid, so a dry run of a fresh store prices the grid's
points as the model does; a run prices the very points it has left (:func:`claim_costs` with
``points``). Claims whose cost is set by data-dependent work (training stopped early) keep a constant.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SIZE_MODELS", "Estimate", "Eta", "claim_costs", "estimate", "format_duration", "point_size"]


def _kernel_sums(reps: float, n: float, head_dims: float, queries: float, d: float) -> float:
    """Operations of a Monte Carlo kernel-regression sweep: ``reps`` training samples of ``n`` points,
    projected onto heads of ``head_dims`` dimensions in all (``n·d·head_dims`` each) and summed against
    ``queries`` queries (``n·queries·head_dims``): ``reps · n · head_dims · (queries + d)``."""
    return float(reps) * float(n) * float(head_dims) * (float(queries) + float(d))


def _splits(D: int, top: int) -> int:
    """How many splits ``D = H·d_k`` a budget sweep runs: the divisors ``d_k`` of ``D`` up to ``top``."""
    return sum(1 for k in range(1, D + 1) if D % k == 0 and k <= top)


def _budget(p: Mapping[str, Any]) -> float:
    # every split holds D head dimensions in all; n_cap caps the training points; top d_k = max_d_k or d - 1
    n = min(int(p["n"]), int(p["n_cap"])) if p.get("n_cap") else int(p["n"])
    top = int(p["max_d_k"]) if p.get("max_d_k") else int(p["d"]) - 1
    D = int(p["D"])
    return _splits(D, top) * _kernel_sums(p["reps"], n, D, p["queries"], p["d"])


def _overlap(d: Any, H: Any, d_k: Any, n: Any, p: Mapping[str, Any]) -> float:
    # one sweep per angle; the decomposition at the origin reads one query instead of ``queries``
    m = 1 if p.get("queries_at") == "origin" else int(p["queries"])
    return len(p["angles"]) * _kernel_sums(p["reps"], n, int(H) * int(d_k), m, d)


def _setting_overlap(p: Mapping[str, Any]) -> float:
    d, H, d_k, _target, _noise, n, _c = p["setting"]
    return _overlap(d, H, d_k, n, p)


def _weighting(p: Mapping[str, Any]) -> float:
    dims = sum(int(m) for m in p["sizes"]) if p.get("heads") == "sizes" else len(p["kappas"]) * int(p["d"])
    return _kernel_sums(p["reps"], p["n"], dims, p["queries"], p["d"])


def _decomposition(p: Mapping[str, Any]) -> float:
    n = p["config"][5]
    return _kernel_sums(p["reps"], n, int(p["heads"]) * int(p["d_k"]), p["queries"], p["d"])


#: The size of a point (operation count of its dominant work, arbitrary unit) of the claims priced by a
#: model in their parameters; read from each claim's code, not fitted. Claims absent: a constant per point.
SIZE_MODELS: dict[str, Callable[[Mapping[str, Any]], float]] = {
    "ensemble.budget-law": _budget,
    "ensemble.many-small-heads": _budget,
    "ensemble.heads-linear-in-budget": _budget,
    "ensemble.variance-needs-decorrelation": _setting_overlap,
    "ensemble.hdi-monotone": lambda p: _overlap(p["d"], p["heads"], p["d_k"], p["n"], p),
    "ensemble.weighting": _weighting,
    "ensemble.decomposition": _decomposition,
    "ensemble.single-head-smoother": lambda p: _kernel_sums(
        p["reps"], p["n"], p["d_k"], p["queries"], p["d"]
    ),
}


def point_size(claim_id: str, params: Mapping[str, Any]) -> float | None:
    """The size of a point of ``claim_id`` under its model (None: the claim has no size model)."""
    f = SIZE_MODELS.get(claim_id)
    return None if f is None else float(f(params))


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


def claim_costs(
    stored: Mapping[str, float],
    profile: str,
    points: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> tuple[dict[str, float], frozenset[str]]:
    """CPU s per point of each claim at ``profile``: the store's mean where it has one, else the
    reference machine's (``engine.reference_costs``); and the claims priced by the reference.

    ``points`` (claim id -> the parameters of its points to price): a claim priced by the reference
    with a size model is priced at the mean of ``k · size`` over those points rather than over its
    whole grid."""
    from attnlab.engine.reference_costs import PER_SIZE, REFERENCE

    ref = {c: v for c, v in REFERENCE.get(profile, {}).items() if c not in stored}
    per_size = PER_SIZE.get(profile, {})
    for cid, ps in (points or {}).items():
        if cid in stored or cid not in per_size or cid not in SIZE_MODELS or not ps:
            continue
        ref[cid] = per_size[cid] * sum(point_size(cid, p) or 0.0 for p in ps) / len(ps)
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
    run's profile (None: unknown); ``workers``: the parallelism (CPU s per wall s) assumed until some
    points have finished; ``cap``: the most CPU s per wall s the run can reach (workers x torch threads,
    at most the cores; default ``workers``).
    """

    def __init__(
        self,
        todo: Mapping[str, int],
        stored: Mapping[str, float | None],
        workers: int,
        cap: float | None = None,
    ):
        self.todo = {k: int(v) for k, v in todo.items() if v}
        self.stored = dict(stored)
        self.workers = max(1, int(workers))
        self.cap = max(float(self.workers), float(cap)) if cap else float(self.workers)
        self._sum: dict[str, float] = {}
        self._n: dict[str, int] = {}
        self._cpu_done = 0.0
        self._t0 = time.monotonic()

    def done(self, claim_id: str, runtime_s: float, cpu_s: float | None = None) -> None:
        """A point of ``claim_id`` finished: its CPU seconds ``cpu_s`` where measured, else its wall
        ``runtime_s``."""
        if cpu_s is not None:
            runtime_s = cpu_s
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
        """CPU seconds finished per wall second (the share of the cores actually used), at most ``cap``."""
        elapsed = time.monotonic() - self._t0
        if self._cpu_done <= 0 or elapsed < 5.0:
            return float(self.workers)
        return max(0.05, min(self.cap, self._cpu_done / elapsed))

    def remaining(self) -> Estimate:
        return estimate(self.todo, {c: self.cost(c) for c in self.todo})

    def text(self) -> str:
        left = self.remaining()
        if not left.unknown and left.cpu_s <= 0:
            return "ETA 0 s"
        return "ETA " + left.text(self.parallelism())
