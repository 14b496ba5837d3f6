"""``models.principal-angles`` (finding): principal angles between trained heads' subspaces.

Paper B's summary motivates Thm 39 with "trained transformers rarely have exactly orthogonal head
subspaces: principal angles are typically 70–85°". Measured here on the bundled all-MiniLM-L6-v2:
for every layer and every pair of heads, the principal angles between the column spaces of their
key (and query) projections ``W_K^h`` (d_model × d_head), with :func:`attnlab.core.angles.principal_angles`;
beside them, the same statistic for independent uniformly random subspaces of the same shapes
(:func:`attnlab.core.nulls.null_principal_angles`).

Verdict rule (stated before the numbers): on the key subspaces pooled over layers and pairs, holds
when the median principal angle lies in [70°, 85°] and at least half of all angles lie in that band;
fails otherwise; inconclusive when no angle could be computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    model: str = "minilm"  # a checkpoint folder or "minilm" (the bundled all-MiniLM-L6-v2)
    band_lo: float = 70.0  # the stated band of principal angles (degrees)
    band_hi: float = 85.0
    null_pairs: int = 400  # random subspace pairs of the same shapes for the null
    dtype: Literal["float32", "float64"] = "float64"  # precision of the angle computation

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "band_lo": In("[0, 90]"),
        "band_hi": In("[0, 90]"),
        "null_pairs": In("[1, inf)", cap=1_000_000),
    }


def _angles(W: torch.Tensor) -> np.ndarray:
    """All principal angles (degrees) between the column spaces of every pair of heads, W (H, d, k)."""
    from attnlab.core.angles import principal_angles

    out = [principal_angles(W[a], W[b]) for a in range(W.shape[0]) for b in range(a + 1, W.shape[0])]
    return np.degrees(torch.cat(out).cpu().numpy()) if out else np.zeros(0)


def run(point: Point) -> Result:
    from attnlab import models
    from attnlab.core.nulls import null_principal_angles

    p: Params = point.p
    heads = models.load(p.model, dtype=torch.float64 if p.dtype == "float64" else torch.float32)
    k_by_layer, q_by_layer = [], []
    for i in range(heads.n_layers):
        layer = heads.layers[i]
        k_by_layer.append(_angles(layer.W_K.to(torch.float64)))
        q_by_layer.append(_angles(layer.W_Q.to(torch.float64)))
    null = null_principal_angles(heads.d_model, heads.d_head, p.null_pairs, generator=point.generator())
    null = null.numpy().ravel()
    ak, aq = np.concatenate(k_by_layer), np.concatenate(q_by_layer)

    def band(a: np.ndarray) -> float:
        return float(((a >= p.band_lo) & (a <= p.band_hi)).mean()) if a.size else math.nan

    return Result(
        metrics={
            "model": heads.name if hasattr(heads, "name") else p.model,
            "d_model": heads.d_model,
            "d_head": heads.d_head,
            "median_k": float(np.median(ak)),
            "median_q": float(np.median(aq)),
            "median_null": float(np.median(null)),
            "band_fraction_k": band(ak),
            "band_fraction_q": band(aq),
            "band_fraction_null": band(null),
            "median_k_by_layer": [float(np.median(a)) for a in k_by_layer],
            "quantiles_k": np.quantile(ak, [0.1, 0.25, 0.5, 0.75, 0.9]).tolist(),
            "quantiles_null": np.quantile(null, [0.1, 0.25, 0.5, 0.75, 0.9]).tolist(),
            "device": "cpu",
        },
        arrays={"angles_k": ak, "angles_q": aq, "angles_null": null},
    )


TOLERANCE = "median key-subspace angle in [70°, 85°] and at least half of the angles in that band"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok = [r for r in rows if r.ok and r.metrics.get("median_k") is not None]
    if not ok:
        return Verdict("inconclusive", {}, TOLERANCE, "no row computed.")
    m = ok[0].metrics
    lo, hi = ok[0].params.get("band_lo", 70.0), ok[0].params.get("band_hi", 85.0)
    keys = ("model", "median_k", "median_q", "median_null", "band_fraction_k", "band_fraction_q")
    nums = {k: m[k] for k in (*keys, "band_fraction_null")}
    for k in ("median_k_by_layer", "quantiles_k", "quantiles_null"):
        nums[k] = [round(v, 2) for v in m[k]]
    nums.update(band_lo=lo, band_hi=hi)
    status = "holds" if lo <= m["median_k"] <= hi and m["band_fraction_k"] >= 0.5 else "fails"
    return Verdict(status, nums, TOLERANCE, "")


_EXPLAIN = (
    "{model}: principal angles between key subspaces of head pairs have median {median_k:.1f}° (quantiles "
    "10-90% {quantiles_k}), {band_fraction_k:.2f} of them in [{band_lo:g}°, {band_hi:g}°]; queries "
    "{median_q:.1f}°. Random subspaces of the same shapes: median {median_null:.1f}°, "
    "{band_fraction_null:.2f} in the band. Median per layer {median_k_by_layer}."
)
CLAIM = Claim(
    id="models.principal-angles",
    kind="finding",
    grade="evidence",
    paper="B",
    statement="Paper B's premise for Thm 39: trained transformers' head subspaces are not orthogonal, their "
    "principal angles are typically 70–85° (measured on the bundled all-MiniLM-L6-v2).",
    version=1,
    params=Params,
    grids={
        "quick": Grid(fixed={"model": "minilm"}),
        "full": Grid(fixed={"model": "minilm", "null_pairs": 4000}),
    },
    run=run,
    verdict=verdict,
    regime="key and query subspaces of a trained encoder, pairs of heads within a layer",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
