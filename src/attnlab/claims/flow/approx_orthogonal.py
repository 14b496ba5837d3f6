"""``flow.approx-orthogonal`` (Thm 39): per-head monotonicity under approximate orthogonality.

Statement: per-head energy monotonicity survives ``‖M_h' M_h‖_op ≤ δ`` for δ small relative to the
self-energy. The per-head violation rate is swept over δ in flat space and on the sphere (states
where form 1 holds at δ = 0).

Verdict rule: holds when the rate is zero at δ = 0 and up to some δ0 > 0 in both spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, energy_rates, head_outputs, init, radial_dominance, velocity
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]

DELTAS = [0.0, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3]


@dataclass(frozen=True)
class Params:
    space: Literal["sphere", "flat"] = "sphere"  # tokens on the sphere or in R^d
    heads: int = 2  # number of heads H
    d: int = 8  # dimension
    n: int = 16  # tokens
    beta: float = 1.0  # inverse temperature
    batch: int = 1024  # uniform configurations
    deltas: list[float] = field(default_factory=lambda: list(DELTAS))  # cross-norms ‖M_h' M_h‖_op swept


def run(point: Point) -> Result:
    p: Params = point.p
    deltas = np.array(p.deltas, dtype=float)
    seed = point.seed % 2**62
    x = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(1), device=point.device)
    base = Heads.approx_orthogonal(
        p.heads, p.d, 0.0, generator=torch.Generator().manual_seed(seed), kind="usa"
    )
    base = base.to(point.device)
    if p.space == "sphere":
        keep = radial_dominance(head_outputs(base, x, p.beta), x).form1.all(-1)
    else:
        keep = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    xs = x[keep]
    rates, margins = [], []
    for delta in deltas:
        g = torch.Generator().manual_seed(seed)
        spec = Heads.approx_orthogonal(p.heads, p.d, float(delta), generator=g, kind="usa").to(point.device)
        er = energy_rates(spec, xs, p.beta, velocity(spec, xs, p.beta, p.space))
        rates.append(float((er.rel < -1e-12).any(-1).double().mean()))
        margins.append(float(er.rel.min()))
    rates = np.array(rates)
    zero = np.nonzero(rates > 0)[0]
    delta0 = (
        float(deltas[zero[0] - 1])
        if zero.size and zero[0] > 0
        else (float(deltas[-1]) if not zero.size else 0.0)
    )
    return Result(
        metrics={
            "kept": int(keep.sum()),
            "delta0": delta0,
            "rate_at_smallest_positive": float(rates[deltas > 0][0]),
            "rate_at_zero": float(rates[deltas == 0][0]) if (deltas == 0).any() else None,
            "device": device_name(point.device),
        },
        arrays={"delta": deltas, "rate": rates, "min_rel_rate": np.array(margins)},
    )


TOLERANCE = "zero violations below δ0 > 0"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    if {r.params["space"] for r in good} != {"sphere", "flat"}:
        return Verdict("inconclusive", {}, TOLERANCE, "need both spaces." + note)
    kept = {r.params["space"]: r.metrics["kept"] for r in good}
    if min(kept.values()) < 50:
        return Verdict("inconclusive", {"kept": kept}, TOLERANCE, "too few states where form 1 holds." + note)
    d0 = {r.params["space"]: r.metrics["delta0"] for r in good}
    at0 = {r.params["space"]: r.metrics["rate_at_zero"] for r in good}
    nums = {"delta0": d0, "rate_at_delta_0": at0, "states": kept}
    ok = all(v > 0 for v in d0.values()) and all(v == 0 for v in at0.values())
    return Verdict("holds" if ok else "fails", nums, TOLERANCE, note.strip())


CLAIM = Claim(
    id="flow.approx-orthogonal",
    kind="theorem",
    paper="B",
    statement="Per-head energy monotonicity survives approximate orthogonality ||M_h' M_h||_op <= δ for δ "
    "small relative to the self-energy (Thm 39).",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"space": ["flat", "sphere"]},
            fixed={"heads": 2, "d": 8, "n": 16, "beta": 1.0, "batch": 1024, "deltas": DELTAS},
        ),
        "full": Grid(
            {"space": ["flat", "sphere"], "beta": [0.5, 1.0, 2.0]},
            fixed={
                "heads": 2,
                "d": 16,
                "n": 32,
                "batch": 8192,
                "deltas": [0.0, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3],
            },
            seeds=3,
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": "zero violations up to δ0 = {delta0}.",
        "fails": "violations at the smallest δ: δ0 = {delta0}.",
    },
)
