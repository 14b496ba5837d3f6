"""``highdim.error-decomposition``: the error of the learned ``S`` splits into over-fitting, under-fitting,
approximation and mismatch parts (docs/highdim.md C6; the split is :func:`attnlab.highdim.decompose_error`).

Per point: one Adam run on an MP(κ0) target; the parts of ``‖Ŝ − S0‖²/d`` in the target eigenbasis and the
state evolution's ``Q0 + q − 2m`` at the same (α, λ̃).

Verdict rule: the parts sum to the directly computed total within 1e-10 (relative) and the total is within
15% of the theory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnlab.claims.highdim._common import PAPER, device_name, ok_rows, setting, train_config
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict

__all__ = ["CLAIM", "CLAIMS", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    alpha: float = 0.3  # sample ratio n/d²
    d: int = 40  # token dimension
    lam: float = 0.01  # λ̃
    kappa0: float = 0.5  # target rank ratio p0/d
    noise: float = 0.5  # label-noise variance Δ
    tokens: int = 2  # sequence length T
    nodes: int = 2048  # quadrature nodes of the state evolution
    max_steps: int = 2000  # Adam step cap
    rtol: float = 1e-7  # Adam stops when the relative loss change stays below this


def run(point: Point) -> Result:
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import decompose_error, mp_target, sample, state_evolution, train_erm

    p: Params = point.p
    g = generator(derive_seed(point.seed, "data"))
    S0 = mp_target(p.d, p.kappa0, g, device=point.device)  # drawn on CPU; samples, training, eigh follow S0
    tr = sample(S0, round(p.alpha * p.d * p.d), p.tokens, p.noise, 1.0, "seq2lab", g)
    r = train_erm(tr, None, lam=p.lam, config=train_config(p), generator=point.generator())
    dec = decompose_error(r.S, S0)
    fp = state_evolution(setting(p), p.alpha, nodes=p.nodes)
    return Result(metrics=dec.to_dict() | {"se_s_error": fp.s_error, "device": device_name(point.device)})


def verdict(rows: Sequence[Row]) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, "-", note + "no rows")
    worst = max(abs(r.metrics["parts_sum"] - r.metrics["total"]) / r.metrics["total"] for r in good)
    gap = max(abs(r.metrics["total"] - r.metrics["se_s_error"]) / r.metrics["se_s_error"] for r in good)
    nums = {"max_rel_sum_residual": worst, "max_rel_gap_total_vs_theory": gap}
    for r in good:
        a = r.params["alpha"]
        for k in ("over", "under", "approx", "mismatch"):
            nums[f"{k}_a{a}"] = r.metrics[k]
    tol = "parts sum to the total within 1e-10 (relative); total within 15% of the theory's Q0 + q − 2m"
    ok = worst < 1e-10 and gap < 0.15
    return Verdict(
        "holds" if ok else "fails", nums, tol, note + "the split is defined in highdim.decomposition"
    )


CLAIM = Claim(
    id="highdim.error-decomposition",
    kind="theorem",
    paper=PAPER,
    statement="The error of the learned S splits into over-fitting (noise bulk), under-fitting (hidden "
    "target "
    "directions), approximation (recovered outliers) and mismatch (rotation) parts that sum to the total.",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"alpha": [0.3, 0.8]}, {"d": 40, "lam": 0.01, "max_steps": 1500}),
        "full": Grid({"alpha": [0.2, 0.3, 0.5, 0.8, 1.2]}, {"d": 100, "lam": 0.01}, seeds=2),
    },
    run=run,
    verdict=verdict,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
