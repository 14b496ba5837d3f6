"""``flow.relu-late`` (finding, Thm 25's remark): may ReLU heads dominate softmax heads at late times?

Reading: "dominates" = the larger late decay rate of ``ε = 1 − γ`` at matched γ. For one scalar head of
strength λ started equiangular, near γ = 1 the softmax ODE gives ``ε' ≈ −2λ ε`` and the ReLU one
(``γ' = (2βλ²/n) γ(1−γ)(1+(n−1)γ)``) gives ``ε' ≈ −2βλ² ε``: ReLU's late rate is larger exactly when
βλ > 1. Measured on particle simulations (RK4, tokens in R^n from γ0): the local rate
``−d ln ε/dt`` fitted on the same ε window for both kinds (:func:`attnlab.dynamics.late_rate_fit`).

Verdict rule (stated before the numbers): holds when, in every setting, ReLU's measured late rate is
the larger one exactly when βλ > 1 (ReLU may dominate, and when); fails otherwise; inconclusive when
a run does not reach the ε window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, Record, init, late_rate_fit, simulate
from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    kind: Literal["softmax", "relu"] = "softmax"  # head kind
    beta: float = 2.0  # inverse temperature
    strength: float = 1.0  # scalar head strength λ
    n: int = 8  # tokens (in R^n, started equiangular)
    gamma0: float = 0.2  # initial inner product (> 0: ReLU has no force at γ = 0)
    t1: float = 40.0  # simulated time
    dt: float = 0.05  # RK4 step
    records: int = 400  # recorded intervals
    eps_lo: float = 1e-8  # the ε window of the late-rate fit
    eps_hi: float = 1e-4

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "beta": In("(0, inf)"),
        "strength": In("(0, inf)"),
        "n": In("[2, inf)", cap=100_000),
        "gamma0": In("(-1, 1)"),
        "t1": In("(0, inf)", cap=1_000),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
        "records": In("[1, inf)", cap=100_000),
        "eps_lo": In("(0, 1)"),
        "eps_hi": In("(0, 1)"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    spec = Heads.scalar([p.strength], d=p.n, kind=p.kind, device=point.device)
    x0 = init.equiangular(
        batch=1, n=p.n, d=p.n, gamma=p.gamma0, generator=point.generator(), device=point.device
    )
    sol = simulate(
        spec, x0, beta=p.beta, t1=p.t1, dt=p.dt, record=Record(every=p.t1 / p.records, observables=("gamma",))
    )
    t, eps = sol.t.numpy(), 1.0 - sol.observables["gamma"].cpu().numpy()[:, 0]
    return Result(
        metrics={
            "late_rate": late_rate_fit(t, eps, p.eps_lo, p.eps_hi),
            "late_rate_linearised": 2 * p.strength if p.kind == "softmax" else 2 * p.beta * p.strength**2,
            "final_eps": float(eps[-1]),
            "device": device_name(point.device),
        },
        arrays={"t": t, "eps": eps},
    )


TOLERANCE = "ReLU's late rate larger exactly when βλ > 1, in every setting"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    by: dict[tuple, dict[str, Row]] = {}
    for r in good:
        by.setdefault((r.params["beta"], r.params["strength"], r.params["n"]), {})[r.params["kind"]] = r
    pairs = {k: v for k, v in by.items() if len(v) == 2}
    rates = {
        f"beta={b:g},lambda={lam:g},n={n}": {k: v[k].metrics["late_rate"] for k in ("softmax", "relu")}
        for (b, lam, n), v in pairs.items()
    }
    lin = {
        f"beta={b:g},lambda={lam:g},n={n}": {
            k: v[k].metrics["late_rate_linearised"] for k in ("softmax", "relu")
        }
        for (b, lam, n), v in pairs.items()
    }
    nums = {"late_rates": rates, "linearised": lin}
    if not pairs or any(r is None for v in rates.values() for r in v.values()):
        return Verdict.outside("a run did not reach the ε window (or no pair of kinds)", nums, TOLERANCE)
    wrong = [
        k
        for k, (b, lam, _) in zip(rates, pairs, strict=True)
        if (rates[k]["relu"] > rates[k]["softmax"]) != (b * lam > 1)
    ]
    nums["relu_dominates"] = [k for k in rates if rates[k]["relu"] > rates[k]["softmax"]]
    nums["settings_against_beta_lambda_rule"] = wrong
    return Verdict("fails" if wrong else "holds", nums, TOLERANCE, note.strip())


_EXPLAIN = (
    "late decay rates of 1 − γ (softmax vs ReLU, fitted on ε in (1e-8, 1e-4)): {late_rates}; ReLU's is "
    "larger in {relu_dominates}, i.e. ReLU dominates at late times exactly when βλ > 1 (linearised rates "
    "2λ and 2βλ²). Settings against that rule: {settings_against_beta_lambda_rule}."
)
CLAIM = Claim(
    id="flow.relu-late",
    kind="finding",
    grade="evidence",
    paper="B",
    statement="Thm 25's remark: ReLU heads may dominate softmax heads at late times (larger late decay "
    "rate of 1 − γ at matched γ).",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"kind": ["softmax", "relu"], "beta": [0.5, 2.0]}, fixed={"n": 8}),
        "full": Grid({"kind": ["softmax", "relu"], "beta": [0.25, 0.5, 0.8, 1.25, 2.0, 4.0], "n": [8, 32]}),
    },
    run=run,
    verdict=verdict,
    regime="one scalar head, equiangular start, ε window reached within t1",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
