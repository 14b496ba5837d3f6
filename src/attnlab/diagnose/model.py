"""A real model's heads through the three theories: one row per head, one summary per layer.

:func:`diagnose` composes the science: subspace geometry of ``core.geometry`` (paper A), the
spectra of ``W_Q W_Kᵀ`` (paper C), the multi-head dynamics objects (paper B) and, when token
representations are given, radial dominance on the model's hidden states and attention entropy.
Per-layer values are means over heads wherever the quantity is per head.

Subspaces (all column spaces in model space ``R^d``):
``Q``: range(W_Q^h); ``K``: range(W_K^h); ``V``: range(W_V^h); ``OV``: range(V_h) with
``V_h = (W_V W_O)ᵀ``, where the head writes. The OV subspace is represented by the ``d × k`` factor
``F_h = W_Oᵀ L_h`` with ``L_h L_hᵀ = W_VᵀW_V`` (Cholesky): ``F_h F_hᵀ = V_h V_hᵀ``, so ``F_h`` has the
range of ``V_h`` and the same weight-aware overlaps, without forming ``d × d`` matrices. With grouped
K/V the K and V indices use the distinct K/V heads only (expanded copies would count as identical).

HDI needs at least two heads: a layer with one K/V head (multi-query attention) or one head has
null K/V (or all) diversity fields and a note says so. ``hdi_*_weight_z`` holds the weight-aware HDI
against its own null, i.i.d. Gaussian weights of the same shape (``core.nulls.weight_null_hdi``;
the product law for OV), not against the subspace null ``1 − k/d``.

With token representations the key HDI is also measured in the metric of the data entering each
layer (``hdi_k_data``: HDI of ``Σ^{1/2} W_K``, ``Σ`` the covariance of the attention inputs over the
traces' tokens; ``hdi_k_data_null``/``_null_sd``/``_z`` against Gaussian heads in the same metric,
``core.metric.data_metric_diversity``). With fewer tokens than ``d_model`` ``Σ`` is singular and both
the heads and the null live in its range.

Layers are diagnosed one at a time (a streamed :class:`HeadWeights` reads each from its checkpoint
when needed), in float64 on the device of the weights; only the current layer is resident, in the
checkpoint's dtype, with heads promoted to float64 a block at a time for the spectra, flow defects and
cross products and one float64 ``(H, d, k)`` stack at a time for the geometry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnlab.core import geometry, metric
from attnlab.core.heads import HeadWeights
from attnlab.core.seeding import generator
from attnlab.diagnose._blocks import head_blocks, promote, r_factors, scratch
from attnlab.diagnose.entropy import attention_entropy
from attnlab.diagnose.flow import grouped_cross_products, grouped_flow_defects, radial_dominance
from attnlab.diagnose.spectra import spectrum_from_factors

__all__ = [
    "SENTENCES",
    "SUBSPACES",
    "Diagnosis",
    "diagnose",
    "ov_factors",
]

_DT = torch.float64
SUBSPACES = ("q", "k", "v", "ov")

#: A few sentences of ordinary English used for the token-level diagnostics.
SENTENCES: tuple[str, ...] = (
    "The committee postponed its decision until the engineers had measured the bridge again.",
    "A small boat drifted past the harbour lights while the town slept.",
    "Transformers represent each word as a vector and mix those vectors with attention.",
    "She forgot her umbrella, so she waited under the bakery's awning for the rain to stop.",
    "Prices of wheat and barley rose sharply after the dry summer.",
    "If the experiment fails, we will still learn which assumption was wrong.",
)


def ov_factors(W_V: torch.Tensor, W_O: torch.Tensor, kv_index: torch.Tensor | None = None) -> torch.Tensor:
    """``F_h = W_Oᵀ L_h`` ``(..., d, k)``, ``L_h L_hᵀ = W_VᵀW_V``, so ``F_h F_hᵀ = V_h V_hᵀ``.

    Falls back to an eigen-decomposition square root when ``W_VᵀW_V`` is not positive definite.
    ``kv_index`` ``(H,)``: grouped values, ``W_V`` ``(H_kv, d, k)`` unexpanded and head ``h`` using
    ``W_V[kv_index[h]]`` (each ``L`` is computed once per value head). ``(H, d, k)`` stacks in another
    dtype (a bf16 checkpoint) are promoted to float64 a block of heads at a time: the result is the only
    float64 stack formed (the same per-head products).
    """
    blocked = W_V.ndim == 3 and W_O.ndim == 3
    if blocked:
        d, k = W_V.shape[1:]
        G = torch.empty(W_V.shape[0], k, k, dtype=_DT, device=W_V.device)
        buf = scratch(max(W_V.shape[0], W_O.shape[0]), d, k, device=W_V.device)
        for b in head_blocks(*W_V.shape):
            Wv = promote(W_V[b], buf)
            G[b] = Wv.transpose(-1, -2) @ Wv
    else:
        Wv = W_V.to(_DT)
        G = Wv.transpose(-1, -2) @ Wv  # (..., k, k)
        del Wv
    L, info = torch.linalg.cholesky_ex(G)
    if bool((info != 0).any()):
        w, U = torch.linalg.eigh(G)
        L = U * w.clamp_min(0.0).sqrt().unsqueeze(-2)  # (..., k, k), L Lᵀ = G
    if kv_index is not None:
        L = L[kv_index]  # (H, k, k)
    if not blocked:
        return W_O.to(_DT).transpose(-1, -2) @ L  # (..., d, k)
    F = torch.empty(W_O.shape[0], d, k, dtype=_DT, device=W_O.device)  # (H, d, k)
    for b in head_blocks(W_O.shape[0], d, k):
        torch.matmul(promote(W_O[b], buf).transpose(-1, -2), L[b], out=F[b])
    return F


@dataclass(frozen=True)
class Diagnosis:
    """The result of :func:`diagnose`.

    Attributes
    ----------
    meta : dict
        model metadata (``HeadWeights.summary()``).
    layers : tuple of dict
        one summary per layer (means over heads).
    heads : tuple of dict
        one row per (layer, head).
    arrays : dict of str to ndarray
        for figures: ``overlap_k`` ``(L, H_kv, H_kv)``, ``angles_k_deg`` ``(L, P·k)``,
        ``null_angles_deg`` ``(S·k,)``, ``qk_sv`` ``(L, H, k)``, ``qk_edge`` ``(L, H)``,
        ``mm_cross`` ``(L, H, H)``.
    text : bool
        whether token-level diagnostics were computed.
    notes : tuple of str
    """

    meta: dict[str, Any]
    layers: tuple[dict[str, Any], ...]
    heads: tuple[dict[str, Any], ...]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    text: bool = False
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: metadata, ``layers`` (summaries) and notes (the per-head table is separate)."""
        out = dict(self.meta)
        out["layers"] = [dict(r) for r in self.layers]
        out["token_level"] = self.text
        if self.notes:
            out["note"] = "; ".join(self.notes)
        return out


def _pair_means_per_head(values: torch.Tensor, H: int) -> torch.Tensor:
    """``values`` ``(P,)`` in triu order -> per-head mean over the pairs containing the head ``(H,)``."""
    i, j = torch.triu_indices(H, H, offset=1, device=values.device)
    full = torch.zeros(H, H, dtype=_DT, device=values.device)
    full[i, j] = values.to(_DT)
    full[j, i] = values.to(_DT)
    return full.sum(1) / (H - 1)


def _nonbilinear_note(heads: HeadWeights) -> str | None:
    st = heads.stages()
    parts = []
    if st.get("qk_norm"):
        parts.append(f"q/k normalisation ({st['qk_norm']})")
    if st.get("softcap"):
        parts.append(f"logit soft-capping at {st['softcap']}")
    if not parts:
        return None
    return (
        "scores are not a bilinear form of the inputs (" + ", ".join(parts) + "): the weights-only "
        "diagnostics (QK spectra, M_h flow defects, radial dominance) describe W_Q W_Kᵀ without these stages"
    )


def _geometry_rows(
    name: str, stack: torch.Tensor, H: int, r: int, row: dict[str, Any], hrows: list[dict[str, Any]]
) -> Any:
    """Subspace and weight-form diversity of one subspace of one layer into ``row`` and ``hrows``."""
    Hs, d, k = stack.shape
    if Hs < 2:
        for key in ("", "_weight", "_z", "_weight_z", "_null_sd"):
            row[f"hdi_{name}{key}"] = math.nan
        row[f"mean_angle_{name}_deg"] = math.nan
        for hr in hrows:
            hr[f"overlap_{name}"] = math.nan
            hr[f"mean_angle_{name}_deg"] = math.nan
        return None
    div, w_ov = geometry.diversity_with_weight(stack, fast=True)
    iu = torch.triu_indices(Hs, Hs, offset=1, device=stack.device)
    w_hdi = 1.0 - float(w_ov[iu[0], iu[1]].mean())
    if k <= d and d >= 2:
        w_null, w_sd = geometry.weight_null_hdi(d, k, Hs, "product" if name == "ov" else "gaussian")
    else:
        w_null, w_sd = math.nan, math.nan
    row[f"hdi_{name}"] = div.hdi
    row[f"hdi_{name}_weight"] = w_hdi
    row[f"hdi_{name}_z"] = div.z
    row[f"hdi_{name}_null_sd"] = div.hdi_null_sd
    row[f"hdi_{name}_weight_null"] = w_null
    row[f"hdi_{name}_weight_z"] = (w_hdi - w_null) / w_sd if w_sd > 0 else math.nan
    row[f"mean_angle_{name}_deg"] = div.mean_angle_deg
    ov_head = _pair_means_per_head(div.overlap[iu[0], iu[1]], Hs)
    ang_head = _pair_means_per_head(torch.nanmean(div.angles_deg, dim=-1), Hs)
    for h, hr in enumerate(hrows):
        src = h // r if name in ("k", "v") else h
        hr[f"overlap_{name}"] = float(ov_head[src])
        hr[f"mean_angle_{name}_deg"] = float(ang_head[src])
    return div


def diagnose(
    heads: HeadWeights,
    traces: Sequence[Any] | None = None,
    *,
    null_samples: int = 200,
    data_null_samples: int = 64,
    progress: Callable[[int, int], None] | None = None,
) -> Diagnosis:
    """Per-head and per-layer diagnostics of a model's attention heads, one layer at a time.

    Parameters
    ----------
    heads : HeadWeights
        the model's heads (see :func:`attnlab.models.load`; ``stream=True`` reads layers lazily).
    traces : sequence of Trace, optional
        one forward pass per sentence (batch 1), from :func:`attnlab.models.trace.trace`; adds radial
        dominance on the hidden states entering attention and attention entropy against ``log n``.
    null_samples : int
        random subspace pairs drawn for the null angle distribution (figures only; seed 0).
    data_null_samples : int
        Monte Carlo draws of the data-metric null of the key HDI (with traces only; seed 0 per layer).
    progress : callable ``(done, total)``, optional
        called after each layer.

    Everything runs on the device of the weights; traces are moved there. The null angle sample and
    the bulk-edge constant stay on CPU (fixed-seed draws, the same numbers everywhere).

    Returns
    -------
    Diagnosis
    """
    if not isinstance(heads, HeadWeights):
        raise ValueError(f"heads: expected HeadWeights, got {type(heads).__name__}")
    if isinstance(data_null_samples, bool) or not isinstance(data_null_samples, int) or data_null_samples < 2:
        raise ValueError(f"data_null_samples: expected an integer >= 2, got {data_null_samples!r}")
    L, H, d, k = heads.n_layers, heads.n_heads, heads.d_model, heads.d_head
    G = heads.n_kv_heads
    r = H // G
    if traces:
        for tr in traces:
            if len(tr.inputs) != L:
                raise ValueError(f"traces: expected {L} attention layers per trace, got {len(tr.inputs)}")
    # at most ~6400 null angles (figures and the median only): fewer pairs when d_head is large. Drawn
    # before the layers so that its temporaries (S × d × k) are freed before a layer's are allocated:
    # the peak is the larger of the two, not their sum.
    null = geometry.null_principal_angles(d, min(k, d), max(8, min(null_samples, 6400 // k)), generator(0))
    notes: list[str] = []
    layer_rows: list[dict[str, Any]] = [{"layer": i} for i in range(L)]
    head_rows: list[dict[str, Any]] = [{"layer": i, "head": h} for i in range(L) for h in range(H)]
    overlap_k, angles_k, qk_sv, qk_edge, mm_cross = [], [], [], [], []
    done: dict[Any, int] = {}
    for i in range(L):
        key = heads.layer_key(i)
        if key in done:  # shared weights (ALBERT): the same numbers as the first use
            j = done[key]
            layer_rows[i] = {**layer_rows[j], "layer": i}
            for h in range(H):
                head_rows[i * H + h] = {**head_rows[j * H + h], "layer": i}
            for arr in (overlap_k, angles_k, qk_sv, qk_edge, mm_cross):
                if len(arr) > j:
                    arr.append(arr[j])
            if traces:  # same weights, different inputs: the token-level numbers are this layer's own
                _shared_token_level(
                    heads, traces, i, r, layer_rows[i], head_rows[i * H : (i + 1) * H], data_null_samples
                )
            if progress is not None:
                progress(i + 1, L)
            continue
        done[key] = i
        layer = heads.layers[i]
        # kept in the checkpoint's dtype: the spectra, flow defects and cross products promote a block of
        # heads at a time (diagnose._blocks), and each subspace is promoted to float64 only while it is
        # measured, each weight released after its last use, so the geometry holds one float64 (H, d, k)
        # stack at a time (the same values as the float64 layer)
        raw = {n: getattr(layer, n) for n in ("W_Q", "W_K", "W_V", "W_O")}
        layer_scale = float(layer.scale)
        # multi-head latent attention: spectra and M_h from the non-rotary (bilinear) coordinates
        bil = getattr(layer, "bilinear_slice", slice(None))
        del layer
        dev = raw["W_Q"].device
        kv = torch.arange(H, device=dev) // r
        row, hrows = layer_rows[i], head_rows[i * H : (i + 1) * H]
        WQ, WK, WV, WO = (raw[n] for n in ("W_Q", "W_K", "W_V", "W_O"))
        scale = torch.tensor(layer_scale, dtype=_DT, device=dev)
        # thin-QR R factors of the (bilinear part of the) Q and distinct K heads, shared by the spectra
        # and the cross products; the layer's weights were checked finite when it was built
        Ra = r_factors(WQ[..., bil])  # (H, k', k')
        Rb = r_factors(WK[..., bil])  # (H_kv, k', k')
        spec = spectrum_from_factors(Ra, Rb[kv], scale, d)  # (H, ...)
        if bil == slice(None):
            fd = grouped_flow_defects(WQ, WK, WV, WO, scale, kv)
        else:  # flow defects need W_Q, W_K as wide as W_V: the other coordinates zeroed instead (exact in
            # any dtype: products with 0 and 1)
            keep = torch.zeros(k, dtype=WQ.dtype, device=dev)
            keep[bil] = 1.0
            fd = grouped_flow_defects(WQ * keep, WK * keep, WV, WO, scale, kv)
        cross = grouped_cross_products(WQ[..., bil], WK[..., bil], kv, factors=(Ra, Rb))  # (H, H)
        del Ra, Rb
        if H > 1:
            off = ~torch.eye(H, dtype=torch.bool, device=dev)
            c_off = cross.masked_fill(~off, float("nan"))
            cross_mean = torch.nanmean(torch.cat([c_off, c_off.T], dim=-1), dim=-1)  # (H,)
            cross_max = c_off.nan_to_num(-1.0).amax(-1).maximum(c_off.T.nan_to_num(-1.0).amax(-1))
        else:
            cross_mean = cross_max = torch.full((H,), math.nan, dtype=_DT, device=dev)
        per_head = {
            "qk_sv_max": spec.sv[..., 0],
            "qk_rank90": spec.rank90,
            "qk_outliers": spec.outliers,
            "qk_bulk_edge": spec.bulk_edge,
            "qk_outlier_energy": spec.outlier_energy,
            "sym_defect": fd.sym_defect,
            "value_cos": fd.value_cos,
            "value_defect": fd.value_defect,
            "mm_cross_mean": cross_mean,
            "mm_cross_max": cross_max,
        }
        data_k: dict[str, Any] = {}
        if traces:
            WQ, WK, WV, WO = (t.to(_DT) for t in (WQ, WK, WV, WO))
            WKe, WVe = (WK, WV) if G == H else (WK[kv], WV[kv])  # (H, d, k) gathers for the token level
            per_head.update(_token_level(traces, i, WQ, WKe, WVe, WO, scale, heads.causal, dev))
            del WKe, WVe
            data_k = _data_metric_k(traces, i, WK, data_null_samples)
        del WQ, WK, WV, WO
        for name in ("q", "k", "v", "ov"):
            if name == "ov":  # (H, d, k) factors of V_h, from the query heads' (gathered) values
                stack = ov_factors(raw.pop("W_V"), raw.pop("W_O"), None if G == H else kv)
            else:  # W_V stays for the OV factors
                w = {"q": "W_Q", "k": "W_K", "v": "W_V"}[name]
                stack = (raw[w] if name == "v" else raw.pop(w)).to(_DT)
            div = _geometry_rows(name, stack, H, r, row, hrows)
            del stack
            if name == "k" and div is not None:
                row["hdi_null_sd"] = div.hdi_null_sd
                row["hdi_ceiling"] = div.ceiling
                row["median_angle_k_deg"] = div.median_angle_deg
                overlap_k.append(div.overlap.cpu().numpy())
                angles_k.append(div.angles_deg.reshape(-1).cpu().numpy())
            del div
        row["hdi_null"] = 1.0 - k / d if k <= d else math.nan  # the subspace null mean, whatever H
        row.setdefault("hdi_null_sd", math.nan)
        row.update(data_k)
        for name, val in per_head.items():
            val = val.to(device="cpu", dtype=_DT)  # (H,) one transfer, then Python floats
            row[name] = float(val.mean())
            for h in range(H):
                hrows[h][name] = float(val[h])
        qk_sv.append(spec.sv.cpu().numpy())
        qk_edge.append(spec.bulk_edge.cpu().numpy())
        mm_cross.append(cross.cpu().numpy())
        if progress is not None:
            progress(i + 1, L)
    if G < 2:
        notes.append(
            f"HDI needs at least 2 heads: {'one head' if H < 2 else 'one K/V head'} per layer, so "
            + ("every diversity index is" if H < 2 else "K and V diversity are")
            + " undefined (null)"
        )
    if not traces:
        notes.append("no token representations given: radial dominance and entropy not computed")
    nb = _nonbilinear_note(heads)
    if nb:
        notes.append(nb)
    for row in layer_rows:
        row["null_median_angle_deg"] = float(null.median())
    meta = heads.summary()
    meta["scores_bilinear"] = nb is None
    arrays = {
        "overlap_k": np.stack(overlap_k) if len(overlap_k) == L else np.zeros((L, 0, 0)),
        "angles_k_deg": np.stack(angles_k) if len(angles_k) == L else np.zeros((L, 0)),
        "null_angles_deg": null.reshape(-1).numpy(),
        "qk_sv": np.stack(qk_sv),
        "qk_edge": np.stack(qk_edge),
        "mm_cross": np.stack(mm_cross),
    }
    return Diagnosis(
        meta=meta,
        layers=tuple(layer_rows),
        heads=tuple(head_rows),
        arrays=arrays,
        text=bool(traces),
        notes=tuple(notes),
    )


def _shared_token_level(
    heads: HeadWeights,
    traces: Sequence[Any],
    i: int,
    r: int,
    row: dict[str, Any],
    hrows: list[dict[str, Any]],
    samples: int,
) -> None:
    """Token-level fields of layer ``i`` whose weights are shared with an earlier layer (ALBERT)."""
    layer = heads.layers[i]
    WQ, WK, WV, WO = (getattr(layer, n).to(_DT) for n in ("W_Q", "W_K", "W_V", "W_O"))
    dev, H = WQ.device, WQ.shape[0]
    kv = torch.arange(H, device=dev) // r
    WKe, WVe = (WK, WV) if r == 1 else (WK[kv], WV[kv])
    scale = torch.tensor(float(layer.scale), dtype=_DT, device=dev)
    for name, val in _token_level(traces, i, WQ, WKe, WVe, WO, scale, heads.causal, dev).items():
        val = val.to(device="cpu", dtype=_DT)  # (H,)
        row[name] = float(val.mean())
        for h in range(H):
            hrows[h][name] = float(val[h])
    row.update(_data_metric_k(traces, i, WK, samples))


def _data_metric_k(traces: Sequence[Any], i: int, WK: torch.Tensor, samples: int) -> dict[str, float]:
    """Key HDI in the metric of the hidden states entering layer ``i`` (``core.metric``).

    ``Σ`` is the covariance of the attention inputs of layer ``i`` over all tokens of all traces; the HDI
    is that of ``Σ^{1/2} W_K`` (distinct K/V heads) in the subspace form, its null the HDI of
    ``Σ^{1/2} G_h`` with i.i.d. Gaussian ``G_h`` (``samples`` Monte Carlo draws, seed 0).
    """
    keys = ("hdi_k_data", "hdi_k_data_null", "hdi_k_data_null_sd", "hdi_k_data_z")
    if WK.shape[0] < 2:
        return dict.fromkeys(keys, math.nan)
    X = torch.cat([tr.inputs[i][0].to(device="cpu", dtype=_DT) for tr in traces])  # (N, d) all tokens
    sigma = metric.covariance(X)  # (d, d)
    div = metric.data_metric_diversity(WK.to("cpu"), sigma, samples=samples, generator=generator(0))
    out = dict(zip(keys, (div.hdi, div.hdi_null, div.hdi_null_sd, div.z)))
    out["data_tokens"] = int(X.shape[0])  # Σ has rank < d when this is ≤ d
    return out


def _token_level(
    traces: Sequence[Any],
    i: int,
    WQ: torch.Tensor,
    WK: torch.Tensor,
    WV: torch.Tensor,
    WO: torch.Tensor,
    scale: torch.Tensor,
    causal: bool,
    dev: torch.device,
) -> dict[str, torch.Tensor]:
    """Radial dominance on the hidden states entering layer ``i`` and the entropy of its attention."""
    H = WQ.shape[0]
    acc = {n: torch.zeros(H, dtype=_DT, device=dev) for n in _TOKEN_KEYS}
    for tr in traces:
        X = tr.inputs[i][0].to(device=dev, dtype=_DT)  # (n, d)
        rd = radial_dominance(X, WQ, WK, WV, WO, scale, causal=causal)
        e = attention_entropy(tr.attentions[i][0].to(dev))  # (H,)
        vals = (
            rd.form1,
            rd.form2,
            rd.form3,
            rd.form2_tokens,
            rd.form3_tokens,
            e.entropy,
            e.max_entropy,
            e.ratio,
        )
        for n, v in zip(_TOKEN_KEYS, vals):
            acc[n] += v.to(_DT)
    return {n: v / len(traces) for n, v in acc.items()}


_TOKEN_KEYS = (
    "radial_form1",
    "radial_form2",
    "radial_form3",
    "radial_form2_tokens",
    "radial_form3_tokens",
    "entropy",
    "entropy_max",
    "entropy_ratio",
)
