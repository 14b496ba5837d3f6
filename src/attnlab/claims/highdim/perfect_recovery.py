"""``highdim.perfect-recovery``: without label noise the test error vanishes above ᾱ_PR (docs/highdim.md C5).

Per point: Adam at dimension d, Δ = 0, small λ̃, sample ratio α; the noiseless test error and the
threshold ``α_PR = ᾱ_PR(κ0) / ((T² + T − 2)/2)`` of the theory.

Verdict rule: the largest test error at α ≥ 1.4 α_PR is at most 10% of the smallest at α ≤ 0.7 α_PR;
"inconclusive" without α on both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnlab.claims.highdim._common import PAPER, device_name, ok_rows, train_config
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    alpha: float = 0.32  # sample ratio n/d²
    d: int = 30  # token dimension
    kappa0: float = 0.5  # target rank ratio p0/d
    lam: float = 1e-3  # λ̃ (small: the threshold is the λ̃ → 0+ limit)
    noise: float = 0.0  # label-noise variance Δ (perfect recovery is a noiseless statement)
    tokens: int = 2  # sequence length T
    max_steps: int = 2000  # Adam step cap
    rtol: float = 1e-7  # Adam stops when the relative loss change stays below this


def run(point: Point) -> Result:
    from attnlab.highdim import perfect_recovery_threshold, simulate

    p: Params = point.p
    abar = perfect_recovery_threshold(p.kappa0)
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
            "alpha_pr": abar / ((p.tokens**2 + p.tokens - 2) / 2),
            "test_error": r.test_error_clean,
            "steps": r.steps,
            "device": device_name(point.device),
        }
    )


def verdict(rows: Sequence[Row]) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    apr = good[0].metrics["alpha_pr"]
    below = [r.metrics["test_error"] for r in good if r.params["alpha"] <= 0.7 * apr]
    above = [r.metrics["test_error"] for r in good if r.params["alpha"] >= 1.4 * apr]
    if not below or not above:
        return Verdict("inconclusive", {"alpha_pr": apr}, "-", note + "needs α on both sides")
    nums = {"alpha_pr": apr, "min_error_below": min(below), "max_error_above": max(above)}
    nums["ratio"] = max(above) / min(below)
    tol = "noiseless test error above 1.4 α_PR at most 10% of that below 0.7 α_PR"
    return Verdict("holds" if nums["ratio"] <= 0.1 else "fails", nums, tol, note + "Δ = 0, small λ̃")


CLAIM = Claim(
    id="highdim.perfect-recovery",
    kind="theorem",
    paper=PAPER,
    statement="Without label noise the test error vanishes above the perfect-recovery threshold ᾱ_PR.",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"alpha": [0.12, 0.32, 0.4]}, {"d": 30, "kappa0": 0.5, "lam": 1e-3, "max_steps": 2000}),
        "full": Grid(
            {"alpha": [0.08, 0.12, 0.16, 0.2, 0.24, 0.3, 0.4]},
            {"d": 80, "kappa0": 0.5, "lam": 1e-4, "max_steps": 6000},
            seeds=2,
        ),
    },
    run=run,
    verdict=verdict,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
