"""``ensemble.weighting`` (docs/ensemble.md A6, Thm 7.1): structured weights on heads of different quality.

Statement: with heads sorted by quality (consistency rate), geometric or Fibonacci weights make the MSE
decay faster than uniform averaging when head quality is heterogeneous.

Heads (``heads``). The test setting's heads differ in size: head ``h`` sees the first ``m_h`` of ``d = 4``
input coordinates (sizes 1, 2, 3, 4; the sine target reads the first) with the classical NW bandwidth
``h ∝ n^{−1/(4+m_h)}`` (:func:`~attnlab.ensemble.quality.size_graded_projections`), so its quality comes
from the model: bias² ``O(h⁴)`` against variance ``O(1/(n h^{m_h}))`` gives the rate ``4/(4 + m_h)``
(0.8, 0.667, 0.571, 0.5). The rates are measured (each head's log–log slope over n) and reported against
that prediction, and the optimal weights' slope against the best head's rate (with fixed weights the
optimal ensemble tends to the best head's rate). ``heads="bandwidths"`` keeps the earlier construction:
one-dimensional heads whose bandwidth schedules ``h ∝ n^{−κ_h}`` set the rates ``4κ_h`` by hand.

Verdict rule, on the log–log slope of the MSE in n over the grid's range, per seed: geometric and
Fibonacci steeper than uniform in every seed holds; one of them steeper in no seed fails; otherwise
inconclusive. Slopes over successive windows of n are reported beside it (with fixed weights every
scheme tends to its slowest head's rate, so the advantage is a finite-range one).

Controls (one knob each): ``homogeneous`` — every head the same size (``sizes`` all 2), so the heads are
one head and no scheme can beat uniform (must fail); ``reversed`` — the heads sorted worst first
(``order="reversed"``), so front-loaded weights favour the slowest head (must fail).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.claims.ensemble._common import device_name, split
from attnlab.core.stats import local_slopes, loglog_slope
from attnlab.engine.params import In, OneOf
from attnlab.engine.protocol import Claim, Control, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import monte_carlo_predictions
from attnlab.ensemble.quality import (
    quality_graded_projections,
    size_graded_projections,
    size_rates,
    split_half_scheme_mse,
)

__all__ = ["CLAIM", "Params", "run", "verdict"]

SCHEMES = ("uniform", "geometric", "fibonacci", "optimal")
BRANCH = "slopes per seed"
SLOPE_TIE = 1e-9  # slopes closer than this are equal (identical heads give equal ensembles up to rounding)


@dataclass(frozen=True)
class Params:
    n: int = 100  # training-sample size
    d: int = 4  # input dimension
    heads: str = (
        "sizes"  # heads of sizes m_h with classical bandwidths ("sizes"), or set rates ("bandwidths")
    )
    sizes: tuple[int, ...] = (1, 2, 3, 4)  # head sizes m_h (rate 4/(4 + m_h)), best first
    noise: float = 0.5  # label noise σ
    kappas: tuple[float, ...] = (
        0.2,
        0.15,
        0.1,
        0.05,
    )  # "bandwidths": exponents κ_h (MSE rate 4κ_h), best first
    s0: float = 4.0  # every head's inverse temperature at n = n0
    n0: float = 50  # reference sample size of the bandwidth schedules
    rho: float = 0.5  # ratio of the geometric scheme
    reps: int = 40  # Monte Carlo replications (half fit the optimal weights, half score every scheme)
    queries: int = 200  # integration points
    target: str = "sine"  # regression target (its relevant coordinate is the first)
    order: str = "best-first"  # heads sorted "best-first" (as the theorem has them) or "reversed"

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "n": In("[2, inf)", cap=10_000_000),
        "d": In("[1, inf)", cap=100_000),
        "heads": OneOf("sizes", "bandwidths"),
        "sizes": In("[1, inf)", cap=100_000, length="[1, 64]"),
        "noise": In("[0, inf)"),
        "kappas": In("(0, inf)"),
        "s0": In("(0, inf)"),
        "n0": In("(0, inf)"),
        "rho": In("(0, 1]"),
        "reps": In("[1, inf)", cap=100_000),
        "queries": In("[1, inf)", cap=100_000),
        "target": OneOf("sine", "ridge", "bump", "linear", "radial", "zero"),
        "order": OneOf("best-first", "reversed"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    task = RegressionTask(d=int(p.d), target=p.target, noise=float(p.noise))
    n, g = int(p.n), point.generator()
    Q = task.sample_x(int(p.queries), g)
    fQ = task.f(Q)
    if p.order not in ("best-first", "reversed"):
        raise ValueError(f"order: expected 'best-first' or 'reversed', got {p.order!r}")
    step = 1 if p.order == "best-first" else -1
    if p.heads == "sizes":  # quality from the heads' sizes: rates 4/(4 + m_h), measured
        W = size_graded_projections([int(m) for m in p.sizes][::step], task.d, n, float(p.n0), float(p.s0))
    else:  # bias-dominated heads (κ_h < 1/5): MSE decays like n^{−4κ_h} by construction
        W = quality_graded_projections(
            [float(k) for k in p.kappas][::step], task.d, n, float(p.n0), float(p.s0)
        )
    # queries drawn on CPU; the training samples too (inside, from g), the kernel sums on the device
    Q, fQ, W = Q.to(point.device), fQ.to(point.device), W.to(point.device)
    preds = monte_carlo_predictions(task, W, n, Q, int(p.reps), g, scale=1.0)  # (R, H, m)
    err = preds - fQ  # (R, H, m)
    mse, weights = split_half_scheme_mse(err, SCHEMES, rho=float(p.rho))
    test = err[int(p.reps) // 2 :]  # the held-out half every scheme is scored on
    return Result(
        metrics={
            **{f"mse_{s}": v for s, v in mse.items()},
            "optimal_alpha": weights["optimal"].tolist(),
            "mse_heads": test.square().mean(dim=(0, 2)).tolist(),  # per-head MSE (verdicts see metrics)
            "device": device_name(point.device),
        },
        arrays={"mse_heads": test.square().mean(dim=(0, 2)).cpu().numpy()},
    )


def _by_size(params: dict) -> bool:
    return params.get("heads", "sizes") == "sizes"


def _predicted_rates(params: dict) -> list[float]:
    """The heads' rates in the order they ran: 4/(4 + m_h) from their sizes, or 4κ_h as set."""
    step = 1 if params.get("order", "best-first") == "best-first" else -1
    if _by_size(params):
        return size_rates([int(m) for m in params.get("sizes", (1, 2, 3, 4))][::step])
    return [4 * float(k) for k in params["kappas"]][::step]


TOLERANCE = (
    "log–log slope of MSE in n over the grid's range, per seed: geometric and Fibonacci steeper than "
    "uniform in every seed holds; shallower in every seed fails"
)


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    reps = sorted({r.params["rep"] for r in ok})
    ns = sorted({r.params["n"] for r in ok})
    if len(ns) < 3 or not reps:
        return Verdict(
            "inconclusive",
            {"points": len(ok), "failed_points": failed},
            TOLERANCE,
            "fewer than 3 sample sizes",
            branch=BRANCH,
        )
    slopes: dict[str, list[float]] = {s: [] for s in SCHEMES}
    head_slopes: list[list[float]] = []
    for rep in reps:
        rs = sorted((r for r in ok if r.params["rep"] == rep), key=lambda r: r.params["n"])
        if len(rs) < 3:
            continue
        x = [r.params["n"] for r in rs]
        for s in SCHEMES:
            slopes[s].append(loglog_slope(x, [r.metrics[f"mse_{s}"] for r in rs]))
        H = len(rs[0].metrics["mse_heads"])
        head_slopes.append([loglog_slope(x, [r.metrics["mse_heads"][h] for r in rs]) for h in range(H)])
    mse_by_n = {
        s: {int(n): float(np.mean([r.metrics[f"mse_{s}"] for r in ok if r.params["n"] == n])) for n in ns}
        for s in SCHEMES
    }
    numbers = {
        "order": ok[0].params.get("order", "best-first"),
        "n_range": [ns[0], ns[-1]],
        "window_slopes": {s: local_slopes(ns, list(mse_by_n[s].values()), window=2) for s in SCHEMES},
        "slope_mean": {s: float(np.mean(v)) for s, v in slopes.items()},
        "head_slopes_mean": np.mean(head_slopes, axis=0).tolist() if head_slopes else None,
        "head_rates_predicted": _predicted_rates(ok[0].params),
        "head_rates_from": "sizes (4/(4 + m_h))" if _by_size(ok[0].params) else "construction (4κ_h)",
        "steeper_than_uniform": None,
        "mse_by_n": mse_by_n,
        "seeds": len(slopes["uniform"]),
        "failed_points": failed,
    }
    if head_slopes and numbers["head_rates_predicted"]:  # measured rates (−slopes) against the prediction
        measured = [-float(x) for x in np.mean(head_slopes, axis=0)]
        numbers["head_rates_measured"] = measured
        numbers["best_head_rate_measured"] = max(measured)
        numbers["optimal_rate_measured"] = -numbers["slope_mean"]["optimal"]
    steeper = {
        s: sum(a < b - SLOPE_TIE for a, b in zip(slopes[s], slopes["uniform"]))
        for s in ("geometric", "fibonacci")
    }
    k = len(slopes["uniform"])
    numbers["steeper_than_uniform"] = {s: f"{v}/{k}" for s, v in steeper.items()}
    if k and all(v == k for v in steeper.values()):
        status = "holds"
    elif k and any(v == 0 for v in steeper.values()):
        status = "fails"
    else:
        status = "inconclusive"
    return Verdict(status, numbers, TOLERANCE, branch=BRANCH)


_READING = (
    "Heads whose rates come from {head_rates_from}: predicted {head_rates_predicted}, measured "
    "{head_rates_measured} (best head {best_head_rate_measured:.3f}; optimal weights "
    "{optimal_rate_measured:.3f}), order {order}; slopes fitted over n = {n_range}: {slope_mean}; steeper "
    "than uniform in {steeper_than_uniform} seeds; slopes over successive n windows {window_slopes}. With "
    "fixed positive weights every scheme eventually decays at its slowest head's rate, so faster decay holds "
    "over this range only; optimal weights from half the replications, all schemes evaluated on the other "
    "half."
)

CLAIM = Claim(
    id="ensemble.weighting",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="Thm 7.1: with heads sorted by quality (consistency rate), geometric or Fibonacci weights make "
    "the MSE decay faster than uniform averaging when head quality is heterogeneous.",
    version=3,
    params=Params,
    grids={
        "quick": Grid(
            {"n": [100, 300, 1000, 3000, 10000]},
            fixed={
                "d": 4,
                "heads": "sizes",
                "sizes": [1, 2, 3, 4],
                "noise": 0.5,
                "s0": 4.0,
                "n0": 50,
                "rho": 0.5,
                "reps": 40,
                "queries": 200,
            },  # fmt: skip
            seeds=3,
        ),
        "full": Grid(
            {"n": [100, 300, 1000, 3000, 10000, 30000, 100000], "rho": [0.3, 0.5, 0.7]},
            fixed={
                "d": 4,
                "heads": "sizes",
                "sizes": [1, 2, 3, 4],
                "noise": 0.5,
                "s0": 4.0,
                "n0": 50,
                "reps": 100,
                "queries": 400,
            },  # fmt: skip
            seeds=8,
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "homogeneous": Control(
            expect="fails",
            set={"sizes": [2, 2, 2, 2]},
            why="every head the same size: the heads coincide, every scheme gives the same ensemble, so none "
            "decays faster than uniform",
        ),
        "reversed": Control(
            expect="fails",
            set={"order": "reversed"},
            why="heads sorted worst first: front-loaded weights favour the slowest head, so they decay "
            "more slowly than uniform",
        ),
    },
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="Four schemes on the same Monte Carlo head predictions; slopes per seed.",
)
