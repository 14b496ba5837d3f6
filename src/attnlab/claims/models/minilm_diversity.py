"""Claims about real models: the bundled all-MiniLM-L6-v2 inspected through the three theories.

``models.minilm-diversity`` (kind ``finding``) holds the key subspaces of a trained model against a
reading of paper A's Thm 5.1: if training drives heads towards decorrelated (orthogonal) subspaces,
each layer's key-subspace HDI should sit at or above the random-subspace null ``1 − d_head/d_model``.

Verdict rule (written before looking at the numbers), on the key subspaces' HDI per layer with
``z = (HDI − HDI_null)/sd_null``:
- "fails" when ``z < −3`` in most layers (more than half);
- "holds" when ``z ≥ −3`` in most layers and ``HDI ≥ HDI_null`` in at least half of them;
- "inconclusive" otherwise (including when no row could be computed).
The numbers are reported either way, with the other diagnostics (Q/V/OV diversity, spectra of
``W_Q W_Kᵀ``, radial dominance on hidden states, attention entropy) beside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from attnlab.engine.params import In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "decide", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    model: str = "minilm"  # a checkpoint folder or "minilm" (the bundled all-MiniLM-L6-v2)
    text: bool = True  # run the model on bundled sentences for the token-level diagnostics
    sentences: int = 6  # how many bundled sentences
    dtype: Literal["float32", "float64"] = "float64"  # precision of the weight diagnostics

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "sentences": In("[1, inf)", cap=10_000),
    }


_Z_CUT = -3.0
_LAYER_KEYS = (
    "hdi_k",
    "hdi_k_z",
    "hdi_k_weight",
    "hdi_q",
    "hdi_q_z",
    "hdi_v",
    "hdi_v_z",
    "hdi_ov",
    "hdi_ov_z",
    "hdi_null",
    "hdi_null_sd",
    "hdi_k_data",
    "hdi_k_data_null",
    "hdi_k_data_null_sd",
    "hdi_k_data_z",
    "mean_angle_k_deg",
    "median_angle_k_deg",
    "null_median_angle_deg",
    "qk_rank90",
    "qk_outliers",
    "qk_outlier_energy",
    "sym_defect",
    "value_cos",
    "mm_cross_mean",
    "radial_form1",
    "radial_form2",
    "radial_form3",
    "entropy_ratio",
)
_HEAD_KEYS = ("radial_form3_tokens", "entropy_ratio", "qk_rank90", "overlap_k")


def run(point: Point) -> Result:
    from attnlab import diagnose as dg
    from attnlab import models

    p: Params = point.p
    source = p.model
    heads = models.load(source, dtype=_dtype(p.dtype))
    traces = None
    if p.text:
        from attnlab.models.trace import trace_text

        # the model's forward pass over a few sentences stays on CPU (a small float32 run): the
        # hidden states and attention maps are then the same inputs on every device
        traces = trace_text(source, dg.SENTENCES[: p.sentences])
    # the diagnostics (QR, SVDs, principal angles, radial dominance in float64) run on the device
    heads = heads.to(device=point.device)
    diag = dg.diagnose(heads, traces)
    metrics: dict[str, Any] = {
        k: diag.meta[k] for k in ("model", "architecture", "n_layers", "n_heads", "d_model", "d_head")
    }
    metrics["device"] = str(heads.layers[0].W_Q.device)
    for key in _LAYER_KEYS:
        if key in diag.layers[0]:
            metrics[key] = [float(r[key]) for r in diag.layers]
    metrics["token_level"] = diag.text
    arrays = dict(diag.arrays)
    L, H = diag.meta["n_layers"], diag.meta["n_heads"]
    for key in _HEAD_KEYS:
        if key in diag.heads[0]:
            arrays[f"head_{key}"] = np.array([r[key] for r in diag.heads], dtype=np.float64).reshape(L, H)
    return Result(metrics=metrics, arrays=arrays)


def _dtype(name: str):
    import torch

    if name not in ("float32", "float64"):
        raise ValueError(f"dtype: expected float32 or float64, got {name!r}")
    return torch.float64 if name == "float64" else torch.float32


def decide(
    hdi: Sequence[float],
    hdi_null: Sequence[float],
    null_sd: Sequence[float],
    pred: Predict = NO_PERTURBATION,
) -> tuple[str, dict[str, Any]]:
    """The verdict rule of the module docstring on per-layer key HDI and the null's mean and sd.

    ``z = (HDI − null)/sd`` is computed here from the null passed through ``pred`` (the prediction
    ``hdi_null``), so a perturbed null re-decides the layers.
    """
    pts = [
        (h, pred("hdi_null", n), s)
        for h, n, s in zip(hdi, hdi_null, null_sd)
        if all(_finite(v) for v in (h, n, s)) and s > 0
    ]
    z = [(h - n) / s for h, n, s in pts]
    L = len(pts)
    below = sum(1 for zz in z if zz < _Z_CUT)
    at_or_above_null = sum(1 for h, n, _ in pts if h >= n)
    numbers = {
        "layers": L,
        "layers_z_below_-3": below,
        "layers_hdi_at_or_above_null": at_or_above_null,
        "hdi_k_per_layer": [round(h, 6) for h, _, _ in pts],
        "z_per_layer": [round(zz, 2) for zz in z],
        "hdi_null": pts[0][1] if pts else None,
        "median_z": float(np.median(z)) if pts else None,
        # the rule's tolerance as a fraction of the prediction: |z| = 3 null standard deviations
        "band": float(-_Z_CUT * np.median([s for _, _, s in pts]) / pts[0][1]) if pts else None,
    }
    if L == 0:
        return "inconclusive", numbers
    if below > L / 2:
        return "fails", numbers
    if (L - below) > L / 2 and at_or_above_null >= L / 2:
        return "holds", numbers
    return "inconclusive", numbers


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


TOLERANCE = (
    "z = (HDI_K − HDI_null)/sd_null per layer; fails: z < −3 in most layers; "
    "holds: z ≥ −3 in most layers and HDI ≥ null in at least half"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok = [r for r in rows if r.ok]
    failed = len(rows) - len(ok)
    if not ok:
        return Verdict(
            "inconclusive", {"failed_rows": failed}, TOLERANCE, f"no row computed ({failed} failed)"
        )
    m = ok[0].metrics
    status, numbers = decide(m.get("hdi_k", []), m.get("hdi_null", []), m.get("hdi_null_sd", []), pred)
    numbers["model"] = m.get("model", "?")
    numbers["failed_rows"] = failed
    for key in (
        "hdi_q_z",
        "hdi_v_z",
        "hdi_ov_z",
        "hdi_k_data_z",
        "mean_angle_k_deg",
        "qk_rank90",
        "radial_form3",
        "entropy_ratio",
    ):
        if key in m:
            numbers[f"{key}_mean"] = round(float(np.nanmean(np.asarray(m[key], dtype=float))), 4)
    if "null_median_angle_deg" in m:
        numbers["null_median_angle_deg"] = round(float(m["null_median_angle_deg"][0]), 3)
    # every outcome of the rule goes through the per-layer count of z against −3 ("layer z")
    return Verdict(
        status,
        numbers,
        TOLERANCE,
        f"{failed} row(s) failed and were ignored." if failed else "",
        branch="layer z",
        band=numbers["band"],
    )


_READING = (
    "{model}: key-subspace HDI per layer {hdi_k_per_layer} against the random-subspace null "
    "{hdi_null:.4f} (z {z_per_layer})."
)

CLAIM = Claim(
    id="models.minilm-diversity",
    kind="finding",
    grade="evidence",
    paper="A",
    statement=(
        "Reading of Thm 5.1 (decorrelation optimality): training drives heads towards orthogonal "
        "subspaces, so in the trained all-MiniLM-L6-v2 the key subspaces' HDI per layer is at least "
        "the random-subspace null 1 − d_head/d_model (z ≥ −3 in most layers)."
    ),
    version=2,
    params=Params,
    grids={
        "quick": Grid(fixed={"model": "minilm", "text": True, "sentences": 6, "dtype": "float64"}),
        "full": Grid(fixed={"model": "minilm", "text": True, "sentences": 6, "dtype": "float64"}),
    },
    run=run,
    verdict=verdict,
    predictions={"hdi_null": "the random-subspace null mean 1 − d_head/d_model of the key-subspace HDI"},
    explain={
        "fails": _READING + " Trained heads share key directions far more than random subspaces would: "
        "the reading that training drives heads to orthogonal subspaces is not borne out here.",
        "holds": _READING + " The key subspaces are at least as diverse as random ones.",
        "inconclusive": _READING + " Neither most layers below the null nor at or above it.",
    },
    description=(
        "The bundled all-MiniLM-L6-v2 (6 layers × 12 heads, d_model 384, d_head 32) read offline. "
        "Per layer: HDI of the Q, K, V and OV subspaces against the null and its exact sd, principal "
        "angles against those of random subspaces, spectra of W_Q W_Kᵀ (rank at 90% energy, outliers "
        "above a fitted bulk edge), paper B's M_h, V_h defects and radial dominance on the model's own "
        "hidden states for six bundled sentences, attention entropy against log n, and the key HDI in "
        "the metric of the hidden states entering each layer (Σ^{1/2} W_K against Gaussian heads in the "
        "same metric, hdi_k_data*) beside the weight-space one. The point is "
        "deterministic (no randomness but the null's fixed-seed sample), so both profiles are one point."
    ),
)
