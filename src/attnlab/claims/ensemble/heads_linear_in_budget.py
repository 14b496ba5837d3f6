"""``ensemble.heads-linear-in-budget`` (docs/ensemble.md A5, Thm 6.1): H* grows nearly linearly in D.

Setting as ``ensemble.budget-law`` (d = 16, every split with d_k < d, radial target), at one sample
size and several budgets D ≤ d. H* = D/d_k* with d_k* the vertex of a parabola in log d_k.

Verdict rule: budgets whose best divisor sits on the grid edge are set aside (an edge optimum gives
H* = D/d_k exactly, a slope that measures the grid); with fewer than 2 interior budgets the verdict is
inconclusive. The slope s of log H* in log D (fitted over every interior point) is held against the
prediction 1 (``pred("exponent", 1)``): "inconclusive" when 2 se ≥ 0.5 (the fit cannot tell linear
growth from square-root growth), else "holds" when |s − 1| ≤ 2 se, "fails" otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnlab.claims.ensemble import budget_law
from attnlab.claims.ensemble._common import split
from attnlab.claims.ensemble.budget_law import Params
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict
from attnlab.ensemble.budget import fit_power_law

__all__ = ["CLAIM", "Params", "run", "verdict"]

RESOLUTION = 0.5  # a band this wide holds exponents 1 and 1/2 alike
SE_FLOOR = 0.02  # a slope fitted on few points can have a tiny se by chance: floor the 2-se band


def _edge(r: Row) -> bool:
    return r.metrics["dk_best"] in (r.metrics["dk_min"], r.metrics["dk_max"])


def run(point: Point) -> Result:
    """The budget sweep of ``ensemble.budget-law`` at this point's parameters."""
    return budget_law.run(point)


TOLERANCE = "slope of log H* in log D within 2 se (floor 0.02) of 1, budgets with an interior optimum only"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok, failed = split(rows)
    Ds = sorted({r.params["D"] for r in ok})
    edge_D = [D for D in Ds if np.mean([_edge(r) for r in ok if r.params["D"] == D]) > 0.5]
    inner = [r for r in ok if r.params["D"] not in edge_D]
    h_star = {
        int(D): float(np.mean([D / r.metrics["dk_star"] for r in ok if r.params["D"] == D])) for D in Ds
    }
    numbers: dict = {
        "h_star_by_D": h_star,
        "D_on_grid_edge": edge_D,
        "points": len(ok),
        "failed_points": failed,
    }
    if len({r.params["D"] for r in inner}) < 2:
        return Verdict.outside("fewer than 2 budgets with an interior optimum", numbers, TOLERANCE)
    Dv = np.array([r.params["D"] for r in inner], dtype=float)
    fit = fit_power_law(Dv, Dv / np.array([r.metrics["dk_star"] for r in inner]))
    se = max(fit["p_se"], SE_FLOOR) if fit["p_se"] == fit["p_se"] else math.inf
    target = pred("exponent", 1.0)
    numbers |= {"slope": fit["p"], "slope_se": fit["p_se"], "band": 2 * se}
    if 2 * se >= RESOLUTION:
        reason = f"2 se = {2 * se:.2f} ≥ {RESOLUTION}: the fit cannot tell linear from square-root growth"
        return Verdict.outside(reason, numbers, TOLERANCE)
    return Verdict("holds" if abs(fit["p"] - target) <= 2 * se else "fails", numbers, TOLERANCE)


_READING = (
    "H* = D/d_k* by budget {h_star_by_D} (budgets on the grid edge, set aside: {D_on_grid_edge}); slope of "
    "log H* in log D {slope:.3f} ± {slope_se:.3f} against 1."
)

CLAIM = Claim(
    id="ensemble.heads-linear-in-budget",
    kind="theorem",
    paper="A",
    statement="Thm 6.1: at a fixed training-set size the optimal number of heads H* grows nearly linearly "
    "with the budget D = H·d_k.",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"D": [6, 8, 12, 16]}, fixed={"n": 1000, "c": 2.0, "d": 16}, seeds=6),
        "full": Grid(
            {"D": [4, 6, 8, 12, 16, 24, 30], "c": [2.0, 4.0]}, fixed={"n": 3000, "d": 32, "reps": 24}, seeds=6
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"exponent": "the exponent 1 of H* in D ('nearly linear')"},
    regime="D ≤ d, every split with d_k < d; an optimum inside the divisor grid",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="Budget sweeps at several D, one n; H* from the continuous optimum of d_k.",
)
