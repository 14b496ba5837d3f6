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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnlab.core import geometry
from attnlab.core.heads import HeadWeights
from attnlab.core.seeding import generator
from attnlab.diagnose.entropy import attention_entropy
from attnlab.diagnose.flow import cross_products, flow_defects, radial_dominance
from attnlab.diagnose.spectra import qk_spectra

__all__ = ["SENTENCES", "SUBSPACES", "Diagnosis", "diagnose", "ov_factors"]

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


def ov_factors(W_V: torch.Tensor, W_O: torch.Tensor) -> torch.Tensor:
    """``F_h = W_Oᵀ L_h`` ``(..., d, k)``, ``L_h L_hᵀ = W_VᵀW_V``, so ``F_h F_hᵀ = V_h V_hᵀ``.

    Falls back to an eigen-decomposition square root when ``W_VᵀW_V`` is not positive definite.
    """
    Wv, Wo = W_V.to(_DT), W_O.to(_DT)
    G = Wv.transpose(-1, -2) @ Wv  # (..., k, k)
    L, info = torch.linalg.cholesky_ex(G)
    if bool((info != 0).any()):
        w, U = torch.linalg.eigh(G)
        L = U * w.clamp_min(0.0).sqrt().unsqueeze(-2)  # (..., k, k), L Lᵀ = G
    return Wo.transpose(-1, -2) @ L  # (..., d, k)


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


def _subspace_stack(heads: HeadWeights, name: str) -> torch.Tensor:
    """``(L, H', d, k)`` stack of the ``name`` subspace's factors (distinct K/V heads only with GQA)."""
    r = heads.n_heads // heads.n_kv_heads
    if name == "q":
        return heads.stacked("W_Q")
    if name == "k":
        return heads.stacked("W_K")[:, ::r]
    if name == "v":
        return heads.stacked("W_V")[:, ::r]
    return ov_factors(heads.stacked("W_V"), heads.stacked("W_O"))


def diagnose(
    heads: HeadWeights,
    traces: Sequence[Any] | None = None,
    *,
    null_samples: int = 200,
) -> Diagnosis:
    """Per-head and per-layer diagnostics of a model's attention heads.

    Parameters
    ----------
    heads : HeadWeights
        the model's heads (see :func:`attnlab.models.load`).
    traces : sequence of Trace, optional
        one forward pass per sentence (batch 1), from :func:`attnlab.models.trace.trace`; adds radial
        dominance on the hidden states entering attention and attention entropy against ``log n``.
    null_samples : int
        random subspace pairs drawn for the null angle distribution (figures only; seed 0).

    Everything runs on the device of ``heads`` (move them with ``heads.to(device=...)``); traces are
    moved there. The null angle sample and the bulk-edge constant stay on CPU (fixed-seed draws,
    the same numbers everywhere); arrays and per-head values come back as numpy and Python floats.

    Returns
    -------
    Diagnosis
    """
    if not isinstance(heads, HeadWeights):
        raise ValueError(f"heads: expected HeadWeights, got {type(heads).__name__}")
    L, H, d, k = heads.n_layers, heads.n_heads, heads.d_model, heads.d_head
    r = H // heads.n_kv_heads
    notes: list[str] = []
    WQ, WK, WV, WO = (heads.stacked(n).to(_DT) for n in ("W_Q", "W_K", "W_V", "W_O"))
    dev = WQ.device
    scales = heads.scales().to(dev)  # (L,)

    # paper A: subspace geometry per layer (subspace and weight-aware forms)
    layer_rows: list[dict[str, Any]] = [{"layer": i} for i in range(L)]
    head_rows: list[dict[str, Any]] = [{"layer": i, "head": h} for i in range(L) for h in range(H)]
    overlap_k, angles_k = [], []
    for name in SUBSPACES:
        stack = _subspace_stack(heads, name).to(_DT)  # (L, H', d, k)
        Hs = stack.shape[1]
        for i in range(L):
            row = layer_rows[i]
            if Hs < 2:
                row.update(
                    {f"hdi_{name}": math.nan, f"hdi_{name}_weight": math.nan, f"hdi_{name}_z": math.nan}
                )
                continue
            div = geometry.diversity(stack[i], form="subspace")
            w_ov = geometry.overlap_matrix(stack[i], form="weight")
            iu = torch.triu_indices(Hs, Hs, offset=1, device=dev)
            row[f"hdi_{name}"] = div.hdi
            row[f"hdi_{name}_weight"] = 1.0 - float(w_ov[iu[0], iu[1]].mean())
            row[f"hdi_{name}_z"] = div.z
            row[f"hdi_{name}_weight_z"] = (row[f"hdi_{name}_weight"] - div.hdi_null) / div.hdi_null_sd
            row[f"mean_angle_{name}_deg"] = div.mean_angle_deg
            if name == "k":
                row["hdi_null"] = div.hdi_null
                row["hdi_null_sd"] = div.hdi_null_sd
                row["hdi_ceiling"] = div.ceiling
                row["median_angle_k_deg"] = div.median_angle_deg
                overlap_k.append(div.overlap.cpu().numpy())
                angles_k.append(div.angles_deg.reshape(-1).cpu().numpy())
            # per head: mean overlap and mean angle with the other heads of the layer
            ov_pairs = div.overlap[iu[0], iu[1]]
            ang_pairs = torch.nanmean(div.angles_deg, dim=-1)
            ov_head = _pair_means_per_head(ov_pairs, Hs)
            ang_head = _pair_means_per_head(ang_pairs, Hs)
            for h in range(H):
                src = h // r if name in ("k", "v") else h
                head_rows[i * H + h][f"overlap_{name}"] = float(ov_head[src])
                head_rows[i * H + h][f"mean_angle_{name}_deg"] = float(ang_head[src])
    if heads.n_kv_heads < 2:
        notes.append("one K/V head per layer: K and V diversity are undefined (null)")
    null = geometry.null_principal_angles(d, k, null_samples, generator(0))  # (S, k) degrees
    for row in layer_rows:
        row["null_median_angle_deg"] = float(null.median())

    # paper C: spectra of scale·W_Q W_Kᵀ
    spec = qk_spectra(WQ, WK, scales[:, None])  # leading dims (L, H)
    # paper B: M_h, V_h as a dynamics
    fd = flow_defects(WQ, WK, WV, WO, scales[:, None])
    cross = cross_products(WQ, WK)  # (L, H, H)
    off = ~torch.eye(H, dtype=torch.bool, device=dev)
    cross_off = cross.masked_fill(~off, float("nan"))
    cross_mean = torch.nanmean(torch.cat([cross_off, cross_off.transpose(-1, -2)], dim=-1), dim=-1)  # (L, H)
    cross_max = (
        cross_off.nan_to_num(-1.0).amax(-1).maximum(cross_off.transpose(-1, -2).nan_to_num(-1.0).amax(-1))
    )
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

    # token level: radial dominance on hidden states, entropy of the model's attention
    if traces:
        f1, f2, f3, f2t, f3t, ent, ent_max, ent_ratio = (
            torch.zeros(L, H, dtype=_DT, device=dev) for _ in range(8)
        )
        for tr in traces:
            if len(tr.inputs) != L:
                raise ValueError(f"traces: expected {L} attention layers per trace, got {len(tr.inputs)}")
            X = torch.stack([x[0] for x in tr.inputs]).to(device=dev, dtype=_DT)  # (L, n, d)
            rd = radial_dominance(X, WQ, WK, WV, WO, scales, causal=heads.causal)
            f1 += rd.form1.to(_DT)
            f2 += rd.form2.to(_DT)
            f3 += rd.form3.to(_DT)
            f2t += rd.form2_tokens
            f3t += rd.form3_tokens
            e = attention_entropy(torch.stack([a[0] for a in tr.attentions]).to(dev))  # (L, H)
            ent += e.entropy
            ent_max += e.max_entropy
            ent_ratio += e.ratio
        m = float(len(traces))
        per_head.update(
            {
                "radial_form1": f1 / m,
                "radial_form2": f2 / m,
                "radial_form3": f3 / m,
                "radial_form2_tokens": f2t / m,
                "radial_form3_tokens": f3t / m,
                "entropy": ent / m,
                "entropy_max": ent_max / m,
                "entropy_ratio": ent_ratio / m,
            }
        )
    else:
        notes.append("no token representations given: radial dominance and entropy not computed")
    for key, val in per_head.items():
        val = val.to(device="cpu", dtype=_DT)  # (L, H) one transfer, then Python floats
        for i in range(L):
            layer_rows[i][key] = float(val[i].mean())
            for h in range(H):
                head_rows[i * H + h][key] = float(val[i, h])
    # the per-layer summary of the outlier count and rank as means over heads
    arrays = {
        "overlap_k": np.stack(overlap_k) if overlap_k else np.zeros((L, 0, 0)),
        "angles_k_deg": np.stack(angles_k) if angles_k else np.zeros((L, 0)),
        "null_angles_deg": null.reshape(-1).numpy(),
        "qk_sv": spec.sv.cpu().numpy(),
        "qk_edge": spec.bulk_edge.cpu().numpy(),
        "mm_cross": cross.cpu().numpy(),
    }
    return Diagnosis(
        meta=heads.summary(),
        layers=tuple(layer_rows),
        heads=tuple(head_rows),
        arrays=arrays,
        text=bool(traces),
        notes=tuple(notes),
    )
