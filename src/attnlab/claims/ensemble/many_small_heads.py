"""``ensemble.many-small-heads`` (docs/ensemble.md A5): at a fixed budget and large n, many small heads
beat few large ones.

Setting as ``ensemble.budget-law`` (d = 16, D = 16, every split with d_k < d, radial target), at a
large sample size. "Many small heads" means the optimal split has at least as many heads as each head
has dimensions, H* ≥ d_k*, i.e. d_k* ≤ √D; d_k* per seed is the vertex of a parabola in log d_k
through the best divisor and its neighbours (common training samples across splits).

Verdict rule: the 95% t-interval over seeds of log d_k* below log √D (``pred("threshold", √D)``)
holds, above it fails, otherwise inconclusive. The best MSE on each side of √D is reported beside it.

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
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "Params", "run", "verdict"]


def _sides(r: Row) -> tuple[float, float]:
    dk = np.array(r.metrics["d_k"], dtype=float)
    mse = np.array(r.metrics["mse_by_split"], dtype=float)
    small = dk <= math.sqrt(r.params["D"])
    return float(mse[small].min()), float(mse[~small].min())


def run(point: Point) -> Result:
    """The budget sweep of ``ensemble.budget-law`` at this point's parameters."""
    return budget_law.run(point)


TOLERANCE = "95% t-interval over seeds of log d_k*: below log √D holds, above fails"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok, failed = split(rows)
    if len(ok) < 2:
        return Verdict(
            "inconclusive", {"seeds": len(ok), "failed_points": failed}, TOLERANCE, "fewer than 2 seeds"
        )
    m, lo, hi = mean_ci([math.log(r.metrics["dk_star"]) for r in ok])
    thr = pred("threshold", math.sqrt(ok[0].params["D"]))
    sides = [_sides(r) for r in ok]
    numbers = {
        "dk_star": math.exp(m),
        "dk_star_lo": math.exp(lo),
        "dk_star_hi": math.exp(hi),
        "threshold": thr,
        "mse_many_small": float(np.mean([s[0] for s in sides])),
        "mse_few_large": float(np.mean([s[1] for s in sides])),
        "n": ok[0].params["n"],
        "seeds": len(ok),
        "failed_points": failed,
    }
    status = "holds" if hi < math.log(thr) else ("fails" if lo > math.log(thr) else "inconclusive")
    return Verdict(status, numbers, TOLERANCE)


_READING = (
    "n = {n}: d_k* {dk_star:.2f} (95% CI [{dk_star_lo:.2f}, {dk_star_hi:.2f}], {seeds} seeds) against √D = "
    "{threshold:.2f}; best MSE with H ≥ d_k {mse_many_small:.4f}, with d_k > √D {mse_few_large:.4f}."
)

CLAIM = Claim(
    id="ensemble.many-small-heads",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="Thm 6.1 (implication): under a fixed budget D = H·d_k and a large training set, many small "
    "heads beat few large ones: the optimal split has H* ≥ d_k*.",
    version=2,
    params=Params,
    grids={
        "quick": Grid(fixed={"n": 3000, "c": 2.0, "D": 16, "d": 16}, seeds=10),
        "full": Grid({"n": [3000, 10000], "c": [2.0, 4.0]}, fixed={"D": 16, "d": 16, "reps": 24}, seeds=8),
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
    regime="D ≤ d, every split with d_k < d; heads that can be decorrelated",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="The continuous optimum d_k* per seed at one large n against √D.",
)
