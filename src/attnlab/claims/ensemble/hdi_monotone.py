"""``ensemble.hdi-monotone`` (docs/ensemble.md A3, Thm 4.2): the integrated MSE is non-increasing in the HDI.

Verdict rule, on controlled-overlap families (HDI = sin² φ by construction), per setting: "fails" when
some step to a larger HDI raises the MSE by more than 3 paired standard errors, or the 95% t-interval
of the mean Spearman(HDI, MSE) over seeds lies above 0; "holds" when that interval lies below 0 in
every setting; "inconclusive" otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.claims.ensemble._common import device_name, setting_label, split, task_of
from attnlab.claims.ensemble.variance_needs_decorrelation import ANGLES, SETTINGS_FULL, SETTINGS_QUICK
from attnlab.core.seeding import derive_seed
from attnlab.core.stats import mean_ci, spearman
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.sweeps import controlled_overlap_sweep

__all__ = ["CLAIM", "Params", "run", "verdict"]

Z_SIG = 3.0  # an increase counts when it exceeds 3 paired standard errors


@dataclass(frozen=True)
class Params:
    setting: tuple[Any, ...] = (8, 3, 2, "sine", 1.0, 200, 1.5)  # (d, H, d_k, target, noise σ, n, scale c)
    reps: int = 200  # Monte Carlo replications of the training sample
    queries: int = 150  # integration points
    angles: tuple[float, ...] = ANGLES  # pairwise principal angles φ (degrees), ascending


def run(point: Point) -> Result:
    p: Params = point.p
    task, H, d_k, n, c = task_of(p.setting)
    seeds = tuple(derive_seed(point.seed, k) for k in (1, 2, 3))
    sw = controlled_overlap_sweep(
        task, H, d_k, n, c, list(p.angles), int(p.reps), int(p.queries), seeds, point.device
    )
    err = sw.rep_err  # (A, R) per-replication integrated squared error
    diffs = err[1:] - err[:-1]  # (A-1, R) paired differences between adjacent angles
    se = diffs.std(axis=1, ddof=1) / math.sqrt(err.shape[1])
    z = diffs.mean(axis=1) / np.maximum(se, 1e-300)
    sig = z > Z_SIG
    d_bias = np.diff(sw.bias2)  # (A-1,) change of the bias term at each step
    return Result(
        metrics={
            "spearman_hdi_mse": spearman(sw.hdi, sw.mse),
            "max_increase_z": float(z.max()),
            "significant_increases": int(sig.sum()),
            "increases_with_bias_rise": int((sig & (d_bias > 0)).sum()),
            "mse_identical": float(sw.mse[0]),
            "mse_orthogonal": float(sw.mse[-1]),
            "device": device_name(point.device),
        },
        arrays={"hdi": sw.hdi, "mse": sw.mse, "bias2": sw.bias2, "var_part": sw.var_part, "z_step": z},
    )


TOLERANCE = (
    "95% t-interval of the mean Spearman(HDI, MSE) over seeds below 0 in every setting, and no step "
    f"to a larger HDI raising the MSE by more than {Z_SIG:g} paired standard errors"
)


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    groups: dict[str, list[Row]] = {}
    for r in ok:
        groups.setdefault(setting_label(r.params["setting"]), []).append(r)
    numbers: dict = {"points": len(ok), "failed_points": failed}
    statuses = []
    for lab, rs in groups.items():
        m, lo, hi = mean_ci([r.metrics["spearman_hdi_mse"] for r in rs])
        sig = sum(r.metrics["significant_increases"] for r in rs)
        numbers[lab] = {
            "spearman_mean": m,
            "ci95": [lo, hi],
            "significant_increases": sig,
            "increases_where_bias2_rose": sum(r.metrics["increases_with_bias_rise"] for r in rs),
            "max_increase_z": max(r.metrics["max_increase_z"] for r in rs),
            "seeds": len(rs),
        }
        if sig > 0 or (lo == lo and lo > 0):
            statuses.append("fails")
        elif hi == hi and hi < 0:
            statuses.append("holds")
        else:
            statuses.append("inconclusive")
    if not statuses:
        return Verdict("inconclusive", numbers, TOLERANCE, "no point finished")
    status = (
        "fails"
        if "fails" in statuses
        else ("holds" if all(s == "holds" for s in statuses) else "inconclusive")
    )
    return Verdict(status, numbers, TOLERANCE)


_READING = (
    "Controlled-overlap families (HDI = sin²φ set by construction), integrated MSE over the input law, "
    "paired comparisons on common training samples, {points} points."
)

CLAIM = Claim(
    id="ensemble.hdi-monotone",
    kind="theorem",
    paper="A",
    statement="Thm 4.2: the integrated MSE of the NW ensemble is non-increasing in the Head Diversity Index.",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"setting": SETTINGS_QUICK}, fixed={"reps": 200, "queries": 150}, seeds=12),
        "full": Grid({"setting": SETTINGS_FULL}, fixed={"reps": 400, "queries": 400}, seeds=16),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": _READING,
        "fails": _READING + " The MSE rose significantly as HDI grew in some setting (see "
        "increases_where_bias2_rose: each rise comes with a rise of the bias term).",
        "inconclusive": _READING,
    },
    description="Spearman correlation between HDI and integrated MSE, t-intervals over seeds.",
)
