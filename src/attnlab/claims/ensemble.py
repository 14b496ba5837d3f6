"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.claims.base import Claim, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.nw import nw_estimate

# ---------------------------------------------------------------------------------------------
# ensemble.nw-identity (A1): one attention head is a Nadaraya–Watson estimator.

_NW_TOL = 1e-12  # float64 has eps 2.2e-16; softmax and a length-N reduction lose at most ~N·eps ≈ 1e-13


def _nw_identity_run(point: Point) -> Result:
    N, d, d_k, d_v, batch = (int(v) for v in point["shape"])
    beta = float(point["beta"])
    g = point.generator()
    dt = torch.float64
    m = max(1, N // 2)  # queries per batch member
    X = torch.randn(batch, N, d, generator=g, dtype=dt)  # (B, N, d)  training inputs x_j
    Y = torch.randn(batch, N, d_v, generator=g, dtype=dt)  # (B, N, d_v) targets y_j
    Q = torch.randn(batch, m, d, generator=g, dtype=dt)  # (B, m, d)  queries
    W_Q = torch.randn(d, d_k, generator=g, dtype=dt) / math.sqrt(d)
    W_K = torch.randn(d, d_k, generator=g, dtype=dt) / math.sqrt(d)
    scale = beta / math.sqrt(d_k)  # β times the attention convention 1/√d_k
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
        }
    )


def _nw_identity_verdict(rows: Sequence[Row]) -> Verdict:
    ok = [r for r in rows if r.ok]
    failed = len(rows) - len(ok)
    if not ok:
        return Verdict(
            "inconclusive", {"points": 0, "failed": failed}, f"‖a−b‖/‖b‖ < {_NW_TOL:g}", "no point finished"
        )
    worst = max(ok, key=lambda r: r.metrics["rel_diff"])
    n_over = sum(bool(r.metrics["naive_exp_overflows"]) for r in ok)
    numbers = {
        "max_rel_diff": worst.metrics["rel_diff"],
        "worst_point": dict(worst.params),
        "points": len(ok),
        "points_where_naive_exp_overflows": n_over,
        "failed_points": failed,
    }
    status = "holds" if worst.metrics["rel_diff"] < _NW_TOL and failed == 0 else "fails"
    if failed and worst.metrics["rel_diff"] < _NW_TOL:
        status = "inconclusive"
    note = (
        f"kernel-sum NW estimate vs torch scaled_dot_product_attention over {len(ok)} points "
        f"(float64), {n_over} of them with scores beyond exp's range"
    )
    return Verdict(status, numbers, f"‖a−b‖/‖b‖ < {_NW_TOL:g} at every point", note)


def _nw_identity_figures(rows: Sequence[Row]) -> dict:
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.ok]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    shapes = sorted({tuple(r.params["shape"]) for r in ok})
    for s in shapes:
        sel = sorted((r for r in ok if tuple(r.params["shape"]) == s), key=lambda r: r.params["beta"])
        ax.plot(
            [r.params["beta"] for r in sel],
            [max(r.metrics["rel_diff"], 1e-18) for r in sel],
            "o-",
            label="N={}, d={}, d_k={}, d_v={}, B={}".format(*s),
        )
    ax.axhline(_NW_TOL, color="k", ls="--", lw=1, label="tolerance 1e-12")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("inverse temperature β (scale β/√d_k)")
    ax.set_ylabel("‖NW − SDPA‖ / ‖SDPA‖ (relative, float64)")
    ax.set_title("One head = Nadaraya–Watson estimator")
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    return {"nw_identity": fig}


_SHAPES_QUICK = [[8, 4, 2, 1, 1], [64, 16, 4, 3, 4], [257, 32, 8, 16, 2]]
_SHAPES_FULL = _SHAPES_QUICK + [[1024, 64, 16, 32, 4], [2048, 128, 64, 64, 2], [33, 3, 5, 7, 16]]

NW_IDENTITY = Claim(
    id="ensemble.nw-identity",
    kind="identity",
    paper="A",
    statement="One attention head is a Nadaraya–Watson estimator: softmax(qW_Q(XW_K)ᵀ/√d_k)Y equals the "
    "kernel-weighted average Σ_j K(q,x_j)y_j / Σ_j K(q,x_j) with K = exp(⟨W_Qᵀq, W_Kᵀx⟩/√d_k).",
    version=1,
    grids={
        "quick": Grid({"shape": _SHAPES_QUICK, "beta": [0.01, 1.0, 30.0, 1000.0]}),
        "full": Grid(
            {"shape": _SHAPES_FULL, "beta": [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 1e4]}, seeds=3
        ),
    },
    run=_nw_identity_run,
    verdict=_nw_identity_verdict,
    figures=_nw_identity_figures,
    description="Kernel sums (log-sum-exp stabilised) against torch's fused attention in float64.",
)

CLAIMS: list[Claim] = [NW_IDENTITY]
