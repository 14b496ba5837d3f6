"""``flow.relu-late`` (finding, Thm 25's remark): may ReLU heads dominate softmax heads at late times?

Reading: "dominates" = the larger late decay rate of ``ε = 1 − γ`` (γ the mean pairwise inner product).
For one scalar head of strength λ near consensus (tokens ``x + δ_i``), the attention weights are uniform to
first order in δ, so ``δ̇_i = κ(δ̄ − δ_i)`` with ``κ = λ`` (softmax: weights ``1/n``) or ``κ = βλ²``
(ReLU: weights ``βλ/n``, values ``λ``); ``ε ∝ |δ_i − δ_j|²`` decays at ``2λ`` and ``2βλ²``: ReLU's late rate
is larger exactly when βλ > 1. The predictions are the two rates themselves (perturbable); the data are
particle simulations (RK4 on the sphere) from starts that no symmetry reduces to the equiangular ODE:
tokens around one random pole (``start = "cap"``, spread 0.15 per coordinate in R^8, so every pair
lies inside ReLU's positive half: at spread 0.3 one ReLU start of 128 over four root seeds had a pair
at −0.57 and stalled in two clusters), and, as a map over the open knob ``start``, equiangular starts at
γ0 = 0.2. The local rate ``−d ln ε/dt`` is fitted per trajectory on the ε window
(:func:`attnlab.dynamics.late_rate_fit`).

Verdict rule (stated before the numbers): holds when, in every setting (β, λ, n) with both kinds, every
trajectory's fitted rate is within ``band`` (0.5%) of its predicted rate (branch "rates") and ReLU's
measured rate is the larger exactly when βλ > 1 (branch "dominance"); fails otherwise; inconclusive when
a trajectory does not reach the ε window. The band: RK4's relative rate error at dt = 0.1 is about
(βλ²dt)⁴/120 ≈ 1e-5 at βλ² = 2, the O(ε) correction in the window is ≤ 1e-4, and the deviations measured
are ≤ 2e-5. The grid sets βλ at 0.5, 0.9, 1.1 and 2, around the switch at βλ = 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, Record, init, late_rate_fit, simulate
from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Knob, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    kind: Literal["softmax", "relu"] = "softmax"  # head kind
    beta: float = 2.0  # inverse temperature
    strength: float = 1.0  # scalar head strength λ
    n: int = 8  # tokens (in R^n)
    start: Literal["cap", "equiangular"] = "cap"  # around one random pole, or equiangular at gamma0
    spread: float = 0.15  # Gaussian spread around the pole (cap start; every pair at positive inner product)
    gamma0: float = 0.2  # initial inner product (equiangular start; > 0: ReLU has no force at γ = 0)
    batch: int = 4  # trajectories per point
    t1: float = 30.0  # simulated time
    dt: float = 0.1  # RK4 step
    records: int = 300  # recorded intervals
    eps_lo: float = 1e-8  # the ε window of the late-rate fit
    eps_hi: float = 1e-4
    band: float = 0.005  # largest relative deviation of a fitted rate from its prediction

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "beta": In("(0, inf)"),
        "strength": In("(0, inf)"),
        "n": In("[2, inf)", cap=100_000),
        "spread": In("(0, inf)"),
        "gamma0": In("(-1, 1)"),
        "batch": In("[1, inf)", cap=100_000),
        "t1": In("(0, inf)", cap=1_000),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
        "records": In("[1, inf)", cap=100_000),
        "eps_lo": In("(0, 1)"),
        "eps_hi": In("(0, 1)"),
        "band": In("(0, 1)"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    spec = Heads.scalar([p.strength], d=p.n, kind=p.kind, device=point.device)
    g = point.generator()
    if p.start == "cap":
        x0 = init.clusters(
            batch=p.batch, n=p.n, d=p.n, k=1, spread=p.spread, generator=g, device=point.device
        )
    else:
        x0 = init.equiangular(batch=p.batch, n=p.n, d=p.n, gamma=p.gamma0, generator=g, device=point.device)
    sol = simulate(
        spec, x0, beta=p.beta, t1=p.t1, dt=p.dt, record=Record(every=p.t1 / p.records, observables=("gamma",))
    )
    t, eps = sol.t.numpy(), 1.0 - sol.observables["gamma"].cpu().numpy()  # (T,), (T, B)
    rates = [late_rate_fit(t, eps[:, b], p.eps_lo, p.eps_hi) for b in range(eps.shape[1])]
    return Result(
        metrics={
            "late_rates": rates,
            "late_rate": float(np.median([r for r in rates if r is not None])) if all(rates) else None,
            "late_rate_linearised": 2 * p.strength if p.kind == "softmax" else 2 * p.beta * p.strength**2,
            "min_pair_inner_product_start": float(
                (x0 @ x0.transpose(1, 2)).min().cpu()
            ),  # > 0: every pair inside ReLU's positive half
            "final_eps": float(eps[-1].max()),
            "device": device_name(point.device),
        },
        arrays={"t": t, "eps": eps.mean(1)},
    )


TOLERANCE = "every fitted late rate within band (0.5%) of 2λ (softmax) / 2βλ² (ReLU); ReLU larger iff βλ > 1"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    by: dict[tuple, dict[str, Row]] = {}
    for r in good:
        by.setdefault((r.params["beta"], r.params["strength"], r.params["n"]), {})[r.params["kind"]] = r
    pairs = {k: v for k, v in by.items() if len(v) == 2}
    name = {k: f"beta={b:g},lambda={lam:g},n={n}" for k, (b, lam, n) in zip(pairs, pairs, strict=True)}
    rates = {
        name[k]: {kd: v[kd].metrics["late_rate"] for kd in ("softmax", "relu")} for k, v in pairs.items()
    }
    nums: dict = {"late_rates": rates}
    if not pairs or any(
        x is None for v in pairs.values() for kd in v for x in (v[kd].metrics.get("late_rates") or [None])
    ):
        return Verdict.outside("a run did not reach the ε window (or no pair of kinds)", nums, TOLERANCE)
    band = float(good[0].params.get("band", 0.005))
    dev, worst = {}, 0.0
    for k, v in pairs.items():
        b, lam, _ = k
        predicted = {"softmax": pred("softmax_rate", 2 * lam), "relu": pred("relu_rate", 2 * b * lam**2)}
        d = {kd: max(abs(x / predicted[kd] - 1) for x in v[kd].metrics["late_rates"]) for kd in predicted}
        dev[name[k]] = {kd: float(f"{x:.3g}") for kd, x in d.items()}
        worst = max(worst, *d.values())
    wrong = [
        name[k] for k in pairs if (rates[name[k]]["relu"] > rates[name[k]]["softmax"]) != (k[0] * k[1] > 1)
    ]
    nums.update(
        largest_rel_deviation=worst,
        rel_deviation_by_setting=dev,
        band=band,
        relu_dominates=[s for s in rates if rates[s]["relu"] > rates[s]["softmax"]],
        settings_against_beta_lambda_rule=wrong,
        trajectories_per_setting_and_kind=min(
            len(v[kd].metrics["late_rates"]) for v in pairs.values() for kd in v
        ),
    )
    if worst > band:
        return Verdict("fails", nums, TOLERANCE, note.strip(), branch="rates", band=band)
    if wrong:
        return Verdict("fails", nums, TOLERANCE, note.strip(), branch="dominance", band=band)
    return Verdict("holds", nums, TOLERANCE, note.strip(), branch="rates", band=band)


_EXPLAIN = (
    "late decay rates of 1 − γ (softmax vs ReLU, medians of {trajectories_per_setting_and_kind} trajectories "
    "per kind, fitted on ε in (1e-8, 1e-4)): {late_rates}; largest deviation of a trajectory from 2λ / "
    "2βλ² {largest_rel_deviation:.2e} (band {band:g}; by setting {rel_deviation_by_setting}). ReLU's rate "
    "is larger in {relu_dominates}: ReLU dominates at late times exactly when βλ > 1. Settings against "
    "that rule: {settings_against_beta_lambda_rule}."
)
CLAIM = Claim(
    id="flow.relu-late",
    kind="finding",
    grade="evidence",
    paper="B",
    statement="Thm 25's remark: ReLU heads may dominate softmax heads at late times: the late decay rates "
    "of 1 − γ are 2βλ² (ReLU) and 2λ (softmax), so ReLU dominates exactly when βλ > 1.",
    version=3,
    params=Params,
    grids={
        "quick": Grid({"kind": ["softmax", "relu"], "beta": [0.5, 0.9, 1.1, 2.0]}, fixed={"n": 8}),
        "full": Grid(
            {"kind": ["softmax", "relu"], "beta": [0.25, 0.5, 0.9, 1.1, 1.25, 2.0, 4.0], "n": [8, 32]},
            fixed={"batch": 16},
        ),
    },
    run=run,
    verdict=verdict,
    predictions={
        "softmax_rate": "the late decay rate 2λ of 1 − γ for a softmax head",
        "relu_rate": "the late decay rate 2βλ² of 1 − γ for a ReLU head",
    },
    knobs={
        "start": Knob(
            ["cap", "equiangular"],
            "the remark names no initial condition: random starts around a pole, or the equiangular "
            "configuration of Thm 22",
        )
    },
    regime="one scalar head, starts with every pair at positive inner product, ε window reached within t1",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
