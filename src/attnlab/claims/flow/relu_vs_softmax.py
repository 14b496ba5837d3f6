"""``flow.relu-vs-softmax`` (Thm 25): the clustering force of ReLU and softmax heads from random init.

Statement: near γ = 0 a softmax head drives clustering with a constant force ``φ(λ) = 2λ/(e^{βλ}+n−1)``,
independent of d (hence ``T = O(n)`` to a fixed target while ``n ≫ e^{βλ}``, under the linearised
equation), and a ReLU head has zero force at γ = 0 (hence ``T = O(n log d)``). Tested on the full
dynamics where these statements apply: the mean ``dγ/dt`` at uniform random tokens
(:func:`attnlab.dynamics.gamma_rate`, from the full vector field at the state) against the predicted
early forces, φ for softmax and ``2βλ²/(n√(2πd))`` for ReLU (:func:`theory.relu_random_init_rate`: the
"zero force" is a force vanishing as ``d^{−1/2}``). Both are d → ∞ limits: their finite-d corrections,
measured on 8192 states at β = λ = 1, n = 16 and 64, are about −0.9/d for softmax and −1.7/d for ReLU
(−1.3% and −2.4% at d = 64, −0.35% and −0.7% at d = 256: the same coefficient at both d, i.e. a leading
1/d term). The verdict therefore reads the ratio measured/predicted at d → ∞: per kind, the ratios pooled
over n at each d ≥ d_min (64) are fitted by ``r(d) = r∞ + b/d`` (weighted least squares, SE propagated)
and ``r∞`` is held against 1. Reported beside it (part ``times``): times of the full dynamics to a target
inside the linear regime (mean γ up by ``c/n``) against the linear prediction, times to γ = 1/2 with
ReLU runs sized from the exact formula of docs/flow.md B6 (and how often ReLU stalls in metastable
clusters), and the linearised equations' exponents (part ``linearised``; algebra, not evidence).

Verdict rule (branch "force ratio", band ``max(0.015, 2 SE)``): per kind ``r∞`` must be within
``max(0.015, 2 SE(r∞))`` of 1 (SE over token configurations): holds when both kinds are, fails otherwise;
inconclusive without force rows at two d ≥ d_min for both kinds. The 1.5% floor is the spread between
root seeds: over seeds 0–3 the extrapolated ReLU ratio was 0.9975, 1.0066, 0.9983, 1.0116 (2 SD = 1.3%,
about twice what the within-run SE of 0.37% gives), so a band of 2 SE alone failed one seed in four; the
neglected O(1/d²) rest, about (1.7/64)² ≈ 0.07% at d = 64, is far below it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.core.stats import linear_slope, loglog_slope
from attnlab.dynamics import Heads, Record, crossing_time, gamma_rate, init, simulate, velocity
from attnlab.dynamics import theory as T
from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    part: Literal["force", "times", "linearised"] = "force"  # early force, clustering times, or algebra
    kind: Literal["softmax", "relu"] = "softmax"  # head kind
    n: int = 16  # tokens
    d: int = 64  # dimension
    batch: int = 256  # random initial configurations (force: 256; times: a few)
    beta: float = 1.0  # inverse temperature
    strength: float = 1.0  # scalar head strength λ
    d_min: int = 64  # smallest d of the 1/d extrapolation (regime)
    target: float = 0.5  # clustering target γ* (times)
    c_linear: float = 0.5  # linear-regime target: mean γ up by c/n (times)
    t1_min: float = 30.0  # shortest simulated time (times)
    t1_factor: float = 4.0  # simulate at least this multiple of the exact equiangular time (times)
    dt: float = 0.1  # RK4 step (times)
    records: int = 400  # recorded intervals (times)
    ns: list[int] = field(default_factory=lambda: [32, 128, 512, 2048, 8192])  # token counts (linearised)
    ds: list[int] = field(default_factory=lambda: [16, 64, 256, 1024, 4096])  # dimensions (linearised)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "n": In("[2, inf)", cap=100_000),
        "d": In("[1, inf)", cap=100_000),
        "batch": In("[1, inf)", cap=100_000),
        "beta": In("(0, inf)"),
        "strength": In("(0, inf)"),
        "d_min": In("[1, inf)"),
        "target": In("(0, 1)"),
        "c_linear": In("(0, inf)"),
        "t1_min": In("(0, inf)", cap=1_000),
        "t1_factor": In("(0, inf)", cap=1_000),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
        "records": In("[1, inf)", cap=100_000),
        "ns": In("[2, inf)", cap=100_000),
        "ds": In("[1, inf)", cap=100_000),
    }


def _predicted_force(p: Params) -> float:
    if p.kind == "softmax":
        return T.phi(p.strength, p.beta, p.n)
    return T.relu_random_init_rate(p.strength, p.beta, p.n, p.d)


def _linearised(p: Params) -> Result:
    ns, ds = np.array(p.ns, dtype=float), np.array(p.ds, dtype=float)
    lam, beta, tg = p.strength, p.beta, p.target
    t_soft = np.array([T.softmax_linear_time(lam, beta, int(n), tg) for n in ns])
    t_relu = np.array([[T.relu_linear_time(lam, beta, int(n), d**-0.5, tg) for d in ds] for n in ns])
    y = t_relu[-1] / ns[-1]  # T_relu / n, linear in log d
    k = linear_slope(np.log(ds), y)
    large_n = [T.relu_large_n_time(lam, beta, d**-0.5, tg) for d in ds]
    return Result(
        metrics={
            "slope_softmax_n": loglog_slope(ns, t_soft),
            "slope_relu_n": loglog_slope(ns, t_relu[:, -1]),
            "relu_logd_resid": float(np.abs(k * (np.log(ds) - np.log(ds).mean()) + y.mean() - y).max()),
            "relu_exact_large_n_effective_exponent_d": loglog_slope(ds, large_n),
            "device": "cpu",  # one-dimensional ODE times (numpy/scipy)
        },
        arrays={"n": ns, "d": ds, "t_soft": t_soft, "t_relu": t_relu},
    )


def run(point: Point) -> Result:
    p: Params = point.p
    if p.part == "linearised":
        return _linearised(p)
    spec = Heads.scalar([p.strength], d=p.d, kind=p.kind, device=point.device)
    x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(), device=point.device)
    if p.part == "force":
        rate = gamma_rate(velocity(spec, x0, p.beta), x0).cpu().numpy()  # (B,) dγ/dt at each state
        return Result(
            metrics={
                "rate": float(rate.mean()),
                "rate_se": float(rate.std(ddof=1) / math.sqrt(rate.size)),
                "predicted": _predicted_force(p),
                "device": device_name(point.device),
            }
        )
    if p.kind == "relu":
        exact = T.relu_equiangular_time(p.strength, p.beta, p.n, p.d**-0.5, p.target)
    else:
        exact = T.equiangular_time([p.strength], p.beta, p.n, p.target)
    t1 = max(p.t1_min, p.t1_factor * exact)
    sol = simulate(
        spec, x0, beta=p.beta, t1=t1, dt=p.dt, record=Record(every=t1 / p.records, observables=("gamma",))
    )
    t, gam = sol.t.numpy(), sol.observables["gamma"].cpu().numpy()  # (T,), (T, B)
    lin = [crossing_time(t, gam[:, b] - gam[0, b], p.c_linear / p.n) for b in range(gam.shape[1])]
    half = [crossing_time(t, gam[:, b], p.target) for b in range(gam.shape[1])]
    reached = [h for h in half if h is not None]
    return Result(
        metrics={
            "time_linear": float(np.median([v for v in lin if v is not None])) if any(lin) else None,
            "time_linear_predicted": (p.c_linear / p.n) / _predicted_force(p),
            "time_half": float(np.median(reached)) if len(reached) == len(half) else None,
            "time_half_by_run": half,  # None where a run did not reach the target within t1
            "time_half_exact_equiangular": exact,
            "reached_half": len(reached) / len(half),
            "final_gamma": float(gam[-1].mean()),
            "t1": t1,
            "device": device_name(point.device),
        },
        arrays={"t": t, "gamma": gam.mean(1)},
    )


def _extrapolate(ds: list[int], r: list[float], se: list[float]) -> tuple[float, float]:
    """``r∞`` and its SE from ``r(d) = r∞ + b/d`` by weighted least squares over the d values."""
    X = np.column_stack([np.ones(len(ds)), 1.0 / np.asarray(ds, dtype=float)])  # (D, 2)
    w = 1.0 / np.maximum(np.asarray(se, dtype=float), 1e-15) ** 2
    cov = np.linalg.inv(X.T @ (w[:, None] * X))  # (2, 2)
    coef = cov @ (X.T @ (w * np.asarray(r, dtype=float)))
    return float(coef[0]), float(math.sqrt(cov[0, 0]))


TOLERANCE = "measured/predicted early force extrapolated to d → ∞ within max(0.015, 2 SE) of 1, per kind"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    force = [r for r in good if r.params.get("part") == "force"]
    inside = [r for r in force if r.params["d"] >= r.params.get("d_min", 64)]
    times = [r for r in good if r.params.get("part") == "times"]
    lin = [r for r in good if r.params.get("part") == "linearised"]
    nums: dict = {}
    for kind, name in (("softmax", "phi"), ("relu", "relu_force")):
        rs = [r for r in inside if r.params["kind"] == kind]
        if not rs:
            continue
        by_d: dict[int, list[tuple[float, float]]] = {}
        for r in rs:
            pr = pred(name, r.metrics["predicted"])
            by_d.setdefault(r.params["d"], []).append((r.metrics["rate"] / pr, r.metrics["rate_se"] / pr))
        ds = sorted(by_d)
        at_d = {d: float(np.mean([q for q, _ in by_d[d]])) for d in ds}  # pooled over n at each d
        se_d = {d: math.sqrt(sum(e * e for _, e in by_d[d])) / len(by_d[d]) for d in ds}
        nums[f"{kind}_ratio_by_d"] = {str(d): round(at_d[d], 5) for d in ds}
        nums[f"{kind}_ratio_by_setting"] = {
            f"n={r.params['n']},d={r.params['d']}": round(
                r.metrics["rate"] / pred(name, r.metrics["predicted"]), 4
            )
            for r in rs
        }
        if len(ds) < 2:
            continue
        r_inf, se_inf = _extrapolate(ds, [at_d[d] for d in ds], [se_d[d] for d in ds])
        nums[f"{kind}_ratio"], nums[f"{kind}_ratio_se"] = r_inf, se_inf
    nums["relu_force_exponent_in_d"] = loglog_slope(
        [r.params["d"] for r in force if r.params["kind"] == "relu" and r.params["n"] == 16],
        [r.metrics["rate"] for r in force if r.params["kind"] == "relu" and r.params["n"] == 16],
    )
    for kind in ("softmax", "relu"):
        ts = [r for r in times if r.params["kind"] == kind]
        nums[f"{kind}_time_linear_over_predicted"] = {
            f"n={r.params['n']},d={r.params['d']}": (r.metrics["time_linear"] or math.nan)
            / r.metrics["time_linear_predicted"]
            for r in ts
        }
        nums[f"{kind}_reached_half"] = {
            f"n={r.params['n']},d={r.params['d']}": r.metrics["reached_half"] for r in ts
        }
        nums[f"{kind}_time_half"] = {
            f"n={r.params['n']},d={r.params['d']}": r.metrics["time_half"] for r in ts
        }
    sm = sorted((r.params["n"], r.metrics["time_half"]) for r in times if r.params["kind"] == "softmax")
    sm = [(n, t) for n, t in sm if t is not None and n in {r.params["n"] for r in times}]
    nums["softmax_time_half_exponent_n"] = (
        loglog_slope([a for a, _ in sm], [b for _, b in sm]) if sm else None
    )
    if lin:
        nums["linearised_exponents_n_softmax_relu"] = [
            lin[0].metrics["slope_softmax_n"],
            lin[0].metrics["slope_relu_n"],
        ]
    if "softmax_ratio" not in nums or "relu_ratio" not in nums:
        return Verdict.outside("no force rows of both kinds at two d ≥ d_min", nums, TOLERANCE)
    tol = {k: max(0.015, 2 * nums[f"{k}_ratio_se"]) for k in ("softmax", "relu")}
    nums["tolerance_softmax"], nums["tolerance_relu"] = tol["softmax"], tol["relu"]
    ok = all(abs(nums[f"{k}_ratio"] - 1) <= tol[k] for k in ("softmax", "relu"))
    band = max(tol.values())
    return Verdict("holds" if ok else "fails", nums, TOLERANCE, note.strip(), branch="force ratio", band=band)


_FORCE = {"part": "force", "batch": 2048}
_TIMES = {"part": "times", "batch": 4}
CLAIM = Claim(
    id="flow.relu-vs-softmax",
    kind="theorem",
    grade="evidence",
    paper="B",
    statement="Near γ = 0 a softmax head clusters with a constant force 2λ/(e^{βλ}+n−1), independent of d "
    "(T = O(n)), and a ReLU head with zero force at γ = 0 (T = O(n log d)) (Thm 25).",
    version=3,
    params=Params,
    grids={
        "quick": Grid(
            {"kind": ["softmax", "relu"], "n": [16, 64], "d": [16, 64, 256]},
            fixed=_FORCE,
            extra=[
                Grid({"kind": ["softmax", "relu"], "n": [16, 64], "d": [16, 64]}, fixed=_TIMES),
                Grid(fixed={"part": "linearised"}),
            ],
        ),
        "full": Grid(
            {"kind": ["softmax", "relu"], "n": [16, 64, 256], "d": [16, 64, 256, 1024]},
            fixed=_FORCE | {"batch": 4096},
            extra=[
                Grid(
                    {"kind": ["softmax", "relu"], "n": [16, 32, 64, 128], "d": [16, 64, 256]},
                    fixed=_TIMES | {"batch": 16},
                ),
                Grid(fixed={"part": "linearised", "ns": [32, 128, 512, 2048, 8192, 32768]}),
            ],
        ),
    },
    run=run,
    verdict=verdict,
    predictions={
        "phi": "the softmax early force φ(λ) = 2λ/(e^{βλ}+n−1)",
        "relu_force": "the ReLU early force at random init 2βλ²/(n√(2πd))",
    },
    regime="uniform random tokens, d ≥ 64 extrapolated to d → ∞ (the early forces are d → ∞ limits), one "
    "scalar head",
    explain={
        "holds": "early force dγ/dt at random tokens over the prediction, extrapolated to d → ∞ from "
        "{softmax_ratio_by_d} (softmax) and {relu_ratio_by_d} (ReLU) by d: softmax {softmax_ratio:.4f} ± "
        "{softmax_ratio_se:.4f} (φ, independent of d), ReLU {relu_ratio:.4f} ± {relu_ratio_se:.4f} "
        "(2βλ²/(n√(2πd)); fitted exponent in d {relu_force_exponent_in_d:.3f}, zero in the limit). Times "
        "to a linear-regime target over the linear prediction: softmax {softmax_time_linear_over_predicted}. "
        "ReLU runs sized from the exact B6 time reach γ = 1/2 in {relu_reached_half} of the runs "
        "(metastable clusters otherwise); softmax times to 1/2 {softmax_time_half} grow like n^"
        "{softmax_time_half_exponent_n:.2f} (logarithmically: the full dynamics leave the linear regime, "
        "so O(n) is the linearised bound, not the rate), ReLU {relu_time_half}.",
        "fails": "early forces off the prediction at d → ∞: softmax {softmax_ratio:.4f} ± "
        "{softmax_ratio_se:.4f}, ReLU {relu_ratio:.4f} ± {relu_ratio_se:.4f} (by setting "
        "{softmax_ratio_by_setting}, {relu_ratio_by_setting}).",
    },
)
