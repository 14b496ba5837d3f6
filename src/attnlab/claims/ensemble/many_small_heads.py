"""``ensemble.many-small-heads`` (docs/ensemble.md A5): at a fixed budget and large n, many small heads
beat few large ones.

Setting as ``ensemble.budget-law`` (d = 16, D = 16, every split with d_k < d, radial target), over
sample sizes a decade or more apart (quick 300 and 3000; full up to 3·10⁴). "Many small heads" means the
optimal split has at least as many heads as each head has dimensions, H* ≥ d_k*, i.e. d_k* ≤ √D; d_k*
per seed is the vertex of a parabola in log d_k through the best divisor and its neighbours (common
training samples across splits).

The statement leaves open how heads are combined, the projection scale c and how the scale 1/√d_k is
read; they are mapped as knobs (``c`` ∈ {1, 2, 4}; ``weighting``: averaged as in the paper's ensemble or
summed as concatenation with an identity output map adds them; ``bandwidth``: 1/√d_k as attention's score
temperature or as the Gaussian kernel's sd). Each cell is decided by the same rule.

Verdict rule, at the largest n of the grid (the statement is about large training sets): the 95%
t-interval over seeds of log d_k* below log √D (``pred("threshold", √D)``) holds, above it fails,
otherwise inconclusive (branch "CI of log d_k*"; band: the interval's half-width over √D). d_k* at every
n is reported beside it (which way the optimum moves as n grows), with the best MSE on each side of √D,
and the large-sample limit of the same heads (``ensemble.budget.radial_limit``): its best split says where
the optimum goes as n → ∞ at the fixed kernel width, and the averaging floor 1 − 2d_k/d + d_k/(dH) of
orthogonal averaged heads says why averaging favours large heads there.

Control (one knob): ``pure-noise`` (``target="zero"``) — with nothing to learn there is no bias for larger
heads to buy down; the MSE is variance alone, which the narrowest heads, averaged in the largest number,
make smallest: many small heads win (must hold).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnlab.claims.ensemble import budget_law
from attnlab.claims.ensemble._common import split
from attnlab.claims.ensemble.budget_law import Params
from attnlab.core.stats import mean_ci
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Knob,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)
from attnlab.ensemble.budget import averaging_floor

__all__ = ["CLAIM", "Params", "run", "verdict"]

BRANCH = "CI of log d_k*"


def _sides(r: Row) -> tuple[float, float]:
    dk = np.array(r.metrics["d_k"], dtype=float)
    mse = np.array(r.metrics["mse_by_split"], dtype=float)
    small = dk <= math.sqrt(r.params["D"])
    return float(mse[small].min()), float(mse[~small].min())


def run(point: Point) -> Result:
    """The budget sweep of ``ensemble.budget-law`` at this point's parameters."""
    return budget_law.run(point)


TOLERANCE = "at the largest n, 95% t-interval over seeds of log d_k*: below log √D holds, above fails"


def _limit_best(rs: Sequence[Row]) -> float | None:
    lim = [r.metrics.get("mse_limit_by_split") for r in rs]
    if not lim or any(v is None or None in v for v in lim):
        return None
    mean = np.mean(np.array(lim, dtype=float), axis=0)
    return float(rs[0].metrics["d_k"][int(np.argmin(mean))])


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok, failed = split(rows)
    ns = sorted({r.params["n"] for r in ok})
    top = [r for r in ok if ns and r.params["n"] == ns[-1]]
    if len(top) < 2:
        nums = {"seeds": len(top), "failed_points": failed}
        return Verdict("inconclusive", nums, TOLERANCE, "fewer than 2 seeds at the largest n", branch=BRANCH)
    m, lo, hi = mean_ci([math.log(r.metrics["dk_star"]) for r in top])
    D, d = int(top[0].params["D"]), int(top[0].params["d"])
    thr = pred("threshold", math.sqrt(D))
    sides = [_sides(r) for r in top]
    dks = [k for k in top[0].metrics["d_k"]]
    numbers = {
        "dk_star": math.exp(m),
        "dk_star_lo": math.exp(lo),
        "dk_star_hi": math.exp(hi),
        "threshold": thr,
        "dk_star_by_n": {
            int(n): float(np.exp(np.mean([math.log(r.metrics["dk_star"]) for r in ok if r.params["n"] == n])))
            for n in ns
        },
        "mse_many_small": float(np.mean([s[0] for s in sides])),
        "mse_few_large": float(np.mean([s[1] for s in sides])),
        "limit_best_d_k": _limit_best(top),
        "averaging_floor_by_d_k": {int(k): averaging_floor(d, int(k), D // int(k)) for k in dks if D <= d},
        "n": ns[-1],
        "seeds": len(top),
        "failed_points": failed,
    }
    band = max(math.exp(hi) - math.exp(m), math.exp(m) - math.exp(lo)) / thr
    status = "holds" if hi < math.log(thr) else ("fails" if lo > math.log(thr) else "inconclusive")
    return Verdict(status, numbers, TOLERANCE, branch=BRANCH, band=band)


_READING = (
    "n = {n}: d_k* {dk_star:.2f} (95% CI [{dk_star_lo:.2f}, {dk_star_hi:.2f}], {seeds} seeds) against √D = "
    "{threshold:.2f}; d_k* by n {dk_star_by_n}; best MSE with H ≥ d_k {mse_many_small:.4f}, with d_k > √D "
    "{mse_few_large:.4f}; the same heads' large-sample limit is best at d_k = {limit_best_d_k} (averaging "
    "floor of orthogonal heads by d_k {averaging_floor_by_d_k})."
)

CLAIM = Claim(
    id="ensemble.many-small-heads",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="Thm 6.1 (implication): under a fixed budget D = H·d_k and a large training set, many small "
    "heads beat few large ones: the optimal split has H* ≥ d_k*.",
    version=3,
    params=Params,
    grids={
        "quick": Grid({"n": [300, 3000]}, fixed={"c": 2.0, "D": 16, "d": 16}, seeds=24),
        "full": Grid({"n": [300, 3000, 30000]}, fixed={"c": 2.0, "D": 16, "d": 16, "reps": 24}, seeds=24),
    },
    run=run,
    verdict=verdict,
    predictions={"threshold": "the split H = d_k (d_k = √D) between many small and few large heads"},
    controls={
        "pure-noise": Control(
            expect="holds",
            set={"target": "zero"},
            why="f = 0: no bias for larger heads to buy down, the MSE is variance alone, smallest with the "
            "narrowest heads averaged in the largest number",
        )
    },
    knobs={
        "c": Knob([1.0, 2.0, 4.0], "the projection scale sets the kernel width; the statement fixes none"),
        "weighting": Knob(
            ["averaged", "summed"],
            "the paper averages its heads; attention's concatenation with an output map adds them",
        ),
        "bandwidth": Knob(
            ["scale", "sd"], "h = 1/√d_k read as attention's score temperature or as the kernel's sd"
        ),
    },
    regime="D ≤ d, every split with d_k < d; heads that can be decorrelated",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="The continuous optimum d_k* per seed at the largest n, mapped over c, the head weighting "
    "and the bandwidth reading; d_k* by n and the large-sample limit beside it.",
)
