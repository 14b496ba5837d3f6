"""Head geometry of a training run, record by record: HDI in three forms against their nulls,
QK rank and attention entropy.

For each layer and each subspace ``q, k, v`` (the read projections ``W_Q, W_K, W_V``) and ``ov`` (where
a head writes: the factor ``F_h = W_Oᵀ L_h``, ``L_h L_hᵀ = W_VᵀW_V``, of
:func:`attnlab.diagnose.ov_factors`):

``subspace``
    HDI of the column spaces (:func:`attnlab.core.geometry.diversity`); null: uniform random
    subspaces, exact (the subspaces of Gaussian weights are uniform).
``weight``
    weight-aware HDI; null: i.i.d. Gaussian weights of the same shapes, the distribution of the
    initial weights (:func:`attnlab.core.geometry.weight_null_hdi`; ``kind="product"`` for ``ov``).
``data``
    ``q, k, v``: subspace HDI of ``Σ^{1/2} W`` with ``Σ`` the covariance of the hidden states entering
    the layer (:mod:`attnlab.core.metric`); null: ``Σ^{1/2} G`` with Gaussian ``G``.
    ``ov``: the write-side subspace does not change with the input metric, so the data form of ``ov`` is
    the weight-aware overlap of ``F̃_h = W_Oᵀ L̃_h``, ``L̃_h L̃_hᵀ = W_Vᵀ Σ W_V``: the overlap
    ``tr(C_h C_h')/(‖C_h‖_F ‖C_h'‖_F)`` of the covariances ``C_h = F̃_h F̃_hᵀ`` of the heads' value
    outputs on the data; null: Gaussian ``W_V, W_O`` in the same metric.

Alongside: ``qk_rank90`` (rank holding 90% of the energy of ``W_Q W_Kᵀ``, mean over heads) and the
attention entropy on the probe batch (nats, and as a fraction of ``log`` of the visible keys).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from attnlab.core import geometry
from attnlab.core.metric import hdi, mc_null, metric_null, metric_root
from attnlab.core.seeding import derive_seed, generator
from attnlab.core.validation import check_int
from attnlab.diagnose.model import ov_factors
from attnlab.diagnose.spectra import qk_spectra

__all__ = ["FORMS", "SUBSPACES", "layer_geometry", "trajectory"]

SUBSPACES = ("q", "k", "v", "ov")
FORMS = ("subspace", "weight", "data")
_DT = torch.float64


def _gaussian_ov(d: int, k: int, H: int, root: torch.Tensor | None):
    def draw(g: torch.Generator | None, n: int) -> torch.Tensor:
        Wv = torch.randn(n, H, d, k, generator=g, dtype=_DT)  # (n, H, d, k)
        Wo = torch.randn(n, H, k, d, generator=g, dtype=_DT)  # (n, H, k, d)
        return ov_factors(Wv if root is None else root @ Wv, Wo)  # (n, H, d, k)

    return draw


def layer_geometry(
    heads: Any, sigma: torch.Tensor, *, samples: int = 32, seed: int = 0
) -> list[dict[str, float]]:
    """One row per layer: ``hdi_<s>_<form>``, ``null_<s>_<form>``, ``null_sd_<s>_<form>``, ``z_<s>_<form>``
    for ``s`` in :data:`SUBSPACES` and ``form`` in :data:`FORMS`, and ``qk_rank90``.

    Parameters
    ----------
    heads : HeadWeights
    sigma : Tensor ``(L, d, d)``
        covariance of the hidden states entering each attention layer.
    samples : int
        Monte Carlo draws of each data-metric null.
    seed : int
        seed of the data-metric nulls (layer ``l`` uses ``derive_seed(seed, l)``).
    """
    from attnlab.core.heads import HeadWeights

    if not isinstance(heads, HeadWeights):
        raise ValueError(f"heads: expected HeadWeights, got {type(heads).__name__}")
    L, H, d, k = heads.n_layers, heads.n_heads, heads.d_model, heads.d_head
    if H < 2:
        raise ValueError(f"heads: expected at least 2 heads per layer for a pairwise index, got {H}")
    if tuple(sigma.shape) != (L, d, d):
        raise ValueError(f"sigma: expected shape {(L, d, d)}, got {tuple(sigma.shape)}")
    samples = check_int("samples", samples, min=2)
    WQ, WK, WV, WO = (heads.stacked(n).to(_DT) for n in ("W_Q", "W_K", "W_V", "W_O"))  # (L, H, ·, ·)
    rank90 = qk_spectra(WQ, WK, heads.scales()[:, None]).rank90.to(_DT).mean(-1)  # (L,)
    rows = []
    for i in range(L):
        row: dict[str, float] = {"layer": i, "qk_rank90": float(rank90[i])}
        stacks = {"q": WQ[i], "k": WK[i], "v": WV[i], "ov": ov_factors(WV[i], WO[i])}
        root = metric_root(sigma[i])
        g = generator(derive_seed(seed, i))
        data_null = metric_null(d, k, H, sigma[i], "subspace", samples, g)
        ov_null = mc_null(_gaussian_ov(d, k, H, root), "weight", samples, g)
        for s, W in stacks.items():
            div = geometry.diversity(W, "subspace")
            vals = {
                "subspace": (div.hdi, div.hdi_null, div.hdi_null_sd),
                "weight": (
                    hdi(W, "weight"),
                    *geometry.weight_null_hdi(d, k, H, "product" if s == "ov" else "gaussian"),
                ),
            }
            if s == "ov":
                vals["data"] = (hdi(ov_factors(root @ WV[i], WO[i]), "weight"), *ov_null)
            else:
                vals["data"] = (hdi(root @ W, "subspace"), *data_null)
            for form, (h, m, sd) in vals.items():
                row[f"hdi_{s}_{form}"] = h
                row[f"null_{s}_{form}"] = m
                row[f"null_sd_{s}_{form}"] = sd
                row[f"z_{s}_{form}"] = (h - m) / sd if sd > 0 else math.nan
        rows.append(row)
    return rows


def trajectory(records: Sequence[Any], *, samples: int = 32, seed: int = 0) -> list[dict[str, float]]:
    """:func:`layer_geometry` of every record, one row per (record, layer), with ``step``,
    ``val_loss``, ``train_loss``, ``entropy`` and ``entropy_ratio`` (means over the layer's heads)."""
    out = []
    for rec in records:
        for row in layer_geometry(rec.heads(), rec.sigma, samples=samples, seed=seed):
            i = int(row["layer"])
            row.update(
                {
                    "step": rec.step,
                    "val_loss": rec.val_loss,
                    "train_loss": rec.train_loss,
                    "entropy": float(rec.entropy[i].mean()),
                    "entropy_ratio": float(rec.entropy_ratio[i].mean()),
                }
            )
            out.append(row)
    return out
