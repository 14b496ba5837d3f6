"""``ensemble.nw-identity`` (docs/ensemble.md A1): one attention head is a Nadaraya–Watson estimator.

Statement: ``softmax(q W_Q (X W_K)ᵀ/√d_k) Y`` equals the kernel-weighted average
``Σ_j K(q, x_j) y_j / Σ_j K(q, x_j)`` with ``K = exp(⟨W_Qᵀ q, W_Kᵀ x⟩/√d_k)``.

Verdict rule: "holds" when the kernel-sum estimate matches torch's fused attention to
``‖a − b‖/‖b‖ < 1e-12`` (float64) at every point; "fails" otherwise; "inconclusive" when a point
failed to run and the finished ones agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnlab.claims.ensemble._common import device_name, split
from attnlab.engine.params import In
from attnlab.engine.protocol import Claim, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.nw import nw_estimate

__all__ = ["CLAIM", "Params", "run", "verdict"]

TOL = 1e-12  # float64 has eps 2.2e-16; softmax and a length-N reduction lose at most ~N·eps ≈ 1e-13


@dataclass(frozen=True)
class Params:
    shape: tuple[int, ...] = (8, 4, 2, 1, 1)  # (N keys, d model, d_k, d_v, batch B)
    beta: float = 1.0  # inverse temperature multiplying the attention scale 1/√d_k

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "shape": In("[1, inf)", cap=100_000, length="[5, 5]"),
        "beta": In("(0, inf)"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    N, d, d_k, d_v, batch = (int(v) for v in p.shape)
    g = point.generator()
    dt = torch.float64
    m = max(1, N // 2)  # queries per batch member
    X = torch.randn(batch, N, d, generator=g, dtype=dt)  # (B, N, d)  training inputs x_j
    Y = torch.randn(batch, N, d_v, generator=g, dtype=dt)  # (B, N, d_v) targets y_j
    Q = torch.randn(batch, m, d, generator=g, dtype=dt)  # (B, m, d)  queries
    W_Q = torch.randn(d, d_k, generator=g, dtype=dt) / math.sqrt(d)
    W_K = torch.randn(d, d_k, generator=g, dtype=dt) / math.sqrt(d)
    scale = float(p.beta) / math.sqrt(d_k)  # β times the attention convention 1/√d_k
    X, Y, Q, W_Q, W_K = (t.to(point.device) for t in (X, Y, Q, W_Q, W_K))  # drawn on CPU, computed here
    a = nw_estimate(Q, X, Y, W_Q, W_K, scale=scale)  # (B, m, d_v) from kernel sums
    b = torch.nn.functional.scaled_dot_product_attention(
        (Q @ W_Q).unsqueeze(1), (X @ W_K).unsqueeze(1), Y.unsqueeze(1), scale=scale
    ).squeeze(1)  # (B, m, d_v)
    rel = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))
    max_score = float((scale * (Q @ W_Q) @ (X @ W_K).transpose(-1, -2)).abs().max())
    return Result(
        metrics={
            "rel_diff": rel,
            "max_abs_score": max_score,
            "naive_exp_overflows": bool(max_score > math.log(torch.finfo(dt).max)),
            "kernel_evals": batch * m * N,
            "device": device_name(point.device),
        }
    )


TOLERANCE = f"‖a−b‖/‖b‖ < {TOL:g} at every point"


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    if not ok:
        return Verdict("inconclusive", {"points": 0, "failed": failed}, TOLERANCE, "no point finished")
    worst = max(ok, key=lambda r: r.metrics["rel_diff"])
    n_over = sum(bool(r.metrics["naive_exp_overflows"]) for r in ok)
    numbers = {
        "max_rel_diff": worst.metrics["rel_diff"],
        "worst_point": dict(worst.params),
        "points": len(ok),
        "points_where_naive_exp_overflows": n_over,
        "failed_points": failed,
    }
    status = "holds" if worst.metrics["rel_diff"] < TOL and failed == 0 else "fails"
    if failed and worst.metrics["rel_diff"] < TOL:
        status = "inconclusive"
    return Verdict(status, numbers, TOLERANCE)


_READING = (
    "kernel-sum NW estimate vs torch scaled_dot_product_attention over {points} points (float64), "
    "{points_where_naive_exp_overflows} of them with scores beyond exp's range: worst relative "
    "difference {max_rel_diff:.1e}."
)
_KERNELS = (
    " Kernels: this identity uses attention's own dot-product kernel exp(⟨W_Qᵀq, W_Kᵀx⟩/√d_k); the "
    "other paper-A claims use the Gaussian kernel exp(−‖W_Kᵀq − W_Kᵀx‖²/(2√d_k)) with tied W_Q = W_K. "
    "The two give identical NW weights whenever the projected keys have equal norms (the factor "
    "exp(−‖W_Kᵀx‖²/(2√d_k)) is then the same for every key and cancels; exp(−‖W_Kᵀq‖²/…) cancels "
    "always), which is what attention with normalised keys computes; the Gaussian form keeps a bounded "
    "kernel when key norms vary (Gaussian inputs), where the dot-product kernel's weight concentrates on "
    "the longest keys rather than the nearest ones."
)

SHAPES_QUICK = [[8, 4, 2, 1, 1], [64, 16, 4, 3, 4], [257, 32, 8, 16, 2]]
SHAPES_FULL = SHAPES_QUICK + [[1024, 64, 16, 32, 4], [2048, 128, 64, 64, 2], [33, 3, 5, 7, 16]]

CLAIM = Claim(
    id="ensemble.nw-identity",
    kind="identity",
    paper="A",
    statement="One attention head is a Nadaraya–Watson estimator: softmax(qW_Q(XW_K)ᵀ/√d_k)Y equals the "
    "kernel-weighted average Σ_j K(q,x_j)y_j / Σ_j K(q,x_j) with K = exp(⟨W_Qᵀq, W_Kᵀx⟩/√d_k).",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"shape": SHAPES_QUICK, "beta": [0.01, 1.0, 30.0, 1000.0]}),
        "full": Grid(
            {"shape": SHAPES_FULL, "beta": [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 1e4]}, seeds=3
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": _READING + _KERNELS,
        "fails": _READING + " The identity does not hold to the tolerance." + _KERNELS,
        "inconclusive": "Not every point finished ({failed_points} failed).",
    },
    description="Kernel sums (log-sum-exp stabilised) against torch's fused attention in float64.",
)
