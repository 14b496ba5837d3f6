"""``ensemble.literal-hdi`` (docs/ensemble.md A3): the paper's HDI formula read literally.

Statement (our reading of the formula, not the paper's prose): with ``G_hh' = W_hᵀ W_h' / d_k`` and
``HDI = 1 − 2/(H(H−1)) Σ_{h<h'} ‖G_hh'‖_F²``, mutually orthogonal heads give 1 at any scale of the
weights, but identical heads give 0 only when the weights are normalised, ``‖W_hᵀ W_h‖_F = d_k``. The
counterexample: identical heads ``W_h = c·U`` (``U`` with orthonormal columns) give
``1 − c⁴/d_k`` — ``1 − 1/d_k`` for unit-norm frames (0.5 at ``d_k = 2``), below 0 once ``c⁴ > d_k`` —
so the literal formula calls identical unit-norm heads diverse, which is why the project's default HDI is
the subspace form.

Each point draws, at its ``(H, d, d_k)`` and scale ``c``, four stacks of heads and computes their
literal HDI with :func:`attnlab.core.geometry.diversity` (``form="raw"``):

* identical frames ``W_h = c·U``: held against the closed form ``1 − c⁴/d_k``
  (``pred("identical_overlap", c⁴/d_k)``);
* mutually orthogonal frames ``W_h = c·U_h``: against 1;
* identical Gaussian weights ``W_h = A`` (entries N(0, 1/d)): against ``1 − ‖AᵀA‖_F²/d_k²``, the
  Frobenius norm from numpy (an independent computation of the same overlap);
* the same ``A`` normalised, ``A·(d_k/‖AᵀA‖_F)^{1/2}``: against 0.

Verdict rule (branch "closed forms"): the largest absolute difference over every point and case below
``TOL`` holds; above it fails. Grade ``numerics``: two computations of one formula (the code against
closed forms); it checks the reading of the formula and the code, not a statement about attention.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.claims.ensemble._common import split
from attnlab.core.geometry import diversity
from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict
from attnlab.ensemble.layouts import projection_layout

__all__ = ["CLAIM", "Params", "run", "verdict"]

# float64: an overlap ‖WᵀW'‖_F²/d_k² sums d_k² products of d-term dot products of O(c²) entries, a relative
# rounding of about d·eps ≈ 1e-14 at d = 64 on values up to c⁴ ≈ 16: 1e-11 absolute leaves a margin of 10
TOL = 1e-11
BRANCH = "closed forms"
CASES = ("identical", "orthogonal", "gaussian", "normalised")


@dataclass(frozen=True)
class Params:
    shape: tuple[int, ...] = (4, 16, 2)  # (H heads, d input dimension, d_k per-head dimension)
    c: float = 1.0  # scale of the frames W_h = c·U_h

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "shape": In("[1, inf)", cap=4096, length="[3, 3]"),
        "c": In("(0, inf)"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    H, d, d_k = (int(v) for v in p.shape)
    if H < 2 or H * d_k > d:
        raise ValueError(f"shape: expected H >= 2 and H·d_k <= d (orthogonal heads), got {p.shape}")
    c = float(p.c)
    g = point.generator()
    ortho = projection_layout("orthogonal", H, d, d_k, c, generator=g)  # (H, d, d_k) c·U_h, U_hᵀU_h' = 0
    same = ortho[:1].expand(H, d, d_k).clone()  # (H, d, d_k) every head c·U_0
    A = torch.randn(d, d_k, generator=g, dtype=torch.float64) / math.sqrt(d)  # (d, d_k)
    gauss = A.expand(H, d, d_k).clone()
    a = A.numpy()
    fro = float(np.linalg.norm(a.T @ a, "fro"))  # ‖AᵀA‖_F by numpy
    normed = gauss * math.sqrt(d_k / fro)  # ‖WᵀW‖_F = d_k
    hdi = {
        "identical": diversity(same, form="raw").hdi,
        "orthogonal": diversity(ortho, form="raw").hdi,
        "gaussian": diversity(gauss, form="raw").hdi,
        "normalised": diversity(normed, form="raw").hdi,
    }
    return Result(
        metrics={
            **{f"hdi_{k}": v for k, v in hdi.items()},
            "gaussian_overlap_numpy": fro**2 / d_k**2,  # ‖AᵀA‖_F²/d_k², the overlap of identical heads A
            "c": c,
            "d_k": d_k,
        }
    )


TOLERANCE = (
    f"|literal HDI − closed form| < {TOL:g} at every point: identical frames 1 − c⁴/d_k, orthogonal "
    "frames 1, identical Gaussian weights 1 − ‖AᵀA‖_F²/d_k², the same normalised 0"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok, failed = split(rows)
    if not ok:
        return Verdict("inconclusive", {"points": 0, "failed_points": failed}, TOLERANCE, "no point finished")
    err = {k: 0.0 for k in CASES}
    unit = {}  # the counterexample: identical unit-norm frames (c = 1) by d_k
    lowest, smallest = math.inf, math.inf  # smallest: the smallest predicted overlap c⁴/d_k
    for r in ok:
        m = r.metrics
        c, d_k = float(m["c"]), int(m["d_k"])
        want = {
            "identical": 1.0 - pred("identical_overlap", c**4 / d_k),
            "orthogonal": 1.0,
            "gaussian": 1.0 - m["gaussian_overlap_numpy"],
            "normalised": 0.0,
        }
        for k in CASES:
            err[k] = max(err[k], abs(m[f"hdi_{k}"] - want[k]))
        if c == 1.0:
            unit[d_k] = m["hdi_identical"]
        lowest = min(lowest, m["hdi_identical"])
        smallest = min(smallest, abs(pred("identical_overlap", c**4 / d_k)))
    worst = max(err.values())
    numbers = {
        "max_abs_err": worst,
        "max_abs_err_by_case": err,
        "identical_unit_frames_hdi_by_d_k": dict(sorted(unit.items())),
        "lowest_identical_hdi": lowest,
        "points": len(ok),
        "failed_points": failed,
    }
    status = "holds" if worst < TOL else "fails"
    band = TOL / smallest if smallest > 0 else None  # the tolerance as a fraction of the smallest prediction
    if failed and status == "holds":
        return Verdict(
            "inconclusive", numbers, TOLERANCE, f"{failed} point(s) failed", branch=BRANCH, band=band
        )
    return Verdict(status, numbers, TOLERANCE, branch=BRANCH, band=band)


_READING = (
    "Literal HDI against its closed forms over {points} points: largest difference {max_abs_err:.1e} "
    "(by case {max_abs_err_by_case}). Identical unit-norm frames (c = 1) get HDI 1 − 1/d_k = "
    "{identical_unit_frames_hdi_by_d_k} instead of 0, and identical frames at the largest c go down to "
    "{lowest_identical_hdi:.3f}: the formula reads diversity only for normalised weights."
)

CLAIM = Claim(
    id="ensemble.literal-hdi",
    kind="theorem",
    grade="numerics",
    paper="A",
    statement="The HDI formula read literally (G_hh' = W_hᵀW_h'/d_k, HDI = 1 − mean ‖G_hh'‖_F²) gives 1 for "
    "orthogonal heads at any scale, but 0 for identical heads only when ‖W_hᵀW_h‖_F = d_k: identical frames "
    "c·U give 1 − c⁴/d_k.",
    version=2,
    params=Params,
    grids={
        "quick": Grid({"shape": [[4, 16, 2], [3, 12, 4], [8, 64, 8]], "c": [0.5, 1.0, 2.0]}),
        "full": Grid(
            {"shape": [[4, 16, 2], [3, 12, 4], [8, 64, 8], [12, 384, 32]], "c": [0.5, 1.0, 2.0, 3.0]}
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"identical_overlap": "the literal overlap c⁴/d_k of two identical frames c·U"},
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="Literal HDI of identical, orthogonal, Gaussian and normalised heads against closed forms.",
)
