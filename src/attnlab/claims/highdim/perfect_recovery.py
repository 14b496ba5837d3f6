"""``highdim.perfect-recovery``: without label noise the factorised student's test error vanishes above
ᾱ_PR, an ERM threshold of its own: above the Bayes-optimal one and below the unfactorised one
(docs/highdim.md C5; ᾱ = α (T² + T − 2)/2).

Per point: ERM at dimension d (L-BFGS in float32 with float64 sums by default, which reaches the published
Adam protocol's minimum or lower; ``--set optimizer=adam dtype=float64`` runs that protocol), Δ = 0, small λ̃,
sample ratio α on a grid across the thresholds; the noiseless test error and the theory's thresholds in α:
factorised ``alpha_pr``, Bayes-optimal ``alpha_bo`` and unfactorised ``alpha_pr_unfactorised``.

Four readings decide together:
0. the state evolution's threshold (a ``side="theory"`` point): the test error at Δ = 0 on a dense α grid at
   two small λ̃ (:func:`attnlab.highdim.se_thresholds.lam_scan`), at the points where it has reached its
   λ̃ → 0 limit (the two λ̃ agree to ``se_rtol``; past the threshold it shrinks with λ̃ and is not), fitted by
   ``A (α_c − α)^p`` (:func:`~attnlab.highdim.se_thresholds.power_onset`); α_c within 2% of ``alpha_pr``
   (the closed form) and above ``alpha_bo``;
1. the simulation's recovery point: the α where the factorised test error falls through ``level`` (per
   seed, by :func:`attnlab.highdim.crossings.level_crossing`), taken to d → ∞ by
   :func:`attnlab.highdim.crossings.threshold_limit` (1/d extrapolation only of a trend resolved beyond the
   seeds' noise, else the mean over d), within 5% of ``alpha_cross_se``, the α where the state evolution's
   test error at the simulation's own λ̃ falls through the same level. At a finite λ̃ the fall is a
   crossover, not a threshold: at λ̃ = 1e-4 the state evolution crosses 1e-3 at α ≈ 0.229, 8% above α_PR,
   so a fixed level read against α_PR itself measures the λ̃ rounding, not the threshold (the reading 0
   takes λ̃ → 0);
2. the side by side: at an α between the factorised and unfactorised thresholds (0.23 at κ0 = 0.5, T = 2)
   the factorised student's error is at least 10 times below the unfactorised one's;
3. no recovery below the Bayes-optimal threshold: every factorised run at α < ``alpha_bo`` (a prediction)
   stays above ``level``.

Verdict rule: "holds" when all four hold, "fails" when one fails; "inconclusive" when a crossing is off the
α grid, with fewer than two d, without the side-by-side points or the theory point, or when fewer than three
state-evolution points are in the limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.highdim._common import PAPER, SETTING_DOMAINS, device_name, groups, ok_rows, train_config
from attnlab.claims.highdim._common import se_threshold as _se_threshold
from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]

TOL = 0.05  # relative distance of the simulation's recovery point to the state evolution's at its λ̃
SE_TOL = 0.02  # relative distance of the state evolution's threshold (λ̃ → 0) to the closed form
SIDE_RATIO = 10.0  # unfactorised / factorised error required between the two thresholds


@dataclass(frozen=True)
class Params:
    side: Literal["simulation", "theory"] = "simulation"  # ERM at one (α, d), or the state evolution
    alpha: float = 0.21  # sample ratio n/d²
    d: int = 30  # token dimension
    kappa0: float = 0.5  # target rank ratio p0/d
    lam: float = 1e-4  # λ̃ (small: the thresholds are λ̃ → 0+ limits); the Frobenius coefficient unfactorised
    noise: float = 0.0  # label-noise variance Δ (perfect recovery is a noiseless statement)
    tokens: int = 2  # sequence length T
    factorised: bool = True  # the factorised student (False: a symmetric S with a Frobenius penalty)
    level: float = 1e-3  # noiseless test error at or below which a run counts as recovered
    max_steps: int = 3000  # optimiser step cap
    optimizer: Literal["lbfgs", "adam"] = "lbfgs"  # ERM optimiser ("adam": the published protocol)
    dtype: Literal["float32", "float64"] = "float32"  # precision of data and logits (sums in float64)
    rtol: float | None = None  # stopping tolerance (None: the optimiser's default, TrainConfig.rtol)
    # the theory side: α grid straddling α_PR at two small λ̃ (the smallest is read, the other checks)
    se_alphas: tuple[float, ...] = (0.15, 0.16, 0.17, 0.18, 0.19, 0.22)
    se_lams: tuple[float, ...] = (1e-6, 1e-7)  # λ̃ of the scan
    se_rtol: float = 0.05  # the test error is in its λ̃ → 0 limit where the two λ̃ agree to this
    se_sim_alphas: tuple[float, ...] = (0.2, 0.21, 0.22, 0.23, 0.24, 0.25)  # the curve at the sims' λ̃
    se_nodes: int = 512  # quasi-random nodes of the output expectation (threshold moves ~1% from 512 to 1024)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        **SETTING_DOMAINS,
        "lam": In("[0, inf)"),
        "level": In("(0, inf)"),
        "se_alphas": In("(0, inf)"),
        "se_lams": In("(0, inf)"),
        "se_rtol": In("(0, 1)"),
        "se_sim_alphas": In("(0, inf)"),
        "se_nodes": In("[2, inf)", cap=1_000_000),
    }


def _theory(p: Params, metrics: dict) -> Result:
    from dataclasses import replace

    from attnlab.claims.highdim._common import setting
    from attnlab.highdim import sweep
    from attnlab.highdim.se_thresholds import lam_scan

    s = setting(p)
    scan = lam_scan(s, p.se_alphas, p.se_lams, nodes=p.se_nodes)
    at_lam = sweep(replace(s, lam=p.lam), list(p.se_sim_alphas), nodes=p.se_nodes)
    conv = all(fp.converged for row in scan for fp in row) and all(fp.converged for fp in at_lam)
    metrics |= {
        "se_test_error": [[fp.test_error for fp in row] for row in scan],  # [λ̃][α]
        "se_error_at_lam": [fp.test_error for fp in at_lam],
        "se_converged": conv,
        "device": "cpu",
    }
    return Result(metrics=metrics)


def run(point: Point) -> Result:
    from attnlab.highdim import (
        alpha_bar,
        perfect_recovery_bayes,
        perfect_recovery_threshold,
        perfect_recovery_unfactorised,
        simulate,
    )

    p: Params = point.p
    per_alpha = alpha_bar(1.0, p.tokens)  # ᾱ per unit α
    th = {
        "alpha_pr": perfect_recovery_threshold(p.kappa0) / per_alpha,
        "alpha_bo": perfect_recovery_bayes(p.kappa0) / per_alpha,
        "alpha_pr_unfactorised": perfect_recovery_unfactorised() / per_alpha,
    }
    if p.side == "theory":
        return _theory(p, th)
    r = simulate(
        p.d,
        p.alpha,
        kappa0=p.kappa0,
        noise=p.noise,
        tokens=p.tokens,
        lam=p.lam,
        factorised=p.factorised,
        seed=point.seed,
        config=train_config(p),
        device=point.device,
    )
    return Result(
        metrics={
            **th,
            "test_error": r.test_error_clean,
            "steps": r.steps,
            "device": device_name(point.device),
        }
    )


TOLERANCE = (
    f"state evolution's threshold (λ̃ → 0) within {SE_TOL:.0%} of α_PR and above α_BO; d → ∞ limit of the "
    f"simulation's fall through the level within {TOL:.0%} of the state evolution's at the same λ̃; between "
    f"the thresholds unfactorised/factorised error >= {SIDE_RATIO:g}; no recovery below α_BO"
)


def se_threshold(row: Row) -> tuple[float, dict]:
    """The state evolution's threshold from the theory row: (α_c, numbers)."""
    return _se_threshold(row, "se_test_error", "below")


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    from attnlab.highdim.crossings import level_crossing, threshold_limit

    good, note = ok_rows(rows)
    theory = [r for r in good if r.params.get("side") == "theory"]
    good = [r for r in good if r.params.get("side", "simulation") == "simulation"]
    fac = [r for r in good if r.params.get("factorised", True)]
    unf = [r for r in good if not r.params.get("factorised", True)]
    if not fac or not theory:
        return Verdict("inconclusive", {}, "-", note + "needs the factorised rows and the theory row")
    m0, th = fac[0].metrics, theory[0]
    apr, abo = pred("alpha_pr", m0["alpha_pr"]), pred("alpha_bo", m0["alpha_bo"])
    level = fac[0].params.get("level", 1e-3)
    nums: dict = {"alpha_pr": apr, "alpha_bo": abo, "alpha_pr_unfactorised": m0["alpha_pr_unfactorised"]}
    # 0. the state evolution's threshold, λ̃ → 0
    a_se, se_nums = se_threshold(th)
    nums.update(alpha_se=a_se, **se_nums)
    # the state evolution's fall through the level at the simulations' λ̃
    sim_lam = fac[0].params["lam"]
    if th.params["lam"] != sim_lam:
        return Verdict.outside("the theory row's λ̃ is not the simulations'", nums, TOLERANCE)
    c_se = level_crossing(th.params["se_sim_alphas"], th.metrics["se_error_at_lam"], level, "down")
    if not np.isfinite(a_se) or c_se is None:
        return Verdict.outside(
            "the state evolution's threshold or crossing is off its α grid", nums, TOLERANCE
        )
    c_se = pred("alpha_cross_se", c_se)
    nums.update(alpha_cross_se=c_se, se_rel_gap=abs(a_se / apr - 1))
    # 3. no recovery below the Bayes-optimal threshold
    below_bo = [r.metrics["test_error"] for r in fac if r.params["alpha"] < abo]
    nums["min_error_below_bo"] = min(below_bo) if below_bo else None
    recovered_below_bo = any(e <= level for e in below_bo)
    # 2. the side by side at the α where both students ran
    side = {}
    for (a, d), rs in groups(unf, ("alpha", "d")).items():
        f = [r.metrics["test_error"] for r in fac if r.params["alpha"] == a and r.params["d"] == d]
        if f:
            side[(a, d)] = float(np.mean([r.metrics["test_error"] for r in rs]) / max(np.mean(f), 1e-300))
    nums["side_by_side_ratio_min"] = min(side.values()) if side else None
    nums["side_by_side_alphas"] = sorted({a for a, _ in side})
    # 1. the simulation's recovery point
    cross: dict[int, list] = {}
    for (d, _rep), rs in sorted(groups(fac, ("d", "rep")).items()):
        rs = sorted(rs, key=lambda r: r.params["alpha"])
        c = level_crossing(
            [r.params["alpha"] for r in rs], [r.metrics["test_error"] for r in rs], level, "down"
        )
        cross.setdefault(d, []).append(c)
    for d, cs in cross.items():
        nums[f"crossings_d{d}"] = cs
    if any(c is None for cs in cross.values() for c in cs):
        return Verdict.outside(
            "a seed's error does not fall through the level on the α grid", nums, TOLERANCE
        )
    ds = sorted(cross)
    if len(ds) < 2 or not side:
        return Verdict.outside("needs two d and the unfactorised side-by-side points", nums, TOLERANCE)
    limit, how = threshold_limit(cross)
    nums.update(alpha_measured=limit, limit_from=how, rel_gap=abs(limit / c_se - 1))
    nums["se_threshold_agrees"] = nums["se_rel_gap"] <= SE_TOL and a_se > abo
    nums["threshold_agrees"] = nums["rel_gap"] <= TOL
    nums["factorised_wins_between"] = nums["side_by_side_ratio_min"] >= SIDE_RATIO
    nums["no_recovery_below_bo"] = not recovered_below_bo
    ok = (
        nums["se_threshold_agrees"]
        and nums["threshold_agrees"]
        and nums["factorised_wins_between"]
        and nums["no_recovery_below_bo"]
    )
    return Verdict("holds" if ok else "fails", nums, TOLERANCE, note)


_ALPHAS = [0.17, 0.19, 0.21, 0.23, 0.25]  # ᾱ = 0.34 … 0.50 at T = 2: below BO (0.375) to unfactorised (0.5)
_THEORY = Grid({}, {"side": "theory", "kappa0": 0.5, "lam": 1e-4, "rep": 0})
_THEORY_FULL = Grid({}, {"side": "theory", "kappa0": 0.5, "lam": 1e-4, "rep": 0, "se_nodes": 2048})

CLAIM = Claim(
    id="highdim.perfect-recovery",
    kind="theorem",
    grade="numerics",
    paper=PAPER,
    statement="Without label noise the factorised student's test error vanishes above ᾱ_PR (between the "
    "Bayes-optimal and the unfactorised thresholds): the state evolution's error vanishes at ᾱ_PR as λ̃ → 0, "
    "the simulated ERM's falls through a level where the state evolution's does at the same λ̃, the "
    "factorised student recovers where the unfactorised one does not, and no ERM recovers below ᾱ_BO.",
    version=5,
    params=Params,
    grids={
        "quick": Grid(
            {"alpha": _ALPHAS, "d": [30, 40]},
            {"kappa0": 0.5, "lam": 1e-4, "max_steps": 3000},
            extra=[
                Grid({"d": [30, 40]}, {"alpha": 0.23, "factorised": False, "kappa0": 0.5, "lam": 1e-4}),
                _THEORY,
            ],
        ),
        "full": Grid(
            {"alpha": [0.17, 0.18, 0.19, 0.2, 0.21, 0.22, 0.23, 0.24, 0.25, 0.26], "d": [30, 60, 100]},
            {"kappa0": 0.5, "lam": 1e-4, "max_steps": 8000},
            seeds=2,
            extra=[
                Grid(
                    {"d": [30, 60, 100]},
                    {"alpha": 0.23, "factorised": False, "kappa0": 0.5, "lam": 1e-4, "max_steps": 8000},
                ),
                _THEORY_FULL,
            ],
        ),
    },
    run=run,
    verdict=verdict,
    predictions={
        "alpha_pr": "the factorised perfect-recovery threshold ᾱ_PR(κ0) of docs/highdim.md C5, in α",
        "alpha_bo": "the Bayes-optimal threshold κ0 − κ0²/2, in α",
        "alpha_cross_se": "the α where the state evolution's test error at the simulations' λ̃ falls through "
        "the level",
    },
    regime="Δ = 0, small λ̃; the recovery point on the α grid at two or more d",
    explain={
        "holds": "The state evolution's test error (λ̃ → 0) vanishes at α = {alpha_se:.4f} ({se_rel_gap:.1%} "
        "from α_PR = {alpha_pr:.4f}, power {se_exponent:.2f}, above α_BO = {alpha_bo:.4f}); the simulations' "
        "error falls through the level at α = {alpha_measured:.4f} at large d ({limit_from}; {rel_gap:.1%} "
        "from the state evolution's {alpha_cross_se:.4f} at the same λ̃); between the thresholds the "
        "unfactorised error is {side_by_side_ratio_min:.0f}× the factorised one; no run recovers below α_BO.",
        "fails": "State evolution's threshold {alpha_se:.4f} vs α_PR = {alpha_pr:.4f} ({se_rel_gap:.1%}; "
        "agrees: {se_threshold_agrees}); the simulations' recovery point {alpha_measured:.4f} vs the state "
        "evolution's {alpha_cross_se:.4f} at the same λ̃ ({rel_gap:.1%}; agrees: {threshold_agrees}); "
        "unfactorised/factorised error between the thresholds {side_by_side_ratio_min:.1f}; no recovery "
        "below α_BO: {no_recovery_below_bo}.",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
