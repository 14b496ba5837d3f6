"""Null models of the Head Diversity Index: what independent random heads give.

Subspace form (:func:`null_hdi`)
    Heads spanning independent uniformly random subspaces (uniform on the Grassmannian). One pair's
    overlap ``s = ‖UᵀU'‖_F²/k`` has mean ``k/d`` and variance ``2(d−k)²/(d²(d−1)(d+2))``, and pairs
    are uncorrelated, so ``HDI_null = 1 − k/d`` exactly.

Weight form (:func:`weight_null_hdi`)
    Heads whose ``d × k`` weights have i.i.d. Gaussian entries (``kind="gaussian"``), or the OV
    factor ``F = W_Oᵀ L`` of Gaussian ``W_V, W_O`` (``kind="product"``). The overlap
    ``s = ‖AᵀB‖_F² / (‖AᵀA‖_F ‖BᵀB‖_F)`` no longer has mean ``k/d``: see :func:`weight_null_hdi` for the
    derivation (the null is close to ``1 − k/(d + k + 1)`` for Gaussian heads).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import torch

from attnlab.core.validation import check_choice, check_int

__all__ = [
    "NULL_KINDS",
    "hdi_ceiling",
    "null_from_ranks",
    "null_hdi",
    "null_principal_angles",
    "shape_moments",
    "weight_null_hdi",
]

_DT = torch.float64
#: Weight distributions of :func:`weight_null_hdi`.
NULL_KINDS = ("gaussian", "product")


def null_from_ranks(d: int, ranks: Sequence[int]) -> tuple[float, float]:
    """Mean and sd of the subspace-form HDI for independent uniform subspaces of given ranks.

    Pair (h, h'): ``E‖U_hᵀU_h'‖² = r r'/d`` and ``Var = 2 r r'(d−r)(d−r')/(d²(d−1)(d+2))``;
    pairs are uncorrelated (``E[s_hh' | U_h]`` does not depend on ``U_h``), so the variance of the
    mean over P pairs is the sum of the pair variances over P².
    """
    H = len(ranks)
    P = H * (H - 1) // 2
    mean_s, var_sum = 0.0, 0.0
    for a in range(H):
        for b in range(a + 1, H):
            r, q = ranks[a], ranks[b]
            norm = math.sqrt(r * q)
            mean_s += (r * q / d) / norm
            if d > 1:
                var_sum += 2 * r * q * (d - r) * (d - q) / (d * d * (d - 1) * (d + 2)) / (r * q)
    return 1.0 - mean_s / P, math.sqrt(var_sum) / P


def null_hdi(d: int, k: int, H: int) -> tuple[float, float]:
    """Mean and standard deviation of the HDI of H independent uniformly random k-dim subspaces.

    Exact (docs/ensemble.md A3): one pair's overlap ``s = ‖UᵀU'‖_F²/k`` has mean ``k/d`` and variance
    ``2(d−k)²/(d²(d−1)(d+2))``; the ``P = H(H−1)/2`` pairwise overlaps are uncorrelated, so
    ``HDI_null = 1 − k/d`` and ``sd = √(Var(s)/P)``.

    Parameters
    ----------
    d : int
        Ambient (model) dimension, ``d >= 1``.
    k : int
        Subspace dimension, ``1 <= k <= d``.
    H : int
        Number of heads, ``H >= 2``.

    Returns
    -------
    (mean, sd) : tuple of float

    Examples
    --------
    >>> m, s = null_hdi(384, 32, 12)
    >>> round(m, 6), round(s, 6)
    (0.916667, 0.000415)
    """
    d = check_int("d", d, min=1)
    k = check_int("k", k, min=1, max=d)
    H = check_int("H", H, min=2)
    return null_from_ranks(d, [k] * H)


def null_principal_angles(
    d: int, k: int, samples: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Principal angles between pairs of independent uniformly random k-dim subspaces of ``R^d``.

    By rotation invariance one subspace is fixed to the first k coordinate axes; the other is the
    span of a Gaussian ``d × k`` matrix (uniform on the Grassmannian).

    Parameters
    ----------
    d, k : int
        ``1 <= k <= d``.
    samples : int
        Number of random pairs.
    generator : torch.Generator, optional
        Source of randomness (CPU).

    Returns
    -------
    Tensor, shape (samples, k), float64
        Angles in degrees, ascending along the last axis.
    """
    d = check_int("d", d, min=1)
    k = check_int("k", k, min=1, max=d)
    samples = check_int("samples", samples, min=1)
    G = torch.randn(samples, d, k, generator=generator, dtype=_DT)  # (S, d, k)
    Q, _ = torch.linalg.qr(G)  # (S, d, k) orthonormal columns
    cos = torch.linalg.svdvals(Q[:, :k, :]).clamp(0.0, 1.0)  # (S, k) descending
    if d > k:
        sin = torch.linalg.svdvals(Q[:, k:, :])  # (S, min(d-k, k)) descending
        sin_full = torch.zeros(samples, k, dtype=_DT)
        sin_full[:, k - sin.shape[1] :] = torch.flip(sin, dims=[-1])  # ascending, zeros first
        sin_full = sin_full.clamp(0.0, 1.0)
    else:
        sin_full = torch.zeros(samples, k, dtype=_DT)
    theta = torch.where(cos > math.sqrt(0.5), torch.arcsin(sin_full), torch.arccos(cos))  # (S, k)
    return torch.rad2deg(theta)


def hdi_ceiling(H: int, k: int, d: int) -> float:
    """Largest attainable subspace HDI for H subspaces of dimension k in ``R^d``.

    ``1`` when ``H·k <= d`` (mutually orthogonal subspaces exist). Otherwise the frame bound
    ``Σ_{h≠h'} ‖U_hᵀU_h'‖_F² >= (Hk)²/d − Hk`` gives ``mean_{h<h'} s >= (Hk/d − 1)/(H − 1)``,
    so ``HDI <= 1 − (Hk/d − 1)/(H − 1)`` (attained by tight fusion frames).

    Parameters
    ----------
    H : int
        ``H >= 2``.
    k, d : int
        ``1 <= k <= d``.
    """
    H = check_int("H", H, min=2)
    d = check_int("d", d, min=1)
    k = check_int("k", k, min=1, max=d)
    if H * k <= d:
        return 1.0
    return 1.0 - (H * k / d - 1.0) / (H - 1)


def _bartlett(rng: np.random.Generator, samples: int, d: int, k: int) -> torch.Tensor:
    """Lower-triangular ``L`` ``(S, k, k)`` with ``L Lᵀ ~ Wishart_k(d, I)`` (Bartlett decomposition):
    ``L_ii² ~ χ²_{d−i}`` (i from 0), entries below the diagonal standard normal."""
    low = torch.from_numpy(rng.standard_normal((samples, k, k))).tril(-1)
    diag = torch.from_numpy(np.sqrt(rng.chisquare(d - np.arange(k), size=(samples, k))))
    return low + torch.diag_embed(diag)  # (S, k, k)


@functools.lru_cache(maxsize=64)
def shape_moments(d: int, k: int, kind: str = "gaussian", samples: int = 512) -> tuple[float, float]:
    """``(E ρ, E ρ²)`` of the shape statistic ``ρ = tr G / ‖G‖_F`` of a head's Gram matrix ``G = WᵀW``.

    ``kind="gaussian"``: ``W`` ``d × k`` with i.i.d. N(0, 1) entries, ``G ~ Wishart_k(d, I)``.
    ``kind="product"``: ``W = W_Oᵀ L`` with ``L Lᵀ = W_VᵀW_V``, both Gaussian; ``G`` then has the
    eigenvalues of ``G_1 G_2`` for two independent ``Wishart_k(d, I)``.

    ``ρ`` is scale-free and concentrated (``ρ² ∈ [1, k]``); the moments come from a fixed-seed Monte
    Carlo over ``k × k`` Bartlett factors (never a ``d × k`` matrix). For Gaussian heads one moment is
    exact in closed form: ``E[1/ρ²] = E‖G‖_F² / E(tr G)² = kd(d + k + 1)/(kd(kd + 2))`` (``tr G`` is
    independent of ``G / tr G``, and ``E‖G‖_F² = kd(d + k + 1)``), so ``E ρ² ≈ (kd + 2)/(d + k + 1)``;
    ``u = 1/ρ²`` with that known mean serves as a control variate, which removes the first-order
    sampling error of both moments.
    """
    d = check_int("d", d, min=2)
    k = check_int("k", k, min=1, max=d)
    check_choice("kind", kind, NULL_KINDS)
    samples = check_int("samples", samples, min=2)
    rng = np.random.default_rng(0)
    L1 = _bartlett(rng, samples, d, k)
    if kind == "gaussian":
        G = L1 @ L1.transpose(-1, -2)  # (S, k, k)
    else:
        L2 = _bartlett(rng, samples, d, k)
        G = L1.transpose(-1, -2) @ (L2 @ L2.transpose(-1, -2)) @ L1  # (S, k, k), eigenvalues of G1 G2
    rho = G.diagonal(dim1=-2, dim2=-1).sum(-1) / torch.linalg.matrix_norm(G)  # (S,)
    if kind == "product":
        return float(rho.mean()), float(rho.square().mean())
    # control variate u = 1/ρ², whose mean is known exactly: removes the first-order sampling error
    u = rho.square().reciprocal()
    mu = (d + k + 1) / (k * d + 2)
    du = u - u.mean()
    out = []
    for f in (rho, rho.square()):
        c = float((du * (f - f.mean())).sum() / du.square().sum().clamp_min(1e-300))
        out.append(float(f.mean() - c * (u.mean() - mu)))
    return out[0], out[1]


def weight_null_hdi(d: int, k: int, H: int, kind: str = "gaussian") -> tuple[float, float]:
    """Mean and sd of the WEIGHT-form HDI of ``H`` independent random heads (``d × k`` Gaussian weights).

    Derivation. Write a head as ``W = Q G^{1/2}`` with ``G = WᵀW`` and ``Q`` its polar factor; for any
    left-rotation-invariant law (i.i.d. Gaussian entries, or ``W_Oᵀ L`` as in ``kind="product"``) ``Q`` is
    a uniformly random frame independent of ``G``. Let ``α`` be the eigenvalues of ``G/‖G‖_F`` (so
    ``Σα² = 1``) and ``ρ = Σα = tr G/‖G‖_F``. Rotating each Gram matrix to its eigenbasis, the overlap of
    heads ``h, h'`` is ``s = Σ_{a,c ≤ k} α_a β_c O_ac²`` with ``O`` a Haar-random orthogonal ``d × d`` matrix.
    The Haar moments ``E O² = 1/d``, ``E O⁴ = 3/(d(d+2))``, ``E O_ac² O_ac'² = 1/(d(d+2))`` (same row or
    column) and ``E O_ac² O_a'c'² = (d+1)/(d(d−1)(d+2))`` give, with ``p = ρ²``,

    - ``E[s | G, G'] = ρ ρ'/d``,
    - ``E[s² | G, G'] = (1 + p + p')/(d(d+2)) + (d+1)(p−1)(p'−1)/(d(d−1)(d+2))``.

    Given all Gram matrices, overlaps of distinct pairs are uncorrelated (``E[s_hh' | Q_h]`` does not
    depend on ``Q_h``), so only the spread of ``ρ`` correlates two pairs sharing a head:
    ``Cov = m1²(m2 − m1²)/d²`` with ``m1 = E ρ``, ``m2 = E ρ²``. Hence

    ``HDI_null = 1 − m1²/d``,
    ``Var(s) = (1 + 2m2)/(d(d+2)) + (d+1)(m2 − 1)²/(d(d−1)(d+2)) − m1⁴/d²``,
    ``Var(HDI) = [P·Var(s) + 2H·C(H−1, 2)·Cov]/P²`` over the ``P = H(H−1)/2`` pairs.

    For orthonormal frames ``ρ² = k`` and this reduces to the subspace null. For Gaussian heads
    ``m1² ≈ (kd + 2)/(d + k + 1)`` (:func:`shape_moments`), so ``HDI_null ≈ 1 − k/(d + k + 1)``: the
    spread of a head's singular values makes random heads overlap less than random subspaces.

    Parameters
    ----------
    d, k : int
        ``2 <= d``, ``1 <= k <= d``.
    H : int
        Number of heads, ``H >= 2``.
    kind : {"gaussian", "product"}
        Law of the weights (see :func:`shape_moments`).

    Returns
    -------
    (mean, sd) : tuple of float
    """
    d = check_int("d", d, min=2)
    k = check_int("k", k, min=1, max=d)
    H = check_int("H", H, min=2)
    m1, m2 = shape_moments(d, k, kind)
    P = H * (H - 1) // 2
    var_s = (1 + 2 * m2) / (d * (d + 2)) + (d + 1) * (m2 - 1) ** 2 / (d * (d - 1) * (d + 2)) - m1**4 / d**2
    cov = m1**2 * max(m2 - m1**2, 0.0) / d**2
    shared = 2 * H * math.comb(H - 1, 2)  # ordered pairs of pairs with exactly one head in common
    return 1.0 - m1**2 / d, math.sqrt(max(P * var_s + shared * cov, 0.0)) / P
