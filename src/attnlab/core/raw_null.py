"""The null model of the literal ("raw") diversity form ``G_hh' = W_hᵀ W_h' / d_k`` (docs/ensemble.md A3).

The raw overlap ``‖G_hh'‖_F² = ‖W_hᵀ W_h'‖_F² / d_k²`` depends on the weights' scale, so no null that
ignores the weights can serve it. The null here keeps every head's weights as they are and places
them at random: each head is rotated by an independent uniformly random orthogonal matrix
``O_h`` of ``R^d`` (Haar), ``W_h → O_h W_h``. With ``P = W_h W_hᵀ`` and ``Q = W_h' W_h'ᵀ``,
``‖W_hᵀ Oᵀ O' W_h'‖_F² = tr(P O Q Oᵀ)`` for a Haar ``O = O_hᵀ O_h'``, whose moments are exact:

``E tr(P O Q Oᵀ) = tr P · tr Q / d``,
``Var tr(P O Q Oᵀ) = 2 (d tr P² − (tr P)²)(d tr Q² − (tr Q)²) / (d² (d − 1)(d + 2))``.

(For rank-one ``P = aaᵀ``, ``Q = bbᵀ`` this is ``|a|⁴|b|⁴ Var(u_1²)`` with ``u`` uniform on the
sphere; for projections of rank ``k`` it is the subspace form's ``2k²(d−k)²/(d²(d−1)(d+2))``.)
Pairs are uncorrelated under this null: given ``O_h``, the overlap of ``(h, h')`` has a mean that does
not depend on ``O_h`` and is independent of the overlap of ``(h, h'')``. So

``E HDI_raw = 1 − mean_{h<h'} tr P_h tr P_h' / (d d_k²)`` and
``sd HDI_raw = √(Σ_{h<h'} Var_hh') / (P d_k²)`` with ``P = H(H−1)/2`` pairs,

and ``z = (HDI_raw − E)/sd``. ``tr P_h = ‖W_h‖_F²`` and ``tr P_h² = ‖W_hᵀ W_h‖_F²``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab.core.validation import check_tensor

__all__ = ["RawDiversity", "raw_diversity", "raw_null_hdi"]


def _check(W: torch.Tensor) -> torch.Tensor:
    check_tensor("W", W, ndim=3)
    H, d, _ = W.shape
    if H < 2:
        raise ValueError(f"W: expected at least 2 heads (H >= 2) for a pairwise index, got H = {H}")
    if d < 2:
        raise ValueError(f"W: expected model dimension d >= 2 for a rotation null, got d = {d}")
    if not bool(torch.isfinite(W).all()):
        raise ValueError("W: expected finite weights, got nan or inf")
    return W.detach().to(torch.float64)


def raw_null_hdi(W: torch.Tensor) -> tuple[float, float]:
    """Mean and standard deviation of the raw-form HDI when each head is randomly rotated.

    Parameters
    ----------
    W : Tensor, shape (H, d, d_k)
        Per-head weights (column space in ``R^d``).

    Returns
    -------
    (mean, sd) : floats
        Exact moments under independent Haar rotations of the heads (module docstring).
    """
    W = _check(W)
    H, d, k = W.shape
    t1 = W.square().sum(dim=(1, 2))  # (H,)  tr P_h = ‖W_h‖_F²
    t2 = (W.transpose(1, 2) @ W).square().sum(dim=(1, 2))  # (H,)  tr P_h² = ‖W_hᵀ W_h‖_F²
    i, j = torch.triu_indices(H, H, 1)
    n_pairs = i.numel()
    mean_pair = (t1[i] * t1[j] / d).sum() / n_pairs  # mean of tr(P O Q Oᵀ) over pairs
    spread = d * t2 - t1.square()  # (H,)  d tr P² − (tr P)² >= 0 (Cauchy–Schwarz on eigenvalues)
    var_pairs = 2 * spread[i] * spread[j] / (d**2 * (d - 1) * (d + 2))  # (P,)
    mean = 1.0 - float(mean_pair) / k**2
    sd = math.sqrt(float(var_pairs.sum().clamp_min(0))) / (n_pairs * k**2)
    return mean, sd


@dataclass(frozen=True)
class RawDiversity:
    """The literal HDI ``1 − mean_{h<h'} ‖W_hᵀ W_h'‖_F²/d_k²`` with its rotation null."""

    hdi: float
    hdi_null: float
    hdi_null_sd: float
    z: float  # (hdi − hdi_null)/hdi_null_sd; nan when the sd is 0


def raw_diversity(W: torch.Tensor) -> RawDiversity:
    """The raw-form HDI of ``W`` (H, d, d_k), its rotation-null mean and sd, and the z-score."""
    W = _check(W)
    H, _, k = W.shape
    cross = torch.einsum("adk,bdl->abkl", W, W).square().sum(dim=(2, 3))  # (H, H) ‖W_aᵀ W_b‖_F²
    i, j = torch.triu_indices(H, H, 1)
    hdi = 1.0 - float(cross[i, j].mean()) / k**2
    m, sd = raw_null_hdi(W)
    return RawDiversity(hdi, m, sd, (hdi - m) / sd if sd > 0 else math.nan)
