"""Spectra of the heads' bilinear forms ``W_Q^h (W_K^h)ᵀ`` (paper C's low-rank-plus-bulk picture, C4).

Paper C predicts that a trained score matrix looks like ``η · ReLU(S0 + δZ − εI)``: a few outliers
(recovered directions) beside a noise bulk. For a real head we report the singular values of
``scale · W_Q W_Kᵀ``, the rank holding 90% of the energy ``Σσ²``, and the outliers above a fitted
noise-bulk edge.

Noise-bulk edge
---------------
The null is the product of two independent Gaussian ``d × k`` matrices. Its singular values scale
with the weights, so the ratio ``c(d, k) = q99(σ_max) / E[median σ]`` is scale-free; it is computed by
Monte Carlo (fixed seed, deterministic). A head's bulk scale is fitted as the median of its own
singular values and its edge is ``c(d, k) · median(σ_h)``; singular values above the edge are outliers.
The median is robust as long as fewer than half the singular values are outliers.

All singular values are computed without forming the ``d × d`` product: with thin QR factorisations
``W_Q = Q_a R_a``, ``W_K = Q_b R_b``, ``W_Q W_Kᵀ = Q_a (R_a R_bᵀ) Q_bᵀ`` has the singular values of the
``k × k`` matrix ``R_a R_bᵀ``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.validation import check_int, check_real, check_tensor

__all__ = [
    "QKSpectrum",
    "bulk_edge_ratio",
    "energy_rank",
    "qk_spectra",
    "qk_triangular_factors",
    "spectrum_from_factors",
]

_DT = torch.float64


def qk_triangular_factors(W_Q: torch.Tensor, W_K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Thin-QR ``R`` factors of ``W_Q`` and ``W_K`` ``(..., d, k)`` -> ``(..., k, k)`` each, in float64."""
    _, Ra = torch.linalg.qr(W_Q.to(_DT))  # (..., k, k)
    _, Rb = torch.linalg.qr(W_K.to(_DT))  # (..., k, k)
    return Ra, Rb


def energy_rank(sv: torch.Tensor, fraction: float = 0.9) -> torch.Tensor:
    """Smallest ``r`` with ``Σ_{i≤r} σ_i² ≥ fraction · Σ σ_i²``; ``sv`` ``(..., k)`` sorted descending."""
    check_real("fraction", fraction, min=0.0, max=1.0, min_open=True)
    e = sv.to(_DT).square()
    cum = e.cumsum(-1)  # (..., k)
    total = cum[..., -1:]
    # a relative slack of 1e-12 keeps fraction = 1 from failing on rounding of the cumulative sum
    return (cum < fraction * total * (1 - 1e-12)).sum(-1) + 1


@functools.lru_cache(maxsize=32)
def bulk_edge_ratio(d: int, k: int, samples: int = 200, quantile: float = 0.99) -> float:
    """``q(σ_max) / E[median σ]`` for ``G_1 G_2ᵀ`` with independent Gaussian ``d × k`` factors.

    Deterministic (seed 0). ``quantile`` of the largest singular value over ``samples`` draws. The
    singular values of ``G_1 G_2ᵀ`` are those of ``R_1 R_2ᵀ`` (thin QR), and the ``R`` factor of a
    Gaussian ``d × k`` matrix is drawn directly (Bartlett: ``|R_ii| ~ χ_{d−i}``, ``R_ij ~ N(0, 1)`` above
    the diagonal), so the cost is ``k × k`` per draw whatever ``d``.
    """
    d = check_int("d", d, min=1)
    k = check_int("k", k, min=1, max=d)
    rng = np.random.default_rng(0)

    def bartlett_r() -> torch.Tensor:
        upper = torch.from_numpy(rng.standard_normal((samples, k, k))).triu(1)
        diag = torch.from_numpy(np.sqrt(rng.chisquare(d - np.arange(k), size=(samples, k))))
        return upper + torch.diag_embed(diag)  # (S, k, k)

    Ra, Rb = bartlett_r(), bartlett_r()
    sv = torch.linalg.svdvals(Ra @ Rb.transpose(-1, -2))  # (S, k)
    return float(torch.quantile(sv[:, 0], quantile) / sv.median(dim=-1).values.mean())


@dataclass(frozen=True)
class QKSpectrum:
    """Singular values of ``scale · W_Q W_Kᵀ`` per head with the bulk/outlier split.

    Attributes
    ----------
    sv : Tensor ``(..., k)``
        singular values, descending (the leading dims are those of the input, e.g. ``(L, H)``).
    rank90 : Tensor ``(...)``
        rank holding 90% of ``Σσ²``.
    bulk_edge : Tensor ``(...)``
        fitted noise-bulk edge.
    outliers : Tensor ``(...)``
        number of singular values above the edge.
    outlier_energy : Tensor ``(...)``
        fraction of ``Σσ²`` carried by the outliers.
    edge_ratio : float
        ``c(d, k)`` used for the edge.
    """

    sv: torch.Tensor
    rank90: torch.Tensor
    bulk_edge: torch.Tensor
    outliers: torch.Tensor
    outlier_energy: torch.Tensor
    edge_ratio: float


def qk_spectra(
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    scale: torch.Tensor | float = 1.0,
    kv_index: torch.Tensor | None = None,
) -> QKSpectrum:
    """Spectrum of each head's bilinear form ``scale · W_Q W_Kᵀ``.

    Parameters
    ----------
    W_Q, W_K : Tensor ``(..., d, k)``
        per-head projections (any leading batch dims, e.g. ``(L, H)``).
    scale : float or Tensor broadcastable to the leading dims
        the score scale (``1/√d_head``); it multiplies every singular value.
    kv_index : Tensor ``(H,)`` of int, optional
        grouped K/V: ``W_K`` ``(H_kv, d, k)`` holds the distinct K heads and query head ``h`` uses
        ``W_K[kv_index[h]]`` (each K head is factorised once).

    Returns
    -------
    QKSpectrum
    """
    check_tensor("W_Q", W_Q)
    if W_Q.ndim < 2:
        raise ValueError(f"W_Q: expected a (..., d, k) tensor, got shape {tuple(W_Q.shape)}")
    if kv_index is None:
        check_tensor("W_K", W_K, shape=tuple(W_Q.shape))
    else:
        check_tensor("W_K", W_K, shape=(None, *W_Q.shape[-2:]))
        if W_Q.ndim != 3 or kv_index.shape != (W_Q.shape[0],) or int(kv_index.max()) >= W_K.shape[0]:
            raise ValueError(
                f"kv_index: expected {W_Q.shape[0]} indices into the {W_K.shape[0]} K heads, "
                f"got shape {tuple(kv_index.shape)}"
            )
    d, k = W_Q.shape[-2:]
    if k > d:
        raise ValueError(f"W_Q: expected k <= d, got (d, k) = {(d, k)}")
    _, Ra = torch.linalg.qr(W_Q.to(_DT))  # (..., k, k)
    _, Rb = torch.linalg.qr(W_K.to(_DT))  # (..., k, k) or (H_kv, k, k)
    if kv_index is not None:
        Rb = Rb[kv_index]
    return spectrum_from_factors(Ra, Rb, scale, int(d))


def spectrum_from_factors(
    Ra: torch.Tensor, Rb: torch.Tensor, scale: torch.Tensor | float, d: int
) -> QKSpectrum:
    """:func:`qk_spectra` from the thin-QR ``R`` factors ``(..., k, k)`` of ``W_Q`` and of the matching
    ``W_K`` (already gathered per query head), float64; ``d`` the model dimension (for the bulk edge).
    For callers that reuse the factors (``diagnose`` shares them with the cross products)."""
    k = Ra.shape[-1]
    sv = torch.linalg.svdvals(Ra @ Rb.transpose(-1, -2))  # (..., k) descending
    sv = sv * torch.as_tensor(scale, dtype=_DT, device=sv.device)[..., None]  # broadcasts over leading dims
    c = bulk_edge_ratio(int(d), int(k))
    edge = c * sv.median(dim=-1).values  # (...)
    out_mask = sv > edge[..., None]  # (..., k)
    energy = sv.square()
    frac = (energy * out_mask).sum(-1) / energy.sum(-1).clamp_min(torch.finfo(_DT).tiny)
    return QKSpectrum(
        sv=sv,
        rank90=energy_rank(sv, 0.9),
        bulk_edge=edge,
        outliers=out_mask.sum(-1),
        outlier_energy=frac,
        edge_ratio=c,
    )
