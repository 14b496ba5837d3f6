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
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attnlab.claims.base import Claim, Grid, Point, Result, Row, Verdict

__all__ = ["CLAIMS", "MINILM_DIVERSITY", "draw_figures"]

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


def _run(point: Point) -> Result:
    from attnlab import diagnose as dg
    from attnlab import models

    source = point.params.get("model", "minilm")
    heads = models.load(source, dtype=_dtype(point.params.get("dtype", "float64")))
    traces = None
    if point.params.get("text", True):
        from attnlab.models.trace import trace_text

        # the model's forward pass over a few sentences stays on CPU (a small float32 run): the
        # hidden states and attention maps are then the same inputs on every device
        n = int(point.params.get("sentences", len(dg.SENTENCES)))
        traces = trace_text(source, dg.SENTENCES[:n])
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


def decide(hdi: Sequence[float], hdi_null: Sequence[float], z: Sequence[float]) -> tuple[str, dict[str, Any]]:
    """The verdict rule of the module docstring on per-layer key HDI, nulls and z-scores."""
    pts = [(h, n, zz) for h, n, zz in zip(hdi, hdi_null, z) if all(_finite(v) for v in (h, n, zz))]
    L = len(pts)
    below = sum(1 for _, _, zz in pts if zz < _Z_CUT)
    at_or_above_null = sum(1 for h, n, _ in pts if h >= n)
    numbers = {
        "layers": L,
        "layers_z_below_-3": below,
        "layers_hdi_at_or_above_null": at_or_above_null,
        "hdi_k_per_layer": [round(h, 6) for h, _, _ in pts],
        "z_per_layer": [round(zz, 2) for _, _, zz in pts],
        "hdi_null": pts[0][1] if pts else None,
        "median_z": float(np.median([zz for _, _, zz in pts])) if pts else None,
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


def _verdict(rows: Sequence[Row]) -> Verdict:
    ok = [r for r in rows if r.ok]
    failed = len(rows) - len(ok)
    tol = (
        "z = (HDI_K − HDI_null)/sd_null per layer; fails: z < −3 in most layers; "
        "holds: z ≥ −3 in most layers and HDI ≥ null in at least half"
    )
    if not ok:
        return Verdict("inconclusive", {"failed_rows": failed}, tol, f"no row computed ({failed} failed)")
    m = ok[0].metrics
    status, numbers = decide(m.get("hdi_k", []), m.get("hdi_null", []), m.get("hdi_k_z", []))
    numbers["failed_rows"] = failed
    for key in (
        "hdi_q_z",
        "hdi_v_z",
        "hdi_ov_z",
        "mean_angle_k_deg",
        "qk_rank90",
        "radial_form3",
        "entropy_ratio",
    ):
        if key in m:
            numbers[f"{key}_mean"] = round(float(np.nanmean(np.asarray(m[key], dtype=float))), 4)
    if "null_median_angle_deg" in m:
        numbers["null_median_angle_deg"] = round(float(m["null_median_angle_deg"][0]), 3)
    note = (
        f"{m.get('model', '?')}: key-subspace HDI per layer {numbers['hdi_k_per_layer']} against the "
        f"random-subspace null {numbers['hdi_null']:.4f} (z {numbers['z_per_layer']}). "
        + (
            "Trained heads share key directions far more than random subspaces would: the reading that "
            "training drives heads to orthogonal subspaces is not borne out here."
            if status == "fails"
            else ""
        )
        + (f" {failed} row(s) failed and were ignored." if failed else "")
    )
    return Verdict(status, numbers, tol, note.strip())


# ------------------------------------------------------------------------------------------------
# figures (drawn from metrics/arrays only; shared with ``attnlab inspect --figures``)


def _fig(nrows: int, ncols: int, w: float = 3.0, h: float = 2.6):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w * ncols, h * nrows), constrained_layout=True)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _grid(L: int) -> tuple[int, int]:
    ncols = min(L, 4)
    return (L + ncols - 1) // ncols, ncols


def draw_figures(
    arrays: Mapping[str, np.ndarray], metrics: Mapping[str, Any], title: str = ""
) -> dict[str, Any]:
    """Overlap heatmaps per layer, angle histograms against the null, QK spectra, HDI per layer.

    ``arrays`` as in :class:`attnlab.diagnose.Diagnosis` (``overlap_k``, ``angles_k_deg``,
    ``null_angles_deg``, ``qk_sv``, ``qk_edge``); ``metrics`` holds per-layer lists ``hdi_k``,
    ``hdi_null``, ``hdi_null_sd`` (and optionally ``hdi_q``, ``hdi_v``, ``hdi_ov``).
    """
    figs: dict[str, Any] = {}
    name = title or str(metrics.get("model", "model"))
    ov = np.asarray(arrays.get("overlap_k", np.zeros((0, 0, 0))))
    L = ov.shape[0]
    if L and ov.shape[1]:
        nr, nc = _grid(L)
        fig, axes = _fig(nr, nc)
        vmax = float(np.max(ov[:, ~np.eye(ov.shape[1], dtype=bool)])) if ov.shape[1] > 1 else 1.0
        for i in range(nr * nc):
            ax = axes[i // nc][i % nc]
            if i >= L:
                ax.set_axis_off()
                continue
            m = ov[i].copy()
            np.fill_diagonal(m, np.nan)
            im = ax.imshow(m, vmin=0.0, vmax=vmax, cmap="viridis")
            ax.set_title(f"layer {i}", fontsize=9)
            ax.set_xlabel("head")
            ax.set_ylabel("head")
        fig.colorbar(im, ax=axes, shrink=0.8, label="key-subspace overlap s_hh' (dimensionless)")
        fig.suptitle(f"{name}: pairwise key-subspace overlaps (null mean = d_head/d_model)")
        figs["overlap_k"] = fig
    ang = np.asarray(arrays.get("angles_k_deg", np.zeros((0, 0))))
    null = np.asarray(arrays.get("null_angles_deg", np.zeros(0))).ravel()
    if ang.size:
        nr, nc = _grid(ang.shape[0])
        fig, axes = _fig(nr, nc)
        bins = np.linspace(0, 90, 46)
        for i in range(nr * nc):
            ax = axes[i // nc][i % nc]
            if i >= ang.shape[0]:
                ax.set_axis_off()
                continue
            a = ang[i][np.isfinite(ang[i])]
            ax.hist(a, bins=bins, density=True, alpha=0.6, label="trained heads")
            if null.size:
                ax.hist(null, bins=bins, density=True, histtype="step", color="k", label="random subspaces")
            ax.set_title(f"layer {i}", fontsize=9)
            ax.set_xlabel("principal angle (degrees)")
            ax.set_ylabel("density (1/degree)")
        axes[0][0].legend(fontsize=7, loc="upper left")
        fig.suptitle(f"{name}: principal angles between key subspaces vs the random-subspace null")
        figs["angles_k"] = fig
    sv = np.asarray(arrays.get("qk_sv", np.zeros((0, 0, 0))))
    edge = np.asarray(arrays.get("qk_edge", np.zeros((0, 0))))
    if sv.size:
        nr, nc = _grid(sv.shape[0])
        fig, axes = _fig(nr, nc)
        idx = np.arange(1, sv.shape[2] + 1)
        for i in range(nr * nc):
            ax = axes[i // nc][i % nc]
            if i >= sv.shape[0]:
                ax.set_axis_off()
                continue
            for h in range(sv.shape[1]):
                ax.semilogy(idx, sv[i, h], lw=0.8, alpha=0.7)
            if edge.size:
                ax.axhline(float(np.mean(edge[i])), color="k", ls="--", lw=1, label="mean fitted bulk edge")
            ax.set_title(f"layer {i}", fontsize=9)
            ax.set_xlabel("index i")
            ax.set_ylabel("σ_i of W_Q W_Kᵀ/√d_head")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{name}: spectra of each head's bilinear form (one line per head)")
        figs["qk_spectra"] = fig
    hdi = metrics.get("hdi_k")
    if hdi:
        fig, axes = _fig(1, 1, w=5.0, h=3.4)
        ax = axes[0][0]
        layers = np.arange(len(hdi))
        for key, label in (("hdi_k", "K"), ("hdi_q", "Q"), ("hdi_v", "V"), ("hdi_ov", "OV")):
            if metrics.get(key):
                ax.plot(layers, metrics[key], "o-", label=f"HDI {label}")
        nullv = np.asarray(metrics["hdi_null"], dtype=float)
        sd = np.asarray(metrics.get("hdi_null_sd", np.zeros_like(nullv)), dtype=float)
        ax.plot(layers, nullv, "k--", lw=1, label="null 1 − d_head/d_model")
        ax.fill_between(layers, nullv - 3 * sd, nullv + 3 * sd, color="k", alpha=0.15, label="null ± 3 sd")
        ax.set_xlabel("layer")
        ax.set_ylabel("head diversity index (subspace form)")
        ax.legend(fontsize=7)
        ax.set_title(f"{name}: HDI per layer against the random-subspace null")
        figs["hdi_layers"] = fig
    return figs


def _figures(rows: Sequence[Row]) -> dict[str, Any]:
    ok = [r for r in rows if r.ok]
    if not ok:
        return {}
    return draw_figures(ok[0].arrays, ok[0].metrics)


MINILM_DIVERSITY = Claim(
    id="models.minilm-diversity",
    kind="finding",
    paper="A",
    statement=(
        "Reading of Thm 5.1 (decorrelation optimality): training drives heads towards orthogonal "
        "subspaces, so in the trained all-MiniLM-L6-v2 the key subspaces' HDI per layer is at least "
        "the random-subspace null 1 − d_head/d_model (z ≥ −3 in most layers)."
    ),
    version=1,
    grids={
        "quick": Grid(fixed={"model": "minilm", "text": True, "sentences": 6, "dtype": "float64"}),
        "full": Grid(fixed={"model": "minilm", "text": True, "sentences": 6, "dtype": "float64"}),
    },
    run=_run,
    verdict=_verdict,
    figures=_figures,
    description=(
        "The bundled all-MiniLM-L6-v2 (6 layers × 12 heads, d_model 384, d_head 32) read offline. "
        "Per layer: HDI of the Q, K, V and OV subspaces against the null and its exact sd, principal "
        "angles against those of random subspaces, spectra of W_Q W_Kᵀ (rank at 90% energy, outliers "
        "above a fitted bulk edge), paper B's M_h, V_h defects and radial dominance on the model's own "
        "hidden states for six bundled sentences, and attention entropy against log n. The point is "
        "deterministic (no randomness but the null's fixed-seed sample), so both profiles are one point."
    ),
)

CLAIMS: list[Claim] = [MINILM_DIVERSITY]
