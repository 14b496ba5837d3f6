"""Subspace geometry of attention heads: principal angles, overlaps, the Head Diversity Index.

This module is the one home of the geometry of docs/ensemble.md A3, used by paper A (``ensemble``) and
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

``HDI = 1 − mean_{h<h'} overlap_hh'``. The null model of the form (random subspaces for the
subspace form, i.i.d. Gaussian weights for the weight form, the heads' own weights under independent
random rotations for the raw form) and the frame-bound ceiling come with every HDI (:func:`diversity`).

Bases and principal angles live in :mod:`attnlab.core.angles`, the null models (subspace and
weight forms) in :mod:`attnlab.core.nulls`; both are re-exported here.

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
from dataclasses import dataclass

import torch

from attnlab.core.angles import (
    _default_rtol,
    _pairwise_subset,
    bases,
    bases_sv,
    head_pairs,
    orthonormal_basis,
    pairwise_angles,
    principal_angles,
)
from attnlab.core.nulls import hdi_ceiling, null_from_ranks, null_hdi, null_principal_angles, weight_null_hdi
from attnlab.core.raw_null import raw_null_hdi
from attnlab.core.validation import all_finite, check_choice, check_real, check_tensor

__all__ = [
    "FORMS",
    "Diversity",
    "orthonormal_basis",
    "principal_angles",
    "overlap_matrix",
    "diversity",
    "diversity_with_weight",
    "null_hdi",
    "null_principal_angles",
    "weight_null_hdi",
    "hdi_ceiling",
]

#: The named overlap forms (see the module docstring).
FORMS = ("subspace", "weight", "raw")

_DT = torch.float64


def _check_stack(W: object, name: str = "W") -> torch.Tensor:
    W = check_tensor(name, W, ndim=3, finite=False)
    if W.shape[1] == 0 or W.shape[2] == 0 or W.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty (H, d, k) stack, got shape {tuple(W.shape)}")
    if W.is_floating_point() and not all_finite(W):  # checked after the shape, as before
        raise ValueError(f"{name}: expected finite values, got a tensor containing nan or inf")
    return W


#: Largest condition number ``σ_max/σ_min`` of a head for which :func:`_gram_bases_sv` is used: its bases
#: are orthonormal to about ``eps · κ²`` (1e-10 here), so overlaps and angles agree with the SVD's to that.
_GRAM_COND = 1e3


#: Smallest ``H·k`` at which the fast path forms the Gram matrix of the bases in float32 products (below
#: it the ``d·(H·k)²`` products are cheap and stay float64).
_F32_GRAM_MIN = 1024


def _gram_bases_sv(
    W: torch.Tensor, rtol: float | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """:func:`bases_sv` from the eigen-decomposition of each head's ``k × k`` Gram matrix ``W_hᵀ W_h =
    V Λ Vᵀ``: ``S = √Λ``, ``U = W V S⁻¹`` (half the work of a thin SVD, no ``d``-sized workspace).
    Squaring the matrix squares its condition number, so None (use the SVD) when a head's ``κ`` exceeds
    ``_GRAM_COND`` or ``k > d``."""
    H, d, k = W.shape
    if k > d:
        return None
    W64 = W.to(_DT)
    lam, V = torch.linalg.eigh(W64.transpose(-1, -2) @ W64)  # (H, k) ascending, (H, k, k)
    if not bool((lam[:, 0] > lam[:, -1] / _GRAM_COND**2).all()):
        return None
    S = lam.flip(-1).sqrt()  # (H, k) descending
    tol = _default_rtol(W) if rtol is None else rtol
    keep = S > tol * S[:, :1]  # (H, k) a prefix, as in bases_sv
    T = V.flip(-1) * (keep.to(_DT) / S).unsqueeze(-2)  # (H, k, k): columns V_a / s_a, zero beyond the rank
    return W64 @ T, S, keep.sum(dim=-1)


def _pairwise_angles_fast(U: torch.Tensor, ranks: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """:func:`pairwise_angles` with the cosines from the eigenvalues of ``MᵀM`` (``M = U_aᵀU_b``, a
    symmetric solve, cheaper than the SVD): ``cos² `` to ~1e-16 absolute, so a cosine near 0 is off by
    at most ~1e-8 (the float32 Gram of the fast path is coarser, ~1e-7); pairs with an angle below 45°
    go through the same sine path as :func:`pairwise_angles`."""
    H, _, k = U.shape
    i, j = head_pairs(H, U.device)
    swap = ranks[i] < ranks[j]  # A the larger-rank member of each pair
    a, b = torch.where(swap, j, i), torch.where(swap, i, j)
    m = torch.minimum(ranks[i], ranks[j])  # (P,)
    if i.numel() == 0:
        return torch.empty(0, k, dtype=_DT, device=U.device)
    M = gram[a, :, b, :].to(_DT)  # (P, k, k)  U_Aᵀ U_B
    cos = torch.linalg.eigvalsh(M.transpose(-1, -2) @ M).flip(-1).clamp(0.0, 1.0).sqrt()  # (P, k) descending
    valid = torch.arange(k, device=U.device).unsqueeze(0) < m.unsqueeze(1)
    theta = torch.where(valid, torch.arccos(cos), torch.full_like(cos, math.nan))
    near = torch.nonzero(cos[:, 0] > math.sqrt(0.5)).flatten()  # pairs needing the sine path
    if near.numel():
        theta[near] = _pairwise_subset(U, a[near], b[near], m[near])
    return theta


def _block_gram(U: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``(H, k, H, k)``: block ``(h, h')`` is ``U_hᵀ U_h'``; the upper block triangle is computed and
    mirrored (half the products of one ``(H·k) × (H·k)`` Gram matrix). ``dtype``: the products' and the
    result's dtype (default U's)."""
    H, d, k = U.shape
    flat = U.permute(1, 0, 2).to(dtype or U.dtype).reshape(d, H * k)  # (d, H·k) all bases side by side
    return _block_gram_flat(flat, H, k)


def _block_gram_flat(flat: torch.Tensor, H: int, k: int) -> torch.Tensor:
    if H < 8:
        return (flat.transpose(0, 1) @ flat).reshape(H, k, H, k)
    out = torch.empty(H * k, H * k, dtype=flat.dtype, device=flat.device)
    step = max(1, H // 8) * k  # 8 block rows
    for s in range(0, H * k, step):
        e = min(s + step, H * k)
        blk = flat[:, s:e].transpose(0, 1) @ flat[:, s:]  # (rows, H·k − s)
        out[s:e, s:] = blk
        out[s:, s:e] = blk.transpose(0, 1)
    return out.reshape(H, k, H, k)


def _subspace_overlap(
    U: torch.Tensor,
    ranks: torch.Tensor,
    gram: torch.Tensor | None = None,
    gram_sq: torch.Tensor | None = None,
) -> torch.Tensor:
    if gram_sq is None:
        gram_sq = (_block_gram(U) if gram is None else gram).square()
    sq = gram_sq.sum(dim=(1, 3), dtype=_DT)  # (H, H)  ‖U_hᵀ U_h'‖_F²
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
        U, ranks = bases(W, rtol)
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


@dataclass(frozen=True)
class Diversity:
    """The diversity of a stack of heads, with its null model and ceiling.

    Attributes
    ----------
    hdi : float
        ``1 − mean_{h<h'} overlap_hh'`` in the chosen form.
    hdi_null : float
        Mean HDI of the form's null: independent uniformly random subspaces of the same ranks
        (subspace form), independent i.i.d. Gaussian weights of the same shape (weight form; nan
        when ``k > d``); for the raw form, whose value depends on the weights' scale, each head's
        weights kept and rotated by an independent Haar rotation of ``R^d``
        (:func:`attnlab.core.raw_null.raw_null_hdi`, exact moments).
    hdi_null_sd : float
        Its standard deviation; 0 when the null is degenerate.
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
    div, _ = _diversity(W, form, rtol, weight=False)
    return div


def diversity_with_weight(
    W: torch.Tensor, rtol: float | None = None, *, fast: bool = False
) -> tuple[Diversity, torch.Tensor]:
    """:func:`diversity` in the subspace form and the weight-form overlap matrix ``(H, H)``, from one
    SVD per head and one Gram matrix of the bases: with ``W_h = U_h S_h V_hᵀ``,
    ``‖W_hᵀ W_h'‖_F² = Σ_ab s_ha² s_h'b² (U_hᵀ U_h')_ab²`` and ``‖W_hᵀ W_h‖_F² = Σ_a s_ha⁴``.

    ``fast=True`` (what ``diagnose`` uses on real models) takes each head's ``U_h, S_h`` from the
    eigen-decomposition of its ``k × k`` Gram matrix instead of a thin SVD when every head's condition
    number is at most 1e3 (else the SVD; bases orthonormal to ~1e-10), takes the principal angles'
    cosines from symmetric eigenvalue solves, and, when ``H·k >= 1024``, forms the Gram matrix of the
    bases (the cosines between heads) in float32 products: the cosines then carry an absolute error of
    about 1e-7, and the overlaps and HDIs agree with the default to ~1e-9, the angles to ~1e-6 degrees;
    about half the cost at the size of a 1B model.
    """
    W = _check_stack(W)
    if not isinstance(fast, bool):
        raise ValueError(f"fast: expected True or False, got {fast!r}")
    if rtol is not None:
        check_real("rtol", rtol, min=0.0, max=1.0, max_open=True)
    if W.shape[0] < 2:
        raise ValueError(f"W: expected at least 2 heads (H >= 2) for a pairwise index, got H = {W.shape[0]}")
    div, wov = _diversity(W, "subspace", rtol, weight=True, fast=fast)
    assert wov is not None
    return div, wov


def _diversity(
    W: torch.Tensor, form: str, rtol: float | None, weight: bool, fast: bool = False
) -> tuple[Diversity, torch.Tensor | None]:
    H, d, _ = W.shape
    gb = _gram_bases_sv(W, rtol) if fast else None
    U, S, ranks_t = bases_sv(W, rtol) if gb is None else gb
    del gb
    _check_ranks(ranks_t)
    f32 = fast and H * U.shape[2] >= _F32_GRAM_MIN
    # (H, k, H, k) shared by overlaps and angles; float32 products are kept in float32 (half the memory:
    # 128 MB at d = 4096, H·k = 4096), the pairs' blocks promoted to float64 when the angles are taken
    gram = _block_gram(U, torch.float32 if f32 else None)
    gram_sq = gram.square()  # (H, k, H, k) shared by the subspace and weight overlaps
    wov = None
    if weight:
        s2 = S.square()  # (H, m)
        m = s2.shape[1]
        # Σ_ab s_ha² s_h'b² (U_hᵀU_h')_ab² as Bᵀ (G² B) with B (H·m, H) holding s_h² in block column h:
        # two thin products, no (H, m, H, m) temporary
        B = (s2.unsqueeze(-1) * torch.eye(H, dtype=_DT, device=s2.device).unsqueeze(1)).reshape(H * m, H)
        num = B.transpose(0, 1) @ (gram_sq.reshape(H * m, H * m).to(_DT) @ B)  # (H, H)  ‖W_hᵀ W_h'‖_F²
        self_norm = s2.square().sum(-1).sqrt()  # (H,)
        wov = num / (self_norm.unsqueeze(1) * self_norm.unsqueeze(0))
    if form == "subspace":
        ov = _subspace_overlap(U, ranks_t, gram, gram_sq)
    else:
        ov = overlap_matrix(W, form)
    del gram_sq
    i, j = head_pairs(H, ov.device)
    hdi = 1.0 - float(ov[i, j].mean())
    if form != "raw":
        hdi = min(1.0, max(0.0, hdi))  # bounded forms: clip rounding (~1e-15) back into [0, 1]
    ranks = tuple(int(r) for r in ranks_t.tolist())
    k = W.shape[2]
    if form == "raw":  # each head's weights kept, placed by independent Haar rotations (core.raw_null)
        null_m, null_sd = raw_null_hdi(W) if d >= 2 else (math.nan, math.nan)
    elif form == "weight":  # i.i.d. Gaussian weights of the same shape (nulls.weight_null_hdi)
        null_m, null_sd = weight_null_hdi(d, k, H) if 2 <= d and k <= d else (math.nan, math.nan)
    else:
        null_m, null_sd = null_from_ranks(d, ranks)
    z = (hdi - null_m) / null_sd if null_sd > 0 else math.nan
    kmax = max(ranks)
    pairs = _pairwise_angles_fast if fast else pairwise_angles
    theta = pairs(U[:, :, :kmax], ranks_t, gram[:, :kmax, :, :kmax])  # (P, kmax) radians
    angles = torch.rad2deg(theta)
    fin = angles[~torch.isnan(angles)]
    mean_angle = float(fin.mean()) if fin.numel() else math.nan
    k_ceiling = sum(ranks) / H
    ceiling = 1.0 if H * k_ceiling <= d else 1.0 - (H * k_ceiling / d - 1.0) / (H - 1)
    div = Diversity(
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
    return div, wov
