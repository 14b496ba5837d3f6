"""``ensemble.budget-law`` (docs/ensemble.md A5, Thm 6.1): the optimal split of a fixed budget D = H·d_k.

Statement: at a fixed budget the optimal head dimension grows like ``d_k* ~ (log n)^{2/(4+d)}`` and
``H*`` nearly linearly in D.

Verdict rule, per group (D, d, c) with at least 3 sample sizes: a law is consistent when its fitted
exponent is within 2 standard errors (floor 0.02) of ``2/(4+d)`` (slope of log d_k* in log log n for
the stated law, in log n for the polynomial one). "inconclusive" when every group is consistent with
both; "fails" when some group is consistent with the polynomial law only or with neither; "holds" when
every group is consistent with the stated law.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.claims.ensemble._common import device_name, split
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.budget import budget_sweep, continuous_optimum, fit_power_law
from attnlab.ensemble.data import RegressionTask

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    n: int = 100  # training-sample size
    c: float = 2.0  # projection scale (W_h = c·U_h)
    D: int = 16  # budget H·d_k
    d: int = 2  # input dimension
    target: str = "bump"  # regression target (ensemble.data.TARGETS)
    noise: float = 0.5  # label noise σ
    reps: int = 16  # Monte Carlo replications of the training sample
    queries: int = 100  # integration points
    layout: str = "random"  # how the heads' subspaces are drawn
    kernel: str = "gaussian"  # NW kernel of every head


def run(point: Point) -> Result:
    p: Params = point.p
    task = RegressionTask(d=int(p.d), target=str(p.target), noise=float(p.noise))
    sw = budget_sweep(
        task, int(p.D), int(p.n), int(p.reps), int(p.queries), c=float(p.c), layout=p.layout,
        kernel=p.kernel, seed=int(point.seed % (2**31)), device=point.device,
    )  # fmt: skip
    return Result(
        metrics={
            "dk_star": continuous_optimum(sw.d_k, sw.mse),
            "dk_best": sw.best_d_k,
            "mse_best": float(sw.mse.min()),
            "device": device_name(point.device),
        },
        arrays={"d_k": sw.d_k, "mse": sw.mse, "bias2": sw.bias2, "var_part": sw.variance_part},
    )


TOLERANCE = (
    "a law is consistent when the fitted exponent is within 2 standard errors (floor 0.02) of 2/(4+d): "
    "slope of log d_k* in log log n (stated law) or in log n (polynomial law)"
)


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    groups: dict[tuple, list[Row]] = {}
    for r in ok:
        groups.setdefault((r.params["D"], r.params["d"], r.params["c"]), []).append(r)
    numbers: dict = {"points": len(ok), "failed_points": failed}
    verdicts = []
    for (D, d, c), rs in sorted(groups.items()):
        ns = np.array([r.params["n"] for r in rs], dtype=float)
        if len(set(ns)) < 3:
            continue
        dk = np.array([r.metrics["dk_star"] for r in rs])
        p = 2 / (4 + d)
        stated, poly = fit_power_law(np.log(ns), dk), fit_power_law(ns, dk)
        se_s = max(stated["p_se"], 0.02) if stated["p_se"] == stated["p_se"] else math.inf
        se_p = max(poly["p_se"], 0.02) if poly["p_se"] == poly["p_se"] else math.inf
        ok_s, ok_p = abs(stated["p"] - p) <= 2 * se_s, abs(poly["p"] - p) <= 2 * se_p
        v = "cannot tell" if ok_s and ok_p else ("stated" if ok_s else ("polynomial" if ok_p else "neither"))
        verdicts.append(v)
        numbers[f"D={D}, d={d}, c={c}"] = {
            "predicted_exponent": p,
            "stated_fit_exponent": stated["p"],
            "stated_fit_se": stated["p_se"],
            "stated_fixed_rss": fit_power_law(np.log(ns), dk, exponent=p)["rss"],
            "poly_fit_exponent": poly["p"],
            "poly_fit_se": poly["p_se"],
            "poly_fixed_rss": fit_power_law(ns, dk, exponent=p)["rss"],
            "dk_star_by_n": {int(n): float(np.mean(dk[ns == n])) for n in sorted(set(ns))},
            "best_divisor_by_n": {
                int(n): sorted({r.metrics["dk_best"] for r in rs if r.params["n"] == n})
                for n in sorted(set(ns))
            },
            "consistent_with": v,
        }
    if not verdicts:
        return Verdict("inconclusive", numbers, TOLERANCE, "fewer than 3 sample sizes in every group")
    if all(v == "cannot tell" for v in verdicts):
        status = "inconclusive"
    elif any(v in ("neither", "polynomial") for v in verdicts):
        status = "fails"
    else:
        status = "holds"
    return Verdict(status, numbers, TOLERANCE)


_READING = (
    "Uniform ensembles of random-subspace heads (W = c·U, scale 1/√d_k, Gaussian kernel), every split of "
    "D, integrated MSE by Monte Carlo; d_k* located by a parabola in log d_k around the best divisor "
    "({points} points; per group see the numbers)."
)

CLAIM = Claim(
    id="ensemble.budget-law",
    kind="theorem",
    paper="A",
    statement="Thm 6.1: at a fixed budget D = H·d_k the optimal head dimension grows like "
    "d_k* ~ (log n)^{2/(4+d)} and H* nearly linearly in D.",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"n": [25, 100, 400, 1600, 6400, 12800], "c": [2.0, 4.0]},
            fixed={"D": 16, "d": 2, "target": "bump", "noise": 0.5, "reps": 16, "queries": 100},
            seeds=3,
        ),
        "full": Grid(
            {
                "n": [25, 100, 300, 1000, 3000, 10000, 30000],
                "c": [1.0, 2.0, 4.0],
                "D": [8, 16, 32],
                "d": [2, 4, 8],
            },
            fixed={"target": "bump", "noise": 0.5, "reps": 40, "queries": 300},
            seeds=6,
        ),
    },
    run=run,
    verdict=verdict,
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="Sweep of every divisor split of D over n, D, input dimension d and two or more projection "
    "scales c.",
)
