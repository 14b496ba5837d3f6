"""``flow.beta-star`` (Thm 19): the critical inverse temperature of radial dominance (Condition 8).

Statement: for scalar heads at pairwise orthogonal tokens, form 3 of radial dominance holds exactly
for β ≤ β* = (1/(2λ)) ln(c*² (n−1)/(1 − c*²)); below it per-head energy is monotone.

Verdict rule: holds when the closed form matches direct bisection of form 3 (and of form 2) to 1e-9
and the fraction of draws with some falling per-head energy stays ≤ 1% below β*; fails otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, energy_rates, init, velocity
from attnlab.dynamics import theory as T
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]

BETAS_Q = [0.1, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0]
BETAS_F = [round(0.25 * k, 2) for k in range(1, 65)]


@dataclass(frozen=True)
class Params:
    part: Literal["closed-form", "onset"] = "closed-form"  # derivation check, or the onset protocol
    heads: int = 2  # number of heads H
    n: int = 32  # tokens
    d: int = 64  # token dimension (onset part)
    law: Literal["orthogonal", "uniform"] = "orthogonal"  # token law (onset part)
    draws: int = 256  # token configurations (onset part)
    betas: list[float] = field(default_factory=lambda: list(BETAS_Q))  # β grid (onset part)


def run(point: Point) -> Result:
    p: Params = point.p
    if p.part == "closed-form":
        bs = T.beta_star(p.heads, p.n)
        direct3 = T.radial_threshold_direct(p.heads, p.n, form=3)
        direct2 = T.radial_threshold_direct(p.heads, p.n, form=2)
        rel = (
            abs(direct3 - bs.beta_star) / abs(bs.beta_star) if bs.valid else (0.0 if direct3 == 0.0 else 1.0)
        )
        return Result(
            metrics={
                "beta_star": bs.beta_star,
                "valid": bs.valid,
                "direct_form3": direct3,
                "beta_form2": bs.beta_form2,
                "direct_form2": direct2,
                "rel_err": rel,
                "rel_err_form2": abs(direct2 - bs.beta_form2) / abs(bs.beta_form2),
                "device": "cpu",  # closed forms and scalar root finding (numpy/scipy)
            }
        )
    spec = Heads.orthogonal_subspaces(p.heads, p.d, strength=1.0, kind="usa", device=point.device)
    make = init.orthogonal if p.law == "orthogonal" else init.uniform
    x = make(batch=p.draws, n=p.n, d=p.d, generator=point.generator(), device=point.device)
    betas = np.array(p.betas, dtype=float)
    frac = []
    for b in betas:
        er = energy_rates(spec, x, float(b), velocity(spec, x, float(b), "sphere"))
        frac.append(float((er.rel < -1e-12).any(-1).double().mean()))
    frac = np.array(frac)
    over = np.nonzero(frac > 0.01)[0]
    bs = T.beta_star(p.heads, p.n)
    below = frac[betas < bs.beta_star] if bs.valid else np.array([])
    return Result(
        metrics={
            "onset": float(betas[over[0]]) if over.size else None,
            "beta_star": bs.beta_star,
            "max_frac_below_beta_star": float(below.max()) if below.size else 0.0,
            "max_frac": float(frac.max()),
            "draws": p.draws,
            "device": device_name(point.device),
        },
        arrays={"beta": betas, "fraction": frac},
    )


TOLERANCE = "derivation 1e-9 relative; onset statistic 1%"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    cf = [r for r in good if r.params.get("part") == "closed-form"]
    on = [r for r in good if r.params.get("part") == "onset"]
    if not cf or not on:
        return Verdict("inconclusive", {}, TOLERANCE, "need both parts." + note)
    err = max(r.metrics["rel_err"] for r in cf)
    err2 = max(r.metrics["rel_err_form2"] for r in cf)
    below = max(r.metrics["max_frac_below_beta_star"] for r in on)
    nums = {
        "derivation_check_max_rel_err": err,
        "form2_check_max_rel_err": err2,
        "beta_star": {f"H={r.params['heads']},n={r.params['n']}": r.metrics["beta_star"] for r in cf},
        "onset": {f"H={r.params['heads']},{r.params['law']}": r.metrics["onset"] for r in on},
        "max_violation_fraction_below_beta_star": below,
    }
    ok = err < 1e-9 and err2 < 1e-9 and below <= 0.01
    return Verdict("holds" if ok else "fails", nums, TOLERANCE, note.strip())


CLAIM = Claim(
    id="flow.beta-star",
    kind="theorem",
    paper="B",
    statement="beta* = (1/(2λ)) ln(c*^2 (n-1)/(1-c*^2)) is the critical inverse temperature of radial "
    "dominance (Condition 8) for scalar heads at orthogonal tokens; below it per-head energy is monotone "
    "(Thm 19).",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"heads": [2, 3, 4], "n": [8, 32, 128]},
            fixed={"part": "closed-form"},
            extra=[
                Grid(
                    {"heads": [2, 4], "law": ["orthogonal", "uniform"]},
                    fixed={"part": "onset", "n": 32, "d": 64, "draws": 256, "betas": BETAS_Q},
                )
            ],
        ),
        "full": Grid(
            {"heads": [2, 3, 4, 8], "n": [8, 16, 32, 64, 128, 1024]},
            fixed={"part": "closed-form"},
            extra=[
                Grid(
                    {"heads": [2, 3, 4], "law": ["orthogonal", "uniform"], "n": [16, 32]},
                    fixed={"part": "onset", "d": 64, "draws": 2048, "betas": BETAS_F},
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": "closed form vs bisection of form 3: {derivation_check_max_rel_err:.1e}; largest "
        "fraction of draws with a falling per-head energy below β*: "
        "{max_violation_fraction_below_beta_star:.3f}.",
        "fails": "derivation error {derivation_check_max_rel_err:.1e}, fraction below β* "
        "{max_violation_fraction_below_beta_star:.3f}.",
    },
)
