"""``flow.relu-vs-softmax`` (Thm 25): clustering time of ReLU and softmax heads from random init.

Statement: near γ = 0 softmax heads cluster in time O(n) and ReLU heads (zero force at γ = 0) in
O(n log d). Part "linearised" integrates the linearised equations of docs/flow.md B6; part "full"
measures times to γ* on the full dynamics (:func:`attnlab.dynamics.crossing_time`).

Verdict rule: holds when the linearised exponents in n are within 0.1 of 1 (softmax) and exactly 1
with T/n linear in log d (ReLU), and ReLU is slower than softmax in every full-dynamics setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.core.stats import linear_slope, loglog_slope
from attnlab.dynamics import Heads, Record, crossing_time, init, simulate
from attnlab.dynamics import theory as T
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    part: Literal["full", "linearised"] = "full"  # full dynamics, or the linearised equations
    kind: Literal["softmax", "relu"] = "softmax"  # head kind (full)
    scale: Literal["1", "1/n"] = "1"  # velocity scale (full; 1/n multiplies every time by n)
    n: int = 16  # tokens (full)
    d: int = 4  # dimension (full)
    batch: int = 4  # random initial configurations (full)
    t1: float = 30.0  # time window in units of the velocity scale (full)
    dt: float = 0.1  # RK4 step in the same units (full)
    records: int = 200  # recorded intervals (full)
    beta: float = 1.0  # inverse temperature
    strength: float = 1.0  # scalar head strength λ
    target: float = 0.5  # clustering target γ*
    ns: list[int] = field(default_factory=lambda: [32, 128, 512, 2048, 8192])  # token counts (linearised)
    ds: list[int] = field(default_factory=lambda: [16, 64, 256, 1024, 4096])  # dimensions (linearised)


def _linearised(p: Params) -> Result:
    ns, ds = np.array(p.ns, dtype=float), np.array(p.ds, dtype=float)
    lam, beta, target = p.strength, p.beta, p.target
    t_soft = np.array([T.softmax_linear_time(lam, beta, int(n), target) for n in ns])
    t_relu = np.array([[T.relu_linear_time(lam, beta, int(n), d**-0.5, target) for d in ds] for n in ns])
    y = t_relu[-1] / ns[-1]  # T_relu / n, linear in log d
    k = linear_slope(np.log(ds), y)
    resid = float(np.abs(k * (np.log(ds) - np.log(ds).mean()) + y.mean() - y).max())
    exact = [T.relu_equiangular_time(lam, beta, 10**6, d**-0.5, target) for d in ds]
    large_n = [T.relu_large_n_time(lam, beta, d**-0.5, target) for d in ds]
    return Result(
        metrics={
            "slope_softmax_n": loglog_slope(ns, t_soft),
            "slope_relu_n": loglog_slope(ns, t_relu[:, -1]),
            "relu_logd_resid": resid,
            "relu_exact_large_n_effective_exponent_d": loglog_slope(ds, large_n),
            "device": "cpu",  # one-dimensional ODE times (numpy/scipy)
        },
        arrays={"n": ns, "d": ds, "t_soft": t_soft, "t_relu": t_relu, "relu_exact": np.array(exact)},
    )


def run(point: Point) -> Result:
    p: Params = point.p
    if p.part == "linearised":
        return _linearised(p)
    spec = Heads.scalar([p.strength], d=p.d, kind=p.kind, scale=p.scale, device=point.device)
    x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(), device=point.device)
    tf = p.n if p.scale == "1/n" else 1.0
    t1 = p.t1 * tf
    rec = Record(every=t1 / p.records, observables=("gamma",))
    sol = simulate(spec, x0, beta=p.beta, t1=t1, dt=p.dt * tf, record=rec)
    gam = sol.observables["gamma"].cpu().numpy()  # (T, B)
    times = [crossing_time(sol.t.numpy(), gam[:, b], p.target) for b in range(gam.shape[1])]
    ok = [t for t in times if t is not None]
    return Result(
        metrics={
            "time": float(np.median(ok)) if len(ok) == len(times) else None,
            "reached": len(ok) / len(times),
            "gamma0": float(np.abs(gam[0]).mean()),
            "final_gamma": float(gam[-1].mean()),
            "t1": t1,
            "device": device_name(point.device),
        }
    )


TOLERANCE = "linearised exponents within 0.1 of 1; ReLU slower than softmax"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    lin = [r for r in good if r.params.get("part") == "linearised"]
    full = [r for r in good if r.params.get("part", "full") == "full"]
    if not lin or not full:
        return Verdict("inconclusive", {}, TOLERANCE, "need both parts." + note)
    L = lin[0].metrics
    tab = {(r.params["kind"], r.params["scale"], r.params["n"], r.params["d"]): r for r in full}
    ratio = [
        (r.metrics["time"] or r.metrics["t1"]) / tab[("softmax", s, n, d)].metrics["time"]
        for (k, s, n, d), r in tab.items()
        if k == "relu"
        and s == "1"
        and ("softmax", s, n, d) in tab
        and tab[("softmax", s, n, d)].metrics["time"]
    ]
    nums = {
        "linearised_softmax_exponent_n": L["slope_softmax_n"],
        "linearised_relu_exponent_n": L["slope_relu_n"],
        "linearised_relu_T_over_n_vs_log_d_residual": L["relu_logd_resid"],
        "relu_large_n_effective_exponent_d": L["relu_exact_large_n_effective_exponent_d"],
        "relu_over_softmax_time": [min(ratio), max(ratio)] if ratio else None,
        "not_reached": [list(k) for k, r in tab.items() if r.metrics["time"] is None],
    }
    lin_ok = (
        abs(L["slope_softmax_n"] - 1) < 0.1
        and abs(L["slope_relu_n"] - 1) < 1e-9
        and L["relu_logd_resid"] < 1e-9
    )
    return Verdict(
        "holds" if lin_ok and ratio and min(ratio) > 1.0 else "fails", nums, TOLERANCE, note.strip()
    )


CLAIM = Claim(
    id="flow.relu-vs-softmax",
    kind="theorem",
    paper="B",
    statement="Near γ = 0, softmax heads cluster in time O(n) and ReLU heads (zero force at γ = 0) in "
    "O(n log d) (Thm 25).",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"kind": ["softmax", "relu"], "scale": ["1", "1/n"], "n": [16, 64], "d": [4, 32]},
            fixed={"part": "full", "batch": 4, "t1": 30.0, "dt": 0.1},
            extra=[
                Grid(
                    fixed={
                        "part": "linearised",
                        "ns": [32, 128, 512, 2048, 8192],
                        "ds": [16, 64, 256, 1024, 4096],
                    }
                )
            ],
        ),
        "full": Grid(
            {
                "kind": ["softmax", "relu"],
                "scale": ["1", "1/n"],
                "n": [16, 32, 64, 128, 256],
                "d": [4, 16, 64, 256],
            },
            fixed={"part": "full", "batch": 16, "t1": 60.0, "dt": 0.05},
            extra=[
                Grid(
                    fixed={
                        "part": "linearised",
                        "ns": [32, 128, 512, 2048, 8192, 32768],
                        "ds": [16, 64, 256, 1024, 4096],
                    }
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": "linearised: T_softmax ∝ n^{linearised_softmax_exponent_n:.3f}, T_relu ∝ "
        "n^{linearised_relu_exponent_n:.3f}; ReLU/softmax time ratio {relu_over_softmax_time}.",
        "fails": "linearised exponents {linearised_softmax_exponent_n:.3f}, "
        "{linearised_relu_exponent_n:.3f}; ReLU/softmax time ratio {relu_over_softmax_time}.",
    },
)
