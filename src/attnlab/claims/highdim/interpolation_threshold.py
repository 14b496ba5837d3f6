"""``highdim.interpolation-threshold``: at small λ̃ the training loss vanishes below α_interp and is positive
above it (docs/highdim.md C5).

Per point: Adam at dimension d, small λ̃, sample ratio α on a dense grid around the threshold; the training
data loss (penalty excluded) and the theory's ``α_interp(κ0, Δ, T)`` (the C5 formula).

Reading the threshold at finite d: the data loss below the threshold is Adam's residual (a few λ̃), above it
grows from zero; the crossing of ``level`` (default 3λ̃, just above the residual) along α, per seed
(:func:`attnlab.highdim.crossings.level_crossing`), averaged over seeds per d, and taken to d → ∞ by
:func:`attnlab.highdim.crossings.threshold_limit` (extrapolated linearly in 1/d when the d-trend is resolved
beyond the seeds' noise, else the mean over d) is the measured threshold.

Verdict rule: "holds" when the measured threshold is within 5% of the prediction ``alpha_interp``, "fails"
otherwise; "inconclusive" with fewer than two d or when a crossing is off the α grid (the deciding quantity
on the grid's edge).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.claims.highdim._common import PAPER, device_name, groups, ok_rows, train_config
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]

TOL = 0.05  # relative distance of the extrapolated threshold to the prediction


@dataclass(frozen=True)
class Params:
    alpha: float = 0.16  # sample ratio n/d²
    d: int = 30  # token dimension
    noise: float = 0.5  # label-noise variance Δ
    lam: float = 1e-5  # λ̃ (small: the threshold is the λ̃ → 0+ limit)
    kappa0: float = 0.5  # target rank ratio p0/d
    tokens: int = 2  # sequence length T
    level: float = 3e-5  # data loss per d² above which a run no longer interpolates (3λ̃)
    max_steps: int = 2000  # Adam step cap
    rtol: float = 1e-7  # Adam stops when the relative loss change stays below this


def run(point: Point) -> Result:
    from attnlab.highdim import interpolation_threshold, simulate

    p: Params = point.p
    ai, _ = interpolation_threshold(p.kappa0, p.noise, p.tokens)
    r = simulate(
        p.d,
        p.alpha,
        kappa0=p.kappa0,
        noise=p.noise,
        tokens=p.tokens,
        lam=p.lam,
        seed=point.seed,
        config=train_config(p),
        device=point.device,
    )
    return Result(
        metrics={
            "alpha_interp": ai,
            "train_loss": r.train_loss,
            "data_loss": r.data_loss,
            "steps": r.steps,
            "device": device_name(point.device),
        }
    )


def crossings(rows: Sequence[Row]) -> dict[int, list[float | None]]:
    """Per d, the crossing α of each seed (None: off the grid)."""
    from attnlab.highdim.crossings import level_crossing

    out: dict[int, list] = {}
    for (d, _rep), rs in sorted(groups(rows, ("d", "rep")).items()):
        rs = sorted(rs, key=lambda r: r.params["alpha"])
        level = rs[0].params.get("level", 3 * rs[0].params["lam"])
        a = [r.params["alpha"] for r in rs]
        out.setdefault(d, []).append(level_crossing(a, [r.metrics["data_loss"] for r in rs], level, "up"))
    return out


TOLERANCE = f"d → ∞ limit of the level crossing within {TOL:.0%} of α_interp"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    from attnlab.highdim.crossings import threshold_limit

    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    ai = pred("alpha_interp", good[0].metrics["alpha_interp"])
    cross = crossings(good)
    nums: dict = {"alpha_interp": ai, "ds": sorted(cross)}
    for d, cs in cross.items():
        nums[f"crossings_d{d}"] = cs
    if any(c is None for cs in cross.values() for c in cs):
        return Verdict.outside("a seed's data loss does not cross the level on the α grid", nums, TOLERANCE)
    ds = sorted(cross)
    means = [float(np.mean(cross[d])) for d in ds]
    nums["mean_crossing_per_d"] = means
    if len(ds) < 2:
        return Verdict.outside("one d: no finite-size extrapolation", nums, TOLERANCE)
    limit, how = threshold_limit(cross)
    nums.update(alpha_measured=limit, limit_from=how, rel_gap=abs(limit / ai - 1))
    return Verdict("holds" if nums["rel_gap"] <= TOL else "fails", nums, TOLERANCE, note)


_GRID_ALPHAS = [0.13, 0.145, 0.16, 0.175, 0.19, 0.205]

CLAIM = Claim(
    id="highdim.interpolation-threshold",
    kind="theorem",
    paper=PAPER,
    statement="At small λ̃ the training loss vanishes below α_interp and is positive above it: the finite-d "
    "onset of the training loss, extrapolated to d → ∞, is α_interp.",
    version=2,
    params=Params,
    grids={
        # α every 0.015 (10% of α_interp = 0.1535 at κ0 = 0.5, Δ = 0.5, T = 2) from 0.85 α_interp to
        # 1.34 α_interp; two seeds at d = 30 and at d = 40
        "quick": Grid(
            {"alpha": _GRID_ALPHAS, "d": [30, 40]}, {"noise": 0.5, "lam": 1e-5, "max_steps": 4000}, seeds=2
        ),
        "full": Grid(
            {"alpha": [0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.2, 0.21], "d": [30, 60, 100]},
            {"noise": 0.5, "lam": 1e-5, "max_steps": 8000},
            seeds=3,
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"alpha_interp": "the interpolation threshold α_interp(κ0, Δ, T) of docs/highdim.md C5"},
    regime="small λ̃ (the λ̃ → 0+ limit), the level crossing on the α grid at two or more d",
    explain={
        "holds": "The training loss leaves zero at α = {alpha_measured:.4f} at large d ({limit_from}) "
        "({rel_gap:.1%} from α_interp = {alpha_interp:.4f}); per d: {mean_crossing_per_d}.",
        "fails": "The training loss leaves zero at α = {alpha_measured:.4f} at large d ({limit_from}), "
        "{rel_gap:.1%} from α_interp = {alpha_interp:.4f}; per d: {mean_crossing_per_d}.",
    },
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
