"""Figures of the real-model claims (and of ``attnlab inspect --figures``), from stored rows only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from attnlab.engine.protocol import Row

__all__ = ["FIGURES", "draw_figures"]


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
        # left: HDI per layer with the null's mean and ±3 sd band (drawn at least 0.004 wide, so that
        # a null whose sd is ~1e-3 stays visible); right: z-scores, where the ±3 band is to scale.
        fig, axes = _fig(1, 2, w=4.6, h=3.6)
        ax, az = axes[0][0], axes[0][1]
        layers = np.arange(len(hdi))
        nullv = np.asarray(metrics["hdi_null"], dtype=float)
        sd = np.asarray(metrics.get("hdi_null_sd", np.zeros_like(nullv)), dtype=float)
        half = np.maximum(3 * sd, 0.002)
        ax.fill_between(
            layers, nullv - half, nullv + half, color="0.6", alpha=0.45, lw=0, label="null ± 3 sd"
        )
        ax.plot(layers, nullv, color="k", ls="--", lw=1.2, label="null 1 − d_head/d_model")
        markers = {"hdi_k": "o", "hdi_q": "s", "hdi_v": "^", "hdi_ov": "D"}
        for key, label in (("hdi_k", "K"), ("hdi_q", "Q"), ("hdi_v", "V"), ("hdi_ov", "OV")):
            if metrics.get(key):
                ax.plot(layers, metrics[key], marker=markers[key], ms=4, lw=1, label=f"HDI {label}")
                zk = f"{key}_z"
                if metrics.get(zk):
                    az.plot(layers, metrics[zk], marker=markers[key], ms=4, lw=1, label=f"z {label}")
        if metrics.get("hdi_k_data"):  # the key HDI in the metric of the data entering the layer
            ax.plot(
                layers, metrics["hdi_k_data"], marker="o", mfc="none", ms=4, lw=1, label="HDI K (data metric)"
            )
            ax.plot(layers, metrics["hdi_k_data_null"], color="C4", ls=":", lw=1.2, label="data-metric null")
            if metrics.get("hdi_k_data_z"):
                az.plot(layers, metrics["hdi_k_data_z"], marker="o", mfc="none", ms=4, lw=1, label="z K data")
        ax.set_xlabel("layer")
        ax.set_ylabel("head diversity index (subspace form)")
        ax.set_title(f"{name}: HDI per layer", fontsize=10)
        az.axhspan(-3, 3, color="0.6", alpha=0.45, lw=0, label="|z| ≤ 3")
        az.axhline(0, color="k", ls="--", lw=1.2)
        az.set_xlabel("layer")
        az.set_ylabel("z = (HDI − null)/sd_null")
        az.set_title("against each form's null (data metric: Gaussian heads in it)", fontsize=10)
        for a in (ax, az):
            a.set_xticks(layers)
        handles, labels = ax.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(6, len(labels)), fontsize=8)
        figs["hdi_layers"] = fig
    return figs


def minilm_diversity(rows: Sequence[Row]) -> dict[str, Any]:
    """Figures of ``models.minilm-diversity`` from its stored row."""
    ok = [r for r in rows if r.ok and not r.control]
    if not ok:
        return {}
    return draw_figures(ok[0].arrays, ok[0].metrics)


def principal_angles(rows: Sequence[Row]) -> dict[str, Any]:
    """Histogram of principal angles between head pairs (keys, queries) against random subspaces."""
    ok = [r for r in rows if r.ok and not r.control and "angles_k" in r.arrays]
    if not ok:
        return {}
    fig, axes = _fig(1, 1, w=5.0, h=3.4)
    ax, a = axes[0][0], ok[0].arrays
    bins = np.linspace(0, 90, 46)
    ax.hist(a["angles_k"], bins=bins, density=True, alpha=0.6, label="key subspaces")
    ax.hist(a["angles_q"], bins=bins, density=True, histtype="step", label="query subspaces")
    ax.hist(a["angles_null"], bins=bins, density=True, histtype="step", color="k", label="random subspaces")
    ax.axvspan(70, 85, color="k", alpha=0.08, label="70–85° (paper B)")
    ax.set(xlabel="principal angle (degrees)", ylabel="density (1/degree)", title="angles between head pairs")
    ax.legend(fontsize=7)
    return {"principal_angles": fig}


FIGURES = {"models.minilm-diversity": minilm_diversity, "models.principal-angles": principal_angles}
