"""``ensemble.decomposition`` (docs/ensemble.md A2, Thm 3.1): the three terms equal the directly
estimated MSE.

Statement: ``MSE = (Σ_h α_h b_h)² + Σ_h α_h² V_h + Σ_{h≠h'} α_h α_h' C_hh'`` at every query, over the
randomness of the training sample; uniform weights with equal V and ρ give a variance part
``V(ρ + (1−ρ)/H)``.

Verdict rule: "holds" when the worst relative gap between the three terms and the direct MSE, and the
closed form's error on predictions built with exactly equal moments, are below 1e-12 at every point;
"fails" when either is not; "inconclusive" when a point failed and the others pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.claims.ensemble._common import device_name, split
from attnlab.engine.params import In, Items, OneOf
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import decompose, equicorrelated_check, equicorrelated_variance
from attnlab.ensemble.layouts import projection_layout
from attnlab.ensemble.weights import head_weights

__all__ = ["CLAIM", "Params", "run", "verdict"]

TOL = 1e-12  # population (1/R) moments make the identity algebraic: only rounding (~1e-15) remains


@dataclass(frozen=True)
class Params:
    # (layout, angle in degrees or None, kernel, weight scheme, target, training size n)
    config: tuple[Any, ...] = ("random", None, "gaussian", "uniform", "sine", 100)
    d: int = 8  # input dimension
    heads: int = 3  # number of heads H
    d_k: int = 2  # per-head dimension
    c: float = 1.5  # projection scale (W_h = c·U_h)
    noise: float = 0.5  # label noise σ
    reps: int = 50  # Monte Carlo replications of the training sample
    queries: int = 100  # integration points
    closed_V: float = 0.7  # head variance of the exact equal-moment predictions
    closed_rho: float = 0.35  # head correlation of the exact equal-moment predictions

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "config": Items(
            OneOf("random", "orthogonal", "shared", "controlled"),
            In("[0, 90]"),
            OneOf("dot", "gaussian"),
            OneOf("uniform", "geometric", "fibonacci", "optimal", "given"),
            OneOf("sine", "ridge", "bump", "linear", "radial", "zero"),
            In("[2, inf)", cap=10_000_000),
        ),
        "d": In("[1, inf)", cap=100_000),
        "heads": In("[1, inf)", cap=256),
        "d_k": In("[1, inf)", cap=100_000),
        "c": In("(0, inf)"),
        "noise": In("[0, inf)"),
        "reps": In("[1, inf)", cap=100_000),
        "queries": In("[1, inf)", cap=100_000),
        "closed_V": In("[0, inf)"),
        "closed_rho": In("[-1, 1]"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    layout, angle, kernel, scheme, target, n = p.config
    H, g = int(p.heads), point.generator()
    task = RegressionTask(d=int(p.d), target=target, noise=float(p.noise))
    W = projection_layout(layout, H, int(p.d), int(p.d_k), float(p.c), angle, generator=g).to(point.device)
    given = None
    if scheme == "given":  # a uniform draw on the simplex (Dirichlet(1, ..., 1)) from the point's generator
        e = torch.empty(H, dtype=torch.float64).exponential_(generator=g)  # (H,)
        given = e / e.sum()
    alpha = head_weights(scheme, H, given=given)
    dec = decompose(task, W, alpha, int(n), int(p.queries), int(p.reps), g, kernel=kernel)
    it = dec.integrated()
    # the equal-moment closed form is a tiny algebraic check: it stays on CPU
    closed_exact = equicorrelated_check(int(p.reps), H, float(p.closed_V), float(p.closed_rho), g)
    closed_dev = math.nan
    if scheme == "uniform" and H > 1:
        closed = equicorrelated_variance(dec.mean_variance, dec.mean_correlation, H)
        closed_dev = abs(it["variance"] + it["covariance"] - closed) / closed
    return Result(
        metrics={
            "rel_err": dec.identity_rel_error,
            "integrated_rel_err": abs(it["terms_sum"] - it["mse"]) / it["mse"],
            "bias2": it["bias2"],
            "variance": it["variance"],
            "covariance": it["covariance"],
            "mse": it["mse"],
            "mean_correlation": dec.mean_correlation,
            "closed_form_exact_rel_err": closed_exact,
            "closed_form_mean_rel_dev": closed_dev,
            "device": device_name(point.device),
        },
        arrays={"mse_q": dec.mse.cpu().numpy(), "terms_q": dec.terms_sum.cpu().numpy()},
    )


TOLERANCE = f"max_q |bias²+var+cov − MSE|/MSE < {TOL:g}; closed form V(ρ+(1−ρ)/H) to {TOL:g}"


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    if not ok:
        return Verdict("inconclusive", {"points": 0, "failed_points": failed}, TOLERANCE, "no point finished")
    worst = max(r.metrics["rel_err"] for r in ok)
    closed = max(r.metrics["closed_form_exact_rel_err"] for r in ok)
    devs = [
        r.metrics["closed_form_mean_rel_dev"] for r in ok if r.metrics["closed_form_mean_rel_dev"] is not None
    ]
    numbers = {
        "max_rel_err": worst,
        "max_closed_form_rel_err": closed,
        "closed_form_with_mean_V_rho_max_rel_dev": max(devs) if devs else None,
        "points": len(ok),
        "failed_points": failed,
    }
    good = worst < TOL and closed < TOL
    status = "holds" if good and not failed else ("fails" if not good else "inconclusive")
    return Verdict(status, numbers, TOLERANCE)


_READING = (
    "Monte Carlo over training samples, population moments, {points} configurations (layouts, kernels, "
    "weights, targets): worst gap between the three terms and the direct MSE {max_rel_err:.1e}; the "
    "equal-variance/equal-correlation closed form is exact on predictions built with exactly equal "
    "moments (error {max_closed_form_rel_err:.1e}), and approximate with real heads' mean V and ρ "
    "(deviation {closed_form_with_mean_V_rho_max_rel_dev:.3f})."
)

CLAIM = Claim(
    id="ensemble.decomposition",
    kind="identity",
    paper="A",
    statement="Thm 3.1: MSE = (Σ_h α_h b_h)² + Σ_h α_h² V_h + Σ_{h≠h'} α_h α_h' C_hh' at every query, "
    "over the randomness of the training sample; uniform weights with equal V and ρ give a variance part "
    "V(ρ+(1−ρ)/H).",
    version=2,
    params=Params,
    grids={
        "quick": Grid(
            {
                "config": [
                    ["random", None, "gaussian", "uniform", "sine", 100],
                    ["controlled", 45.0, "dot", "geometric", "bump", 200],
                    ["shared", None, "gaussian", "fibonacci", "ridge", 100],
                    ["orthogonal", None, "dot", "given", "linear", 300],
                ]
            },
            fixed={"d": 8, "heads": 3, "d_k": 2, "c": 1.5, "noise": 0.5, "reps": 50, "queries": 100},
        ),
        "full": Grid(
            {
                "config": [
                    [lay, ang, ker, sch, tgt, n]
                    for lay, ang in [
                        ("random", None),
                        ("controlled", 30.0),
                        ("shared", None),
                        ("orthogonal", None),
                    ]
                    for ker in ("gaussian", "dot")
                    for sch in ("uniform", "geometric", "given")
                    for tgt, n in [("sine", 100), ("bump", 1000)]
                ]
            },
            fixed={"d": 8, "heads": 3, "d_k": 2, "c": 1.5, "noise": 0.5, "reps": 200, "queries": 200},
            seeds=2,
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": _READING,
        "fails": _READING + " The identity does not hold to the tolerance.",
        "inconclusive": "Not every point finished ({failed_points} failed).",
    },
    description="Per-head bias, variance and covariances from R replications of the training sample, "
    "population (1/R) moments, float64.",
)
