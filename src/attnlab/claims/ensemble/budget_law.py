"""``ensemble.budget-law`` (docs/ensemble.md A5, Thm 6.1): the optimal head dimension against n.

Statement: at a fixed budget D = H·d_k the optimal head dimension grows only logarithmically with the
training-set size (the paper's abstract); the summary gives the law ``d_k* ~ (log n)^{2/(4+d)}``.

Setting: input dimension d ≥ 16 and D ≤ d, every split with d_k < d (so every head is a proper
subspace and heads genuinely differ: at d_k ≥ d every head is a tight frame and all heads are one),
a radial target spread over every direction, bandwidth 1/√d_k as the paper has it, n over two decades
(quick 10²–10⁴, full 10²–3·10⁴ and d = 32). d_k* per point is the vertex of a parabola in log d_k
through the best divisor and its neighbours. The projection scale c, which the statement leaves open,
is a knob (c ∈ {2, 4}).

What tells logarithmic growth from a power of n. With x = log n and y = log d_k*, a power law
d_k* ∝ n^a is a straight line in x, and any logarithmic law d_k* ∝ (log n)^p bends down:
y = const + p log x, curvature −p/x². Over a range of n the slope alone cannot tell them apart (an
exact n^0.2 fits a slope 1.2 in log log n), so the rule decides on the curvature.

Verdict rule (branch "curvature"), per cell, on the sample sizes whose best divisor is interior (d_k* on
the grid edge says nothing about the law; those n are set aside and named), with at least 3 such n:
fit y = a + b(x − x̄) + k(x − x̄)² over every point (seeds as replicates), giving k ± se; fit the log law
y = a + p log x, and compute the curvature k_L that law has on the same design (the quadratic coefficient
of p log x fitted the same way; ``pred("log_curvature", k_L)``). "holds" when k's 2-se band holds k_L
and excludes 0 (the bend of log growth is seen, a power of n excluded); "fails" when the band excludes
k_L (the data are straighter, or bend the other way); "inconclusive" when it holds both, with the
largest n at which a design of the same shape (log-spaced from the smallest n, the same points per n
and residual spread) would separate them (|k_L| > 4 se). The power law's exponent a ± se, the log
law's p ± se, their residual sums of squares and the likelihood ratio between them (same parameter
count: N log(RSS_power/RSS_log)) are reported, with the summary's exponent 2/(4+d) as a labelled reading
(consistent or excluded by p's 2-se band).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.claims.ensemble._common import device_name, split
from attnlab.engine.params import In, OneOf
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Grid,
    Knob,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)
from attnlab.ensemble.budget import budget_sweep, continuous_optimum, fit_power_law
from attnlab.ensemble.data import RegressionTask

__all__ = ["CLAIM", "Params", "run", "verdict", "group_fit"]


@dataclass(frozen=True)
class Params:
    n: int = 100  # training-sample size
    c: float = 2.0  # projection scale (W_h = c·U_h)
    D: int = 16  # budget H·d_k
    d: int = 16  # input dimension
    target: str = "radial"  # regression target (ensemble.data.TARGETS)
    noise: float = 0.5  # label noise σ
    reps: int = 8  # Monte Carlo replications of the training sample
    queries: int = 60  # integration points
    layout: str = "random"  # how the heads' subspaces are drawn (ensemble.layouts.LAYOUTS)
    kernel: str = "gaussian"  # NW kernel of every head
    max_d_k: int = 0  # largest per-head dimension tried (0: every divisor below d)
    n_cap: int = 0  # most training points the heads' memory holds (0: all n; a control knob)
    weighting: str = "averaged"  # how heads are combined (ensemble.budget.WEIGHTINGS)
    bandwidth: str = "scale"  # 1/√d_k read as the score's temperature or the kernel's sd (BANDWIDTHS)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "n": In("[2, inf)", cap=10_000_000),
        "c": In("(0, inf)"),
        "D": In("[1, inf)", cap=100_000),
        "d": In("[1, inf)", cap=100_000),
        "target": OneOf("sine", "ridge", "bump", "linear", "radial", "zero"),
        "noise": In("[0, inf)"),
        "reps": In("[1, inf)", cap=100_000),
        "queries": In("[1, inf)", cap=100_000),
        "layout": OneOf("random", "orthogonal", "shared", "controlled"),
        "kernel": OneOf("dot", "gaussian"),
        "max_d_k": In("[0, inf)"),
        "n_cap": In("[0, inf)"),
        "weighting": OneOf("averaged", "summed", "fitted"),
        "bandwidth": OneOf("scale", "sd"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    task = RegressionTask(d=int(p.d), target=str(p.target), noise=float(p.noise))
    top = int(p.max_d_k) if p.max_d_k else int(p.d) - 1
    n_used = min(int(p.n), int(p.n_cap)) if p.n_cap else int(p.n)
    sw = budget_sweep(
        task, int(p.D), n_used, int(p.reps), int(p.queries), c=float(p.c), layout=p.layout,
        kernel=p.kernel, seed=int(point.seed % (2**31)), device=point.device, max_d_k=top,
        weighting=p.weighting, bandwidth=p.bandwidth,
    )  # fmt: skip
    return Result(
        metrics={
            "dk_star": continuous_optimum(sw.d_k, sw.mse),
            "dk_best": sw.best_d_k,
            "n_used": n_used,
            "dk_min": int(sw.d_k.min()),
            "dk_max": int(sw.d_k.max()),
            "mse_best": float(sw.mse.min()),
            "mse_by_split": sw.mse.tolist(),
            "mse_limit_by_split": [None if v != v else float(v) for v in sw.limit],
            "d_k": sw.d_k.tolist(),
            "device": device_name(point.device),
        },
        arrays={
            "d_k": sw.d_k,
            "mse": sw.mse,
            "bias2": sw.bias2,
            "var_part": sw.variance_part,
            "limit": sw.limit,
        },  # fmt: skip
    )


def _edge(r: Row) -> bool:
    return r.metrics["dk_best"] in (r.metrics["dk_min"], r.metrics["dk_max"])


def _quad(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Curvature k, its se and the residual sd of ``y = a + b(x − x̄) + k(x − x̄)²`` by least squares."""
    xc = x - x.mean()
    A = np.vstack([np.ones_like(xc), xc, xc**2]).T
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - A @ coef
    dof = len(y) - 3
    s2 = float(res @ res) / dof if dof > 0 else math.nan
    cov = s2 * np.linalg.pinv(A.T @ A)
    return float(coef[2]), math.sqrt(float(cov[2, 2])) if s2 == s2 else math.nan, math.sqrt(s2)


def _log_curvature(x: np.ndarray, p: float) -> float:
    """The curvature the log law ``y = p log x`` has on the design ``x`` (its quadratic coefficient)."""
    xc = x - x.mean()
    A = np.vstack([np.ones_like(xc), xc, xc**2]).T
    return float(np.linalg.lstsq(A, p * np.log(x), rcond=None)[0][2])


def _n_needed(ns: Sequence[float], per_n: int, sd: float, p: float) -> float | None:
    """Smallest top n (decades 10⁴…10¹²) whose log-spaced design from min(ns), with as many n and points
    per n as now and the same residual sd, separates the log law's curvature from 0 (|k_L| > 4 se)."""
    if not (sd == sd and p == p) or p == 0:
        return None
    lo = math.log(min(ns))
    for e in range(4, 13):
        x = np.repeat(np.linspace(lo, e * math.log(10), max(len(ns), 3)), per_n)
        xc = x - x.mean()
        A = np.vstack([np.ones_like(xc), xc, xc**2]).T
        se = sd * math.sqrt(float(np.linalg.pinv(A.T @ A)[2, 2]))
        if abs(_log_curvature(x, p)) > 4 * se:
            return float(10**e)
    return None


def group_fit(rs: Sequence[Row], pred: Predict, p0: float) -> tuple[str, dict]:
    """The verdict rule on one cell's rows (see the module docstring), with its numbers."""
    ns_all = sorted({r.params["n"] for r in rs})
    edge_n = [n for n in ns_all if np.mean([_edge(r) for r in rs if r.params["n"] == n]) > 0.5]
    inner = [r for r in rs if r.params["n"] not in edge_n]
    nums: dict = {
        "dk_star_by_n": {
            int(n): float(np.mean([r.metrics["dk_star"] for r in rs if r.params["n"] == n])) for n in ns_all
        },
        "n_on_grid_edge": edge_n,
        "summary_exponent": p0,
    }
    n_in = sorted({r.params["n"] for r in inner})
    if len(n_in) < 3:
        return "inconclusive", nums | {"reason": "fewer than 3 sample sizes with an interior optimum"}
    ns = np.array([r.params["n"] for r in inner], dtype=float)
    dk = np.array([r.metrics["dk_star"] for r in inner])
    x, y = np.log(ns), np.log(dk)
    log_fit, power_fit = fit_power_law(x, dk), fit_power_law(ns, dk)
    k, k_se, sd = _quad(x, y)
    k_log = pred("log_curvature", _log_curvature(x, log_fit["p"]))
    p_se = log_fit["p_se"] if log_fit["p_se"] == log_fit["p_se"] else math.inf
    nums |= {
        "curvature": k,
        "curvature_se": k_se,
        "log_curvature": k_log,
        "log_exponent_p": log_fit["p"],
        "log_exponent_se": log_fit["p_se"],
        "power_exponent_a": power_fit["p"],
        "power_exponent_se": power_fit["p_se"],
        "rss_log": log_fit["rss"],
        "rss_power": power_fit["rss"],
        "likelihood_ratio_log_over_power": len(y) * math.log(power_fit["rss"] / log_fit["rss"])
        if log_fit["rss"] > 0 and power_fit["rss"] > 0
        else math.nan,
        "summary_reading": "consistent" if abs(log_fit["p"] - p0) <= 2 * p_se else "excluded",
        "n_range": [int(ns.min()), int(ns.max())],
    }
    if not k_se == k_se:
        return "inconclusive", nums | {"reason": "too few points for a curvature"}
    if abs(k - k_log) > 2 * k_se:
        return "fails", nums  # the data exclude the bend of logarithmic growth
    if abs(k) > 2 * k_se:
        return "holds", nums
    need = _n_needed(n_in, max(1, len(inner) // len(n_in)), sd, log_fit["p"])
    return "inconclusive", nums | {
        "n_needed": need,
        "reason": f"the curvature band {k:.4f} ± {2 * k_se:.4f} holds both 0 (a power of n) and the log "
        f"law's {k_log:.4f}; "
        + (
            f"n up to about {need:.0e} would separate them" if need else "no n up to 1e12 would separate them"
        ),
    }


TOLERANCE = (
    "per cell, n with an interior optimum only: curvature k of log d_k* in log n (2-se band) holds the log "
    "law's curvature and excludes 0 holds; excludes the log law's fails; holds both (or fewer than 3 such n) "
    "inconclusive"
)
BRANCH = "curvature"


def _group_text(key: str, v: dict) -> str:
    def g(name: str) -> float:
        return v.get(name, math.nan)

    return (
        f"{key}: {v['status']} (curvature {g('curvature'):.4f} ± {g('curvature_se'):.4f} against the log "
        f"law's {g('log_curvature'):.4f}; n^a with a = {g('power_exponent_a'):.3f} ± "
        f"{g('power_exponent_se'):.3f}, (log n)^p with p = {g('log_exponent_p'):.2f} ± "
        f"{g('log_exponent_se'):.2f} (the summary's {v['summary_exponent']:.2f} "
        f"{v.get('summary_reading', 'not fitted')}); likelihood ratio log/power "
        f"{g('likelihood_ratio_log_over_power'):.2f}; d_k* by n {v['dk_star_by_n']}"
        + (f"; {v['reason']}" if "reason" in v else "")
        + ")"
    )


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok, failed = split(rows)
    groups: dict[tuple, list[Row]] = {}
    for r in ok:
        groups.setdefault((r.params["D"], r.params["d"], r.params["c"]), []).append(r)
    numbers: dict = {"points": len(ok), "failed_points": failed}
    statuses, bands = [], []
    for (D, d, c), rs in sorted(groups.items()):
        st, nums = group_fit(rs, pred, 2 / (4 + d))
        statuses.append(st)
        if nums.get("log_curvature"):
            bands.append(2 * nums["curvature_se"] / abs(nums["log_curvature"]))
        numbers[f"D={D}, d={d}, c={c}"] = nums | {"status": st}
    numbers["groups"] = "; ".join(_group_text(k, v) for k, v in numbers.items() if isinstance(v, dict))
    band = max(bands) if bands else None
    if not statuses:
        return Verdict("inconclusive", numbers, TOLERANCE, "no point finished", branch=BRANCH)
    if "fails" in statuses:
        return Verdict("fails", numbers, TOLERANCE, branch=BRANCH, band=band)
    if "holds" in statuses:
        return Verdict("holds", numbers, TOLERANCE, branch=BRANCH, band=band)
    return Verdict(
        "inconclusive",
        numbers,
        TOLERANCE,
        regime="no group resolves the law (see each group's reason)",
        branch=BRANCH,
        band=band,
    )


_READING = (
    "Uniform ensembles of random-subspace heads (W = c·U, scale 1/√d_k, Gaussian kernel), every split of D "
    "with d_k < d, radial target, integrated MSE by Monte Carlo ({points} points). Per group: {groups}."
)

_FIXED = {"D": 16, "d": 16, "target": "radial", "noise": 0.5, "reps": 8, "queries": 60, "c": 2.0}

CLAIM = Claim(
    id="ensemble.budget-law",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="Thm 6.1: at a fixed budget D = H·d_k the optimal head dimension d_k* grows only "
    "logarithmically with the training-set size n (d_k* ~ (log n)^p, the summary's p = 2/(4+d)), not as a "
    "power of n.",
    version=4,
    params=Params,
    grids={
        "quick": Grid({"n": [100, 300, 1000, 3000, 10000]}, fixed=_FIXED, seeds=6),
        "full": Grid(
            {"n": [100, 300, 1000, 3000, 10000, 30000], "d": [16, 32]},
            fixed={"D": 16, "target": "radial", "noise": 0.5, "reps": 24, "queries": 200, "c": 2.0},
            seeds=6,
        ),
    },
    run=run,
    verdict=verdict,
    predictions={
        "log_curvature": "the curvature of log d_k* in log n that the fitted log law has on the design"
    },
    knobs={"c": Knob([2.0, 4.0], "the projection scale sets the kernel width; the statement fixes none")},
    regime="d ≥ 16, D ≤ d, every split with d_k < d; an optimum inside the divisor grid",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="Sweep of every divisor split of D below d over two decades of n, c mapped; the curvature "
    "of log d_k* in log n tells logarithmic growth from a power of n.",
)
