"""``ensemble.multi-vs-single-head`` (docs/ensemble.md A5): at a fixed budget, several heads against one.

Statement (the premise of Thm 6.1's budget split): at the same budget D = H·d_k, an ensemble of several
heads (H ≥ 2) beats a single head of size D.

Setting as ``ensemble.budget-law`` (d = D = 16, radial target, c = 2), with the single head H = 1,
d_k = D included in the sweep (``max_d_k = 16``; at d_k = d that head sees the whole input, a tight
frame), at n = 300 and 3000, 24 seeds. Common training samples and queries across splits, so the splits
are compared paired within a seed.

Verdict rule (branch "paired CI"), at the largest n of the grid: per seed the difference
Δ = min over the splits with H ≥ 2 of the integrated MSE − the single head's MSE; its 95% t-interval over
seeds below 0 holds, above 0 fails, otherwise inconclusive. Δ at every n is reported beside it, with the
same heads' large-sample limits (``ensemble.budget.radial_limit``): averaged heads keep the averaging
floor, the single head of size d has none, so at large n averaging must lose to it.

The weighting of the heads, the projection scale c and the reading of 1/√d_k are open knobs (weighting
averaged or summed, c ∈ {1, 2, 4}, bandwidth temperature or kernel sd: read as the temperature, the one
head of size 16 smooths with a kernel of sd 1 in its own coordinates at c = 2, and its large-sample limit
is worse than the heads' averaging floor). Control (one knob): ``pure-noise`` (``target="zero"``) — with
nothing to learn the MSE is variance alone, which many averaged narrow heads make smaller than one head
of size D (must hold).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab.claims.ensemble import budget_law
from attnlab.claims.ensemble._common import split
from attnlab.claims.ensemble.budget_law import Params
from attnlab.core.stats import mean_ci
from attnlab.engine.protocol import Claim, Control, Grid, Knob, Point, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]

BRANCH = "paired CI"


def run(point: Point) -> Result:
    """The budget sweep of ``ensemble.budget-law`` at this point's parameters (the single head included)."""
    return budget_law.run(point)


def _delta(r: Row) -> tuple[float, float | None]:
    """(best multi-head MSE − single-head MSE, the same difference of the large-sample limits)."""
    dk = np.array(r.metrics["d_k"])
    mse = np.array(r.metrics["mse_by_split"], dtype=float)
    one = dk == r.params["D"]
    if not one.any() or one.all():
        raise ValueError(f"d_k: expected the single head d_k = D = {r.params['D']} and others, got {dk}")
    lim = r.metrics.get("mse_limit_by_split")
    dl = None
    if lim is not None and None not in lim:
        la = np.array(lim, dtype=float)
        dl = float(la[~one].min() - la[one][0])
    return float(mse[~one].min() - mse[one][0]), dl


TOLERANCE = (
    "at the largest n, 95% t-interval over seeds of min MSE(H ≥ 2) − MSE(H = 1): below 0 holds, above fails"
)


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    ns = sorted({r.params["n"] for r in ok})
    top = [r for r in ok if ns and r.params["n"] == ns[-1]]
    if len(top) < 2:
        nums = {"seeds": len(top), "failed_points": failed}
        return Verdict("inconclusive", nums, TOLERANCE, "fewer than 2 seeds at the largest n", branch=BRANCH)
    m, lo, hi = mean_ci([_delta(r)[0] for r in top])
    lims = [_delta(r)[1] for r in top]
    numbers = {
        "delta": m,
        "delta_lo": lo,
        "delta_hi": hi,
        "delta_by_n": {int(n): float(np.mean([_delta(r)[0] for r in ok if r.params["n"] == n])) for n in ns},
        "mse_single_head": float(np.mean([r.metrics["mse_by_split"][-1] for r in top])),
        "limit_delta": float(np.mean(lims)) if all(x is not None for x in lims) else None,
        "n": ns[-1],
        "seeds": len(top),
        "failed_points": failed,
    }
    status = "holds" if hi < 0 else ("fails" if lo > 0 else "inconclusive")
    return Verdict(status, numbers, TOLERANCE, branch=BRANCH)


_READING = (
    "n = {n}: best multi-head MSE − single-head MSE {delta:+.4f} (95% CI [{delta_lo:+.4f}, {delta_hi:+.4f}], "
    "{seeds} seeds; the single head's MSE {mse_single_head:.4f}); by n {delta_by_n}; the same difference of "
    "the large-sample limits {limit_delta}."
)

CLAIM = Claim(
    id="ensemble.multi-vs-single-head",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="At a fixed budget D = H·d_k, several heads (H ≥ 2) beat a single head of size D.",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"n": [300, 3000]}, fixed={"c": 2.0, "D": 16, "d": 16, "max_d_k": 16}, seeds=12),
        "full": Grid(
            {"n": [300, 3000, 30000]}, fixed={"c": 2.0, "D": 16, "d": 16, "max_d_k": 16, "reps": 24}, seeds=24
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "pure-noise": Control(
            expect="holds",
            set={"target": "zero"},
            why="f = 0: the MSE is variance alone, which many averaged narrow heads make smaller than one "
            "head of size D",
        )
    },
    knobs={
        "c": Knob(
            {"quick": [1.0, 2.0], "full": [1.0, 2.0, 4.0]}, "the projection scale sets the kernel width"
        ),
        "weighting": Knob(
            ["averaged", "summed"],
            "the paper averages its heads; attention's concatenation with an output map adds them",
        ),
        "bandwidth": Knob(
            ["scale", "sd"], "h = 1/√d_k read as attention's score temperature or as the kernel's sd"
        ),
    },
    regime="D ≤ d, the single head of size D among the splits",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="Paired over seeds at the largest n: the best split with H ≥ 2 against one head of size D, "
    "mapped over c and the head weighting.",
)
