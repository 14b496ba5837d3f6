"""``highdim.interpolation-threshold``: at small λ̃ the training loss vanishes below α_interp
(docs/highdim.md C5).

Per point: Adam at dimension d, small λ̃, sample ratio α; the training data loss (penalty excluded) and
the threshold ``α_interp(κ0, Δ, T)`` of the theory.

Verdict rule: the largest data loss at α ≤ 0.8 α_interp is at most 10% of the smallest one at
α ≥ 1.3 α_interp; "inconclusive" without α on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnlab.claims.highdim._common import PAPER, device_name, ok_rows, train_config
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    alpha: float = 0.1  # sample ratio n/d²
    d: int = 30  # token dimension
    noise: float = 0.5  # label-noise variance Δ
    lam: float = 1e-5  # λ̃ (small: the threshold is the λ̃ → 0+ limit)
    kappa0: float = 0.5  # target rank ratio p0/d
    tokens: int = 2  # sequence length T
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


def verdict(rows: Sequence[Row]) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    ai = good[0].metrics["alpha_interp"]
    below = [r.metrics["data_loss"] for r in good if r.params["alpha"] <= 0.8 * ai]
    above = [r.metrics["data_loss"] for r in good if r.params["alpha"] >= 1.3 * ai]
    if not below or not above:
        return Verdict("inconclusive", {"alpha_interp": ai}, "-", note + "needs α on both sides")
    nums = {"alpha_interp": ai, "max_loss_below": max(below), "min_loss_above": min(above)}
    nums["ratio"] = max(below) / min(above)
    tol = "training data loss below 0.8 α_interp at most 10% of that above 1.3 α_interp"
    return Verdict("holds" if nums["ratio"] <= 0.1 else "fails", nums, tol, note + "λ̃ small, finite d")


CLAIM = Claim(
    id="highdim.interpolation-threshold",
    kind="theorem",
    paper=PAPER,
    statement="At small λ̃ the training loss vanishes below α_interp and is positive above it.",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"alpha": [0.06, 0.1, 0.25, 0.35]}, {"d": 30, "noise": 0.5, "lam": 1e-5, "max_steps": 4000}
        ),
        "full": Grid(
            {"alpha": [0.05, 0.08, 0.11, 0.13, 0.15, 0.17, 0.2, 0.25, 0.3]},
            {"d": 80, "noise": 0.5, "lam": 1e-4, "max_steps": 6000},
            seeds=2,
        ),
    },
    run=run,
    verdict=verdict,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
