"""Subspace geometry of attention heads: principal angles, overlaps, the Head Diversity Index.

This module is the one home of the geometry of THEORY.md A3, used by paper A (``ensemble``) and
by the real-model diagnostics. Every function takes a stack of per-head matrices
``W`` of shape ``[H, d, k]`` (model dimension ``d``, per-head dimension ``k = d_k``); the head's
subspace is the COLUMN space of ``W[h]`` in ``R^d``.

Forms of the overlap between heads ``h`` and ``h'`` (:func:`overlap_matrix`):

``"subspace"`` (default)
    ``s_hh' = ‖U_hᵀ U_h'‖_F² / √(r_h r_h')`` with ``U_h`` an orthonormal basis of range(W_h) of
    numerical rank ``r_h``; the mean squared cosine of the principal angles when ranks agree.
    Invariant to the scale and to any invertible right factor of ``W_h``. In ``[0, 1]``.
``"weight"``
    ``‖W_hᵀ W_h'‖_F² / (‖W_hᵀ W_h‖_F ‖W_h'ᵀ W_h'‖_F)``: weight-aware, in ``[0, 1]`` by
    Cauchy–Schwarz, equal to the subspace form when every ``W_h`` is a multiple of an orthonormal
    frame.
``"raw"``
    The literal ``‖G_hh'‖_F²`` with ``G_hh' = W_hᵀ W_h' / d_k``: depends on the scale of the weights,
    not bounded by one, and not 0 for identical heads unless they are normalised.

``HDI = 1 − mean_{h<h'} overlap_hh'``. The random-subspace null model (uniform on the
Grassmannian) and the frame-bound ceiling come with every HDI (:func:`diversity`).

Numerical rank
--------------
:func:`orthonormal_basis` keeps the singular values ``σ_i > rtol · σ_max``; the default
``rtol = max(d, k) · eps`` with ``eps`` the machine epsilon of the INPUT dtype (the convention of
``numpy.linalg.matrix_rank``). Computation is in float64 whatever the input dtype.

Edge cases
----------
- ``H < 2``: :func:`diversity` raises ``ValueError`` (an index over pairs needs a pair);
  :func:`overlap_matrix` returns the ``1 × 1`` self-overlap.
- rank-deficient heads: the numerical rank ``r_h < k`` is used everywhere (the subspace form
  normalises by ``√(r_h r_h')``, the null model uses the ranks); a head of rank 0 (all zeros)
  raises ``ValueError``.
- ``k > d``: allowed; a head's subspace then has dimension at most ``d`` (its numerical rank).
  Heads that each span all of ``R^d`` have HDI = 0, which is also the ceiling.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnlab.core.validation import check_choice, check_int, check_real, check_tensor

__all__ = [
    "FORMS",
    "Diversity",
    "orthonormal_basis",
    "principal_angles",
    "overlap_matrix",
    "diversity",
    "null_hdi",
    "null_principal_angles",
    "hdi_ceiling",
]

#: The named overlap forms (see the module docstring).
FORMS = ("subspace", "weight", "raw")

_DT = torch.float64
_PAIR_CHUNK_ELEMS = 1 << 23  # at most ~8M float64 (64 MiB) in one batched pair computation


# --------------------------------------------------------------------------------------------
# bases and angles


def _default_rtol(W: torch.Tensor) -> float:
    eps = torch.finfo(W.dtype).eps if W.is_floating_point() else torch.finfo(_DT).eps
    return max(W.shape[-2], W.shape[-1]) * eps


def _bases(W: torch.Tensor, rtol: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched orthonormal bases: U (H, d, m) with columns beyond each rank zeroed, ranks (H,)."""
    tol = _default_rtol(W) if rtol is None else rtol
    U, S, _ = torch.linalg.svd(W.to(_DT), full_matrices=False)  # U (H, d, m), S (H, m), m = min(d, k)
    smax = S[..., :1]  # (H, 1)
    keep = S > tol * smax  # (H, m); S sorted descending, so a prefix
    ranks = keep.sum(dim=-1)  # (H,)
    return U * keep.unsqueeze(-2).to(_DT), ranks


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
    U, ranks = _bases(W.unsqueeze(0), rtol)
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


def _pairs(H: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    iu = torch.triu_indices(H, H, offset=1, device=device)  # (2, P)
    return iu[0], iu[1]


def _pairwise_angles(U: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    """All pairwise principal angles (radians) of padded bases U (H, d, k): (P, k), nan-padded."""
    H, d, k = U.shape
    i, j = _pairs(H, U.device)
    swap = ranks[i] < ranks[j]  # make A the larger-rank member of each pair
    a = torch.where(swap, j, i)
    b = torch.where(swap, i, j)
    m = torch.minimum(ranks[i], ranks[j])  # (P,)
    P = i.numel()
    chunk = max(1, _PAIR_CHUNK_ELEMS // max(1, d * k))
    out = []
    for s in range(0, P, chunk):  # chunks bound memory; each chunk is one batched SVD
        sl = slice(s, s + chunk)
        out.append(_angles_from_bases(U[a[sl]], U[b[sl]], m[sl]))
    return torch.cat(out, dim=0) if out else torch.empty(0, k, dtype=_DT, device=U.device)


# --------------------------------------------------------------------------------------------
# overlaps and the HDI


def _check_stack(W: object, name: str = "W") -> torch.Tensor:
    W = check_tensor(name, W, ndim=3)
    if W.shape[1] == 0 or W.shape[2] == 0 or W.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty (H, d, k) stack, got shape {tuple(W.shape)}")
    return W


def _subspace_overlap(U: torch.Tensor, ranks: torch.Tensor) -> torch.Tensor:
    H, d, k = U.shape
    flat = U.permute(1, 0, 2).reshape(d, H * k)  # (d, H·k) all bases side by side
    gram = flat.transpose(0, 1) @ flat  # (H·k, H·k), block (h, h') = U_hᵀ U_h'
    sq = gram.square().reshape(H, k, H, k).sum(dim=(1, 3))  # (H, H)  ‖U_hᵀ U_h'‖_F²
    r = ranks.to(_DT)
    return sq / torch.sqrt(r.unsqueeze(1) * r.unsqueeze(0))


def _weight_products(W: torch.Tensor) -> torch.Tensor:
    H, d, k = W.shape
    flat = W.permute(1, 0, 2).reshape(d, H * k)  # (d, H·k)
    gram = flat.transpose(0, 1) @ flat  # (H·k, H·k), block (h, h') = W_hᵀ W_h'
    return gram.square().reshape(H, k, H, k).sum(dim=(1, 3))  # (H, H)  ‖W_hᵀ W_h'‖_F²


def overlap_matrix(W: torch.Tensor, form: str = "subspace", rtol: float | None = None) -> torch.Tensor:
    """Pairwise overlaps of the heads' subspaces, in one of the named forms.

    Parameters
    ----------
    W : Tensor, shape (H, d, k)
        Per-head projections (e.g. ``W_K`` of one layer); column space in ``R^d``.
    form : {"subspace", "weight", "raw"}
        See the module docstring. Default ``"subspace"``.
    rtol : float, optional
        Rank tolerance (subspace form only; see :func:`orthonormal_basis`).

    Returns
    -------
    Tensor, shape (H, H), float64
        Symmetric. Diagonal 1 for the subspace and weight forms.
    """
    W = _check_stack(W)
    check_choice("form", form, FORMS)
    if rtol is not None:
        check_real("rtol", rtol, min=0.0, max=1.0, max_open=True)
    if form == "subspace":
        U, ranks = _bases(W, rtol)
        _check_ranks(ranks)
        return _subspace_overlap(U, ranks)
    W64 = W.to(_DT)
    sq = _weight_products(W64)  # (H, H)
    if form == "raw":
        return sq / W.shape[2] ** 2
    self_norm = torch.sqrt(torch.diagonal(sq))  # (H,)  ‖W_hᵀ W_h‖_F
    if bool((self_norm == 0).any()):
        h = int(torch.nonzero(self_norm == 0)[0, 0])
        raise ValueError(f"W: expected non-zero heads, got an all-zero head {h}")
    return sq / (self_norm.unsqueeze(1) * self_norm.unsqueeze(0))


def _check_ranks(ranks: torch.Tensor) -> None:
    if bool((ranks == 0).any()):
        h = int(torch.nonzero(ranks == 0)[0, 0])
        raise ValueError(f"W: expected heads of rank >= 1, got an all-zero head {h}")


def _null_from_ranks(d: int, ranks: Sequence[int]) -> tuple[float, float]:
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

    Exact (THEORY.md A3): one pair's overlap ``s = ‖UᵀU'‖_F²/k`` has mean ``k/d`` and variance
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
    return _null_from_ranks(d, [k] * H)


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


# --------------------------------------------------------------------------------------------
# the summary object


@dataclass(frozen=True)
class Diversity:
    """The diversity of a stack of heads, with its null model and ceiling.

    Attributes
    ----------
    hdi : float
        ``1 − mean_{h<h'} overlap_hh'`` in the chosen form.
    hdi_null : float
        Mean HDI of independent uniformly random subspaces of the same ranks (subspace and weight
        forms; nan for the raw form, whose value depends on the weights' scale).
    hdi_null_sd : float
        Its standard deviation (exact pairwise formula); 0 when the null is degenerate.
    z : float
        ``(hdi − hdi_null)/hdi_null_sd``; nan when the sd is 0 or the null undefined.
        Negative: heads share directions more than chance.
    form : str
        ``"subspace"``, ``"weight"`` or ``"raw"``.
    overlap : Tensor, shape (H, H)
        Pairwise overlaps in the chosen form.
    angles_deg : Tensor, shape (P, m)
        All principal angles (degrees, ascending) of each pair ``h < h'`` in ``torch.triu_indices``
        order; ``m`` the largest rank, nan-padded beyond the pair's ``min(r_h, r_h')``.
    mean_angle_deg : float
        Mean of all principal angles (degrees).
    ranks : tuple of int
        Numerical rank of each head.
    ceiling : float
        Largest attainable HDI (frame bound, :func:`hdi_ceiling`) for these ranks (mean rank when
        they differ).
    """

    hdi: float
    hdi_null: float
    hdi_null_sd: float
    z: float
    form: str
    overlap: torch.Tensor
    angles_deg: torch.Tensor
    mean_angle_deg: float
    ranks: tuple[int, ...]
    ceiling: float

    @property
    def n_heads(self) -> int:
        return len(self.ranks)

    @property
    def median_angle_deg(self) -> float:
        a = self.angles_deg[~torch.isnan(self.angles_deg)]
        return float(a.median()) if a.numel() else math.nan

    def __repr__(self) -> str:
        return (
            f"Diversity(form={self.form!r}, H={self.n_heads}, hdi={self.hdi:.6g}, "
            f"hdi_null={self.hdi_null:.6g} ± {self.hdi_null_sd:.3g}, z={self.z:.4g}, "
            f"mean_angle_deg={self.mean_angle_deg:.4g}, ceiling={self.ceiling:.6g}, ranks={self.ranks})"
        )


def diversity(W: torch.Tensor, form: str = "subspace", rtol: float | None = None) -> Diversity:
    """Head Diversity Index, principal angles, random-subspace null model and ceiling.

    Parameters
    ----------
    W : Tensor, shape (H, d, k)
        Per-head projections, ``H >= 2``.
    form : {"subspace", "weight", "raw"}
        Overlap form used for ``hdi`` (the angles, ranks, null and ceiling are always those of
        the subspaces).
    rtol : float, optional
        Rank tolerance (see :func:`orthonormal_basis`).

    Returns
    -------
    Diversity

    Examples
    --------
    >>> import torch
    >>> W = torch.eye(4, dtype=torch.float64).reshape(4, 2, 2).permute(1, 0, 2)  # (2, 4, 2) orthogonal
    >>> diversity(W).hdi
    1.0
    """
    W = _check_stack(W)
    check_choice("form", form, FORMS)
    if rtol is not None:
        check_real("rtol", rtol, min=0.0, max=1.0, max_open=True)
    H, d, _ = W.shape
    if H < 2:
        raise ValueError(f"W: expected at least 2 heads (H >= 2) for a pairwise index, got H = {H}")
    U, ranks_t = _bases(W, rtol)
    _check_ranks(ranks_t)
    if form == "subspace":
        ov = _subspace_overlap(U, ranks_t)
    else:
        ov = overlap_matrix(W, form)
    i, j = _pairs(H, ov.device)
    hdi = 1.0 - float(ov[i, j].mean())
    if form != "raw":
        hdi = min(1.0, max(0.0, hdi))  # bounded forms: clip rounding (~1e-15) back into [0, 1]
    ranks = tuple(int(r) for r in ranks_t.tolist())
    if form == "raw":
        null_m, null_sd = math.nan, math.nan
    else:
        null_m, null_sd = _null_from_ranks(d, ranks)
    z = (hdi - null_m) / null_sd if null_sd > 0 else math.nan
    kmax = max(ranks)
    theta = _pairwise_angles(U[:, :, :kmax], ranks_t)  # (P, kmax) radians
    angles = torch.rad2deg(theta)
    fin = angles[~torch.isnan(angles)]
    mean_angle = float(fin.mean()) if fin.numel() else math.nan
    k_ceiling = sum(ranks) / H
    ceiling = 1.0 if H * k_ceiling <= d else 1.0 - (H * k_ceiling / d - 1.0) / (H - 1)
    return Diversity(
        hdi=hdi,
        hdi_null=null_m,
        hdi_null_sd=null_sd,
        z=z,
        form=form,
        overlap=ov,
        angles_deg=angles,
        mean_angle_deg=mean_angle,
        ranks=ranks,
        ceiling=ceiling,
    )
