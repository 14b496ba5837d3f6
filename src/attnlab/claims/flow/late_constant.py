"""``flow.late-constant`` (Thm 22, late regime): the constant C in ``ε(t) = 1 − γ(t) ~ C e^{−2Λt}``.

Statement: for equiangular scalar softmax heads the late decay is ``ε(t) ~ C e^{−2Λt}`` (Λ = Σ_h λ_h).
The rate 2Λ is tested by ``flow.equiangular-rates``; here the prediction is the constant C itself,
from a quadrature of the equiangular ODE (:func:`attnlab.dynamics.theory.late_constant`:
``ln C = ln(1−γ0) + ∫_{γ0}^1 [2Λ/γ'(g) − 1/(1−g)] dg``), held against particle simulations (RK4, tokens
in R^n started equiangular at γ0): the measured C is the median of ``ε(t) e^{2Λt}`` over the records with
``eps_lo < ε < eps_hi`` (there the O(ε) correction to the asymptote is below ``eps_hi``).

Verdict rule: holds when every setting's measured C is within ``tol`` (0.5%) of the predicted C;
fails otherwise; inconclusive when a setting has fewer than 5 records in the ε window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, Record, init, simulate
from attnlab.dynamics import theory as T
from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    strengths: list[float] = field(default_factory=lambda: [1.0, 0.5])  # head strengths λ_h
    n: int = 8  # tokens (in R^n: an equiangular start needs d ≥ n)
    beta: float = 1.0  # inverse temperature
    gamma0: float = 0.0  # initial inner product
    t1: float = 8.0  # simulated time
    dt: float = 0.01  # RK4 step
    records: int = 400  # recorded intervals
    eps_lo: float = 1e-7  # the ε window where C is read off
    eps_hi: float = 1e-4
    tol: float = 0.005  # relative tolerance on C (O(ε_hi) bias and RK4 error are ~1e-4)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "strengths": In("(0, inf)", length="[1, 64]"),
        "n": In("[2, inf)", cap=100_000),
        "beta": In("(0, inf)"),
        "gamma0": In("(-1, 1)"),
        "t1": In("(0, inf)", cap=1_000),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
        "records": In("[1, inf)", cap=100_000),
        "eps_lo": In("(0, 1)"),
        "eps_hi": In("(0, 1)"),
        "tol": In("(0, 1)"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    spec = Heads.scalar(p.strengths, d=p.n, kind="softmax", device=point.device)
    x0 = init.equiangular(
        batch=1, n=p.n, d=p.n, gamma=p.gamma0, generator=point.generator(), device=point.device
    )
    sol = simulate(
        spec, x0, beta=p.beta, t1=p.t1, dt=p.dt, record=Record(every=p.t1 / p.records, observables=("gamma",))
    )
    t, eps = sol.t.numpy(), 1.0 - sol.observables["gamma"].cpu().numpy()[:, 0]  # (T,)
    L = float(sum(p.strengths))
    win = (eps > p.eps_lo) & (eps < p.eps_hi)
    c = eps[win] * np.exp(2 * L * t[win])  # ε e^{2Λt} over the window
    return Result(
        metrics={
            "C_measured": float(np.median(c)) if c.size else None,
            "C_spread": float((c.max() - c.min()) / np.median(c)) if c.size else None,
            "C_theory": T.late_constant(p.strengths, p.beta, p.n, p.gamma0),
            "window_records": int(win.sum()),
            "device": device_name(point.device),
        },
        arrays={"t": t, "eps": eps},
    )


TOLERANCE = "measured C within tol (0.5%) of the quadrature's C in every setting"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, TOLERANCE, "no rows." + note)
    ratio = {
        f"λ={r.params['strengths']},n={r.params['n']}": (
            r.metrics["C_measured"] / pred("C", r.metrics["C_theory"]) if r.metrics["C_measured"] else None
        )
        for r in good
    }
    nums = {
        "C_measured_over_predicted": ratio,
        "C_theory": {f"λ={r.params['strengths']},n={r.params['n']}": r.metrics["C_theory"] for r in good},
        "largest_rel_dev": max((abs(v - 1) for v in ratio.values() if v is not None), default=None),
        "fewest_window_records": min(r.metrics["window_records"] for r in good),
        "tol": good[0].params.get("tol", 0.005),
    }
    if nums["fewest_window_records"] < 5 or any(v is None for v in ratio.values()):
        return Verdict.outside("a setting has fewer than 5 records in the ε window", nums, TOLERANCE)
    status = "holds" if nums["largest_rel_dev"] <= nums["tol"] else "fails"
    return Verdict(status, nums, TOLERANCE, note.strip())


_EXPLAIN = (
    "ε(t) e^{{2Λt}} of the particle simulations over the predicted C (quadrature of the equiangular "
    "ODE): "
    "{C_measured_over_predicted} (largest deviation {largest_rel_dev:.2e}, tolerance {tol:g}); "
    "C = {C_theory}."
)
CLAIM = Claim(
    id="flow.late-constant",
    kind="theorem",
    grade="numerics",
    paper="B",
    statement="Equiangular scalar softmax heads: late in the flow ε(t) = 1 − γ(t) ~ C e^{−2Λt}, with C "
    "given by the equiangular ODE (Thm 22).",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"strengths": [[1.0, 0.5], [2.0, 0.25, 1.0]]}, fixed={"n": 8, "beta": 1.0, "t1": 8.0}),
        "full": Grid(
            {
                "strengths": [[1.0, 0.5], [2.0, 0.25, 1.0], [3.0, 3.0]],
                "n": [8, 16, 32],
                "beta": [0.5, 1.0, 4.0],
            },
            fixed={"t1": 12.0, "records": 1200, "dt": 0.005},
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"C": "the late constant C from a quadrature of the equiangular ODE"},
    regime="equiangular scalar softmax heads; ε window (1e-7, 1e-4) reached within t1",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
