"""Orthonormal bases and principal angles between head subspaces (docs/ensemble.md A3).

A head's subspace is the column space of its ``d × k`` projection. Bases come from a thin SVD with
a numerical rank (singular values ``σ_i > rtol · σ_max``; default ``rtol = max(d, k) · eps`` of the
INPUT dtype, the convention of ``numpy.linalg.matrix_rank``); computation is in float64.
Principal angles use cosines for large angles and sines for small ones, so both ends are accurate
to about machine epsilon.
"""

from __future__ import annotations

import math

import torch

from attnlab.core.validation import check_real, check_tensor

__all__ = ["bases", "bases_sv", "head_pairs", "orthonormal_basis", "pairwise_angles", "principal_angles"]

_DT = torch.float64
_PAIR_CHUNK_ELEMS = 1 << 23  # at most ~8M float64 (64 MiB) in one batched pair computation


def _default_rtol(W: torch.Tensor) -> float:
    eps = torch.finfo(W.dtype).eps if W.is_floating_point() else torch.finfo(_DT).eps
    return max(W.shape[-2], W.shape[-1]) * eps


def bases(W: torch.Tensor, rtol: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched orthonormal bases: U (H, d, m) with columns beyond each rank zeroed, ranks (H,)."""
    U, _, ranks = bases_sv(W, rtol)
    return U, ranks


def bases_sv(W: torch.Tensor, rtol: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`bases` plus the singular values S (H, m) of each head."""
    tol = _default_rtol(W) if rtol is None else rtol
    U, S, _ = torch.linalg.svd(W.to(_DT), full_matrices=False)  # U (H, d, m), S (H, m), m = min(d, k)
    smax = S[..., :1]  # (H, 1)
    keep = S > tol * smax  # (H, m); S sorted descending, so a prefix
    ranks = keep.sum(dim=-1)  # (H,)
    return U * keep.unsqueeze(-2).to(_DT), S, ranks


def orthonormal_basis(W: torch.Tensor, rtol: float | None = None) -> tuple[torch.Tensor, int]:
    """Orthonormal basis of the column space of ``W`` by thin SVD, and its numerical rank.

    Parameters
    ----------
    W : Tensor, shape (d, k)
    rtol : float, optional
        Singular values ``σ_i ≤ rtol · σ_max`` count as zero. Default ``max(d, k) · eps`` with
        ``eps`` the machine epsilon of ``W``'s dtype.

    Returns
    -------
    U : Tensor, shape (d, r), float64
        Orthonormal columns spanning range(W).
    r : int
        The numerical rank (``1 ≤ r ≤ min(d, k)``).

    Raises
    ------
    ValueError
        If ``W`` is not a finite 2-d tensor, or has rank 0.
    """
    check_tensor("W", W, ndim=2)
    if rtol is not None:
        check_real("rtol", rtol, min=0.0, max=1.0, max_open=True)
    if W.numel() == 0:
        raise ValueError(f"W: expected a non-empty (d, k) matrix, got shape {tuple(W.shape)}")
    U, ranks = bases(W.unsqueeze(0), rtol)
    r = int(ranks[0])
    if r == 0:
        raise ValueError("W: expected a matrix of rank >= 1, got a zero matrix")
    return U[0, :, :r], r


def _angles_from_bases(UA: torch.Tensor, UB: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Principal angles (radians, ascending) for batched zero-padded bases.

    ``UA`` (P, d, k) is the basis of the larger-rank subspace of each pair, ``UB`` (P, d, k) of the
    smaller one, columns beyond the rank zero; ``m`` (P,) the number of angles, min of the ranks.
    Returns (P, k) with nan beyond ``m``. Uses cosines for large angles and sines (norms of the
    components of the principal vectors orthogonal to ``UA``) for small ones, so both ends are
    accurate to about machine epsilon.
    """
    k = UB.shape[-1]
    M = UA.transpose(-1, -2) @ UB  # (P, k, k)  U_Aᵀ U_B
    Y, cos, Zh = torch.linalg.svd(M)  # cos (P, k) descending; the top m are the true cosines
    # principal vectors of B are UB z_i; their components orthogonal to range(UA) are
    # UB z_i − UA (M z_i) = UB z_i − UA y_i cos_i, mutually orthogonal with norms sin θ_i
    RZ = UB @ Zh.transpose(-1, -2) - UA @ (Y * cos.unsqueeze(-2))  # (P, d, k)
    sin = torch.linalg.vector_norm(RZ, dim=-2).clamp(0.0, 1.0)  # (P, k) same order as cos
    cos = cos.clamp(0.0, 1.0)
    idx = torch.arange(k, device=UB.device)  # (k,)
    valid = idx.unsqueeze(0) < m.unsqueeze(1)  # (P, k)
    theta = torch.where(cos > math.sqrt(0.5), torch.arcsin(sin), torch.arccos(cos))  # (P, k) ascending
    return torch.where(valid, theta, torch.full_like(theta, math.nan))


def principal_angles(A: torch.Tensor, B: torch.Tensor, rtol: float | None = None) -> torch.Tensor:
    """Principal angles between the column spaces of ``A`` and ``B``.

    Parameters
    ----------
    A : Tensor, shape (d, k1)
    B : Tensor, shape (d, k2)
    rtol : float, optional
        Rank tolerance of :func:`orthonormal_basis`.

    Returns
    -------
    Tensor, shape (min(r1, r2),), float64
        Angles in radians, ascending, ``θ_i = arccos σ_i(U_Aᵀ U_B)`` (computed from sines when
        small, for accuracy).
    """
    check_tensor("A", A, ndim=2)
    check_tensor("B", B, ndim=2)
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"B: expected {A.shape[0]} rows (the same ambient dimension as A), got {B.shape[0]}")
    UA, ra = orthonormal_basis(A, rtol)
    UB, rb = orthonormal_basis(B, rtol)
    if ra < rb:
        UA, UB, ra, rb = UB, UA, rb, ra
    k = max(ra, rb)
    pad_b = torch.zeros(UB.shape[0], k, dtype=_DT, device=UB.device)
    pad_b[:, :rb] = UB
    th = _angles_from_bases(UA.unsqueeze(0), pad_b.unsqueeze(0), torch.tensor([rb], device=UB.device))
    return th[0, :rb]


def head_pairs(H: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(i, j)`` of every pair of heads ``i < j`` (row-major upper triangle), each (P,)."""
    iu = torch.triu_indices(H, H, offset=1, device=device)  # (2, P)
    return iu[0], iu[1]


def pairwise_angles(U: torch.Tensor, ranks: torch.Tensor, gram: torch.Tensor | None = None) -> torch.Tensor:
    """All pairwise principal angles (radians) of padded bases U (H, d, k): (P, k), nan-padded.

    With ``gram`` ``(H, k, H, k)`` (blocks ``U_hᵀ U_h'``, already computed for the overlaps) the
    cosines come from ``k × k`` SVDs of its blocks and the ``d``-dimensional sine computation is only
    made for the pairs that have an angle below 45° (where cosines lose accuracy).
    """
    H, d, k = U.shape
    i, j = head_pairs(H, U.device)
    swap = ranks[i] < ranks[j]  # make A the larger-rank member of each pair
    a = torch.where(swap, j, i)
    b = torch.where(swap, i, j)
    m = torch.minimum(ranks[i], ranks[j])  # (P,)
    P = i.numel()
    if P == 0:
        return torch.empty(0, k, dtype=_DT, device=U.device)
    if gram is not None:
        M = gram[a, :, b, :]  # (P, k, k)  U_Aᵀ U_B
        cos = torch.linalg.svdvals(M).clamp(0.0, 1.0)  # (P, k) descending
        theta = torch.arccos(cos)
        valid = torch.arange(k, device=U.device).unsqueeze(0) < m.unsqueeze(1)
        theta = torch.where(valid, theta, torch.full_like(theta, math.nan))
        near = torch.nonzero(cos[:, 0] > math.sqrt(0.5)).flatten()  # pairs needing the sine path
        if near.numel():
            theta[near] = _pairwise_subset(U, a[near], b[near], m[near])
        return theta
    return _pairwise_subset(U, a, b, m)


def _pairwise_subset(U: torch.Tensor, a: torch.Tensor, b: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    _, d, k = U.shape
    chunk = max(1, _PAIR_CHUNK_ELEMS // max(1, d * k))
    out = []
    for s in range(0, a.numel(), chunk):  # chunks bound memory; each chunk is one batched SVD
        sl = slice(s, s + chunk)
        out.append(_angles_from_bases(U[a[sl]], U[b[sl]], m[sl]))
    return torch.cat(out, dim=0)
