"""Paper B's objects for real heads: ``M_h = scale · W_Q W_Kᵀ`` and ``V_h = (W_V W_O)ᵀ`` as a dynamics.

Weights only (:func:`flow_defects`, :func:`cross_products`):

- symmetry defect ``‖M − Mᵀ‖_F / (2‖M‖_F)`` in [0, 1] (0: symmetric, 1: antisymmetric);
- value alignment ``cos(V, M) = ⟨V, M⟩_F / (‖V‖_F ‖M‖_F)`` and the defect
  ``‖V/‖V‖ − M/‖M‖‖_F / 2 = √((1 − cos)/2)`` in [0, 1] (the gradient-flow structure needs ``V_h = M_h``
  symmetric; the scale of ``V_h`` only rescales time, so directions are compared);
- ``‖M_h' M_h‖_op / (‖M_h'‖_op ‖M_h‖_op)`` for every ordered pair of heads: 0 in the orthogonal regime
  of Thm 39, at most 1.

Everything is computed from ``k × k`` products of the factors, never forming ``d × d`` matrices:
``‖M‖² = s² tr(AᵀA BᵀB)``, ``tr(MM) = s² tr((BᵀA)²)`` (``A = W_Q``, ``B = W_K``, ``s`` the scale),
``⟨V, M⟩ = s tr((BᵀW_V)(W_O A))``, ``‖V‖² = tr(W_VᵀW_V W_O W_Oᵀ)``, and
``M_h' M_h = s² A' (B'ᵀA) Bᵀ`` whose operator norm is that of ``R_{A'} (B'ᵀA) R_Bᵀ``.

On hidden states (:func:`radial_dominance`): the three forms of radial dominance of docs/flow.md B3,
softmax kind, β = 1 (the scale inside ``M_h``), tokens normalised to the unit sphere. Biases are not
part of ``M_h, V_h`` and are left out. The forms are evaluated by
:func:`attnlab.dynamics.radial_dominance` (one implementation, the same rounding slack ``rtol``);
:class:`RadialDominance` is that function's result (per-head forms, per-token fractions, ``‖P⊥f‖²``
and the shadows ``a_i^h``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab.core.validation import check_tensor
from attnlab.diagnose._blocks import head_blocks, promote, r_factors, scratch
from attnlab.diagnose.spectra import qk_triangular_factors
from attnlab.dynamics.observables import RadialDominance
from attnlab.dynamics.observables import radial_dominance as _radial_dominance

__all__ = [
    "FlowDefects",
    "RadialDominance",
    "cross_products",
    "flow_defects",
    "grouped_cross_products",
    "grouped_flow_defects",
    "radial_dominance",
]

_DT = torch.float64


def _tr(x: torch.Tensor) -> torch.Tensor:
    return x.diagonal(dim1=-2, dim2=-1).sum(-1)


@dataclass(frozen=True)
class FlowDefects:
    """Per-head distances from the gradient-flow structure (shapes: the leading dims of the input).

    Attributes
    ----------
    sym_defect : Tensor
        ``‖M − Mᵀ‖_F / (2‖M‖_F)``.
    value_cos : Tensor
        ``cos(V, M)`` in the Frobenius inner product.
    value_defect : Tensor
        ``‖V/‖V‖ − M/‖M‖‖_F / 2``.
    M_fro, V_fro : Tensor
        Frobenius norms of ``M_h`` and ``V_h``.
    """

    sym_defect: torch.Tensor
    value_cos: torch.Tensor
    value_defect: torch.Tensor
    M_fro: torch.Tensor
    V_fro: torch.Tensor


def flow_defects(
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    W_O: torch.Tensor,
    scale: torch.Tensor | float = 1.0,
) -> FlowDefects:
    """Symmetry and value-alignment defects of ``M_h = scale·W_Q W_Kᵀ``, ``V_h = (W_V W_O)ᵀ``.

    Parameters
    ----------
    W_Q, W_K, W_V : Tensor ``(..., d, k)``
    W_O : Tensor ``(..., k, d)``
    scale : float or Tensor broadcastable to the leading dims
    """
    check_tensor("W_Q", W_Q)
    shape = tuple(W_Q.shape)
    check_tensor("W_K", W_K, shape=shape)
    check_tensor("W_V", W_V, shape=shape)
    check_tensor("W_O", W_O, shape=(*shape[:-2], shape[-1], shape[-2]))
    A, B, Wv, Wo = (t.to(_DT) for t in (W_Q, W_K, W_V, W_O))
    s = torch.as_tensor(scale, dtype=_DT, device=A.device)
    At = A.transpose(-1, -2)
    Bt = B.transpose(-1, -2)
    m2 = s**2 * _tr((At @ A) @ (Bt @ B))  # ‖M‖_F²
    BtA = Bt @ A  # (..., k, k)
    trMM = s**2 * _tr(BtA @ BtA)
    asym2 = (2 * m2 - 2 * trMM).clamp_min(0.0)  # ‖M − Mᵀ‖_F²
    vm = s * _tr((Bt @ Wv) @ (Wo @ A))  # ⟨V, M⟩_F
    v2 = _tr((Wv.transpose(-1, -2) @ Wv) @ (Wo @ Wo.transpose(-1, -2)))  # ‖V‖_F²
    m_f, v_f = m2.sqrt(), v2.sqrt()
    cos = (vm / (m_f * v_f)).clamp(-1.0, 1.0)
    return FlowDefects(
        sym_defect=asym2.sqrt() / (2 * m_f),
        value_cos=cos,
        value_defect=((1 - cos) / 2).clamp_min(0.0).sqrt(),
        M_fro=m_f,
        V_fro=v_f,
    )


def cross_products(W_Q: torch.Tensor, W_K: torch.Tensor) -> torch.Tensor:
    """``‖M_g M_h‖_op / (‖M_g‖_op ‖M_h‖_op)`` for every ordered pair ``(g, h)`` of heads.

    Parameters
    ----------
    W_Q, W_K : Tensor ``(..., H, d, k)``

    Returns
    -------
    Tensor ``(..., H, H)``: entry ``[g, h]`` for the product ``M_g M_h``; the diagonal is
    ``‖M_h²‖_op / ‖M_h‖_op²``. The score scale cancels.
    """
    check_tensor("W_Q", W_Q)
    if W_Q.ndim < 3:
        raise ValueError(f"W_Q: expected a (..., H, d, k) tensor, got shape {tuple(W_Q.shape)}")
    check_tensor("W_K", W_K, shape=tuple(W_Q.shape))
    A, B = W_Q.to(_DT), W_K.to(_DT)
    Ra, Rb = qk_triangular_factors(A, B)  # (..., H, k, k)
    op = torch.linalg.matrix_norm(Ra @ Rb.transpose(-1, -2), ord=2)  # (..., H)  ‖M_h‖_op / s
    C = torch.einsum("...gdk,...hdl->...ghkl", B, A)  # (..., H, H, k, k)  B_gᵀ A_h
    prod = Ra.unsqueeze(-3) @ C @ Rb.unsqueeze(-4).transpose(-1, -2)  # (..., H, H, k, k)  R_{A_g} C R_{B_h}ᵀ
    num = torch.linalg.matrix_norm(prod, ord=2)  # (..., H, H)
    return num / (op.unsqueeze(-1) * op.unsqueeze(-2))


def radial_dominance(
    x: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    W_O: torch.Tensor,
    scale: torch.Tensor | float,
    *,
    beta: float = 1.0,
    causal: bool = False,
) -> RadialDominance:
    """Radial dominance of each head's softmax field at tokens ``x`` (normalised to the sphere here).

    ``f_i^h = Σ_j softmax_j(β ⟨x_i, M_h x_j⟩) V_h x_j`` with ``M_h = scale·W_Q W_Kᵀ``,
    ``V_h = (W_V W_O)ᵀ``; in rows ``F^h = softmax(β·scale·(X W_Q)(X W_K)ᵀ) X W_V W_O``.

    Parameters
    ----------
    x : Tensor ``(..., n, d)``
        token representations (one configuration per leading index, e.g. one per layer).
    W_Q, W_K, W_V : Tensor ``(..., H, d, k)``
    W_O : Tensor ``(..., H, k, d)``
    scale : float or Tensor broadcastable to the leading dims
    beta : float
        inverse temperature (1 for the model's own dynamics).
    causal : bool
        restrict token i to j ≤ i (decoder models), as the model does.
    """
    check_tensor("x", x)
    if x.ndim < 2:
        raise ValueError(f"x: expected a (..., n, d) tensor, got shape {tuple(x.shape)}")
    check_tensor("W_Q", W_Q)
    if W_Q.shape[-2] != x.shape[-1]:
        raise ValueError(f"W_Q: expected d = {x.shape[-1]} rows per head, got shape {tuple(W_Q.shape)}")
    X = x.to(_DT)
    X = X / X.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(_DT).tiny)  # (..., n, d) on the sphere
    Xh = X.unsqueeze(-3)  # (..., 1, n, d)
    q = Xh @ W_Q.to(_DT)  # (..., H, n, k)
    kk = Xh @ W_K.to(_DT)  # (..., H, n, k)
    v = Xh @ W_V.to(_DT)  # (..., H, n, k)
    s = torch.as_tensor(scale, dtype=_DT, device=X.device)[..., None, None, None]
    scores = beta * s * q @ kk.transpose(-1, -2)  # (..., H, n, n)
    if causal:
        n = x.shape[-2]
        future = torch.ones(n, n, dtype=torch.bool, device=X.device).triu(1)  # (n, n)
        scores = scores.masked_fill(future, float("-inf"))
    f = torch.softmax(scores, dim=-1) @ v @ W_O.to(_DT)  # (..., H, n, d)
    # one implementation of the three forms: the dynamics package's, with its rounding slack
    return _radial_dominance(f, X)


def grouped_cross_products(
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    kv_index: torch.Tensor,
    factors: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """:func:`attnlab.diagnose.flow.cross_products` for grouped K/V: ``W_K`` ``(H_kv, d, k)`` unexpanded.

    ``M_g M_h = s² A_g (B_gᵀ A_h) B_hᵀ`` with ``B_g = W_K[kv(g)]``, so the ``d``-long contractions
    ``B_jᵀ A_h`` are made once per distinct K head (``H_kv · H`` instead of ``H²``); the operator norm
    is that of ``R_{A_g} (B_gᵀ A_h) R_{B_h}ᵀ`` (thin-QR factors, or ``factors`` = ``(R_A, R_B)`` when the
    caller has them). ``W_Q``, ``W_K`` may be in any dtype: the pairs are taken in tiles of query heads
    ``h`` times blocks of K heads ``j``, each promoted to float64 when its tile is made (no float64 copy
    of either stack, no ``(H, H, k, k)`` array; the same products of the same values).
    Returns ``(H, H)``: ``‖M_g M_h‖_op / (‖M_g‖_op ‖M_h‖_op)``.
    """
    H, d, k = W_Q.shape
    Hkv = W_K.shape[0]
    dev = W_Q.device
    if factors is None:
        Ra, Rb = r_factors(W_Q), r_factors(W_K)  # (H, k, k), (H_kv, k, k)
    else:
        Ra, Rb = factors
    Rbe = Rb[kv_index]  # (H, k, k)
    op = torch.linalg.matrix_norm(Ra @ Rbe.transpose(-1, -2), ord=2)  # (H,)  ‖M_h‖_op / s
    out = torch.empty(H, H, dtype=_DT, device=dev)
    # query heads g in chunks of at most H/8 (the (chunk, tile, k, k) products stay a few MB)
    chunk = max(1, H // 8)
    a_buf, b_buf = scratch(H, d, k, blocks=2, device=dev), scratch(Hkv, d, k, device=dev)
    c_buf = torch.empty(a_buf.numel() // d * b_buf.numel() // d, dtype=_DT, device=dev)
    for hb in head_blocks(H, d, k, blocks=2):  # columns h: A_h side by side, (d, |tile|·k)
        nh = hb.stop - hb.start
        A2 = promote(W_Q[hb].permute(1, 0, 2), a_buf).view(d, nh * k)
        Rh = Rbe[hb].transpose(-1, -2)  # (nh, k, k)
        for jb in head_blocks(Hkv, d, k):  # K heads j, each B_jᵀ A_h made once for the whole tile
            nj = jb.stop - jb.start
            Bj = promote(W_K[jb].transpose(1, 2), b_buf).view(nj * k, d)
            C = torch.matmul(Bj, A2, out=c_buf[: nj * k * nh * k].view(nj * k, nh * k))
            C = C.view(nj, k, nh, k).transpose(1, 2)  # (nj, nh, k, k)  B_jᵀ A_h
            users = torch.nonzero((kv_index >= jb.start) & (kv_index < jb.stop)).flatten()  # query heads g
            for c0 in range(0, users.numel(), chunk):
                g = users[c0 : c0 + chunk]
                prod = Ra[g][:, None] @ C[kv_index[g] - jb.start] @ Rh[None]  # (|g|, nh, k, k)
                # ‖X‖_op² is the largest eigenvalue of XᵀX: a symmetric eigenvalue solve costs less than
                # the SVD and the largest eigenvalue keeps a relative accuracy of ~k·eps (2e-15 against
                # the SVD's in tests)
                top = torch.linalg.eigvalsh(prod.transpose(-1, -2) @ prod)[..., -1]  # (|g|, nh)
                out[g, hb] = top.clamp_min(0.0).sqrt()
    return out / (op[:, None] * op[None, :])


def grouped_flow_defects(
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    W_V: torch.Tensor,
    W_O: torch.Tensor,
    scale: torch.Tensor | float,
    kv_index: torch.Tensor,
) -> FlowDefects:
    """:func:`attnlab.diagnose.flow.flow_defects` for grouped K/V: ``W_K``, ``W_V`` ``(H_kv, d, k)``
    unexpanded, query head ``h`` using K/V head ``kv_index[h]``; the ``k × k`` products of the K/V heads
    alone (``W_KᵀW_K``, ``W_KᵀW_V``, ``W_VᵀW_V``) are made once per K/V head. Same formulas, same values.
    The weights may be in any dtype: every ``k × k`` product is formed from a block of heads promoted to
    float64 (no float64 copy of a whole stack). No finiteness check (``diagnose`` passes the weights of
    a validated layer).
    """
    H, d, k = W_Q.shape
    Hkv = W_K.shape[0]
    dev = W_Q.device
    s = torch.as_tensor(scale, dtype=_DT, device=dev)

    def empty(n: int) -> torch.Tensor:
        return torch.empty(n, k, k, dtype=_DT, device=dev)

    bufs = [scratch(max(H, Hkv), d, k, device=dev) for _ in range(3)]
    BtB, BtV, VtV = empty(Hkv), empty(Hkv), empty(Hkv)
    for j in head_blocks(Hkv, d, k):
        B, Wv = promote(W_K[j], bufs[0]), promote(W_V[j], bufs[1])
        Bt = B.transpose(-1, -2)
        BtB[j], BtV[j], VtV[j] = Bt @ B, Bt @ Wv, Wv.transpose(-1, -2) @ Wv
    AtA, BtA, WoA, WoWo = empty(H), empty(H), empty(H), empty(H)
    for g in head_blocks(H, d, k):
        A, Wo = promote(W_Q[g], bufs[0]), promote(W_O[g], bufs[1])
        Bt = promote(W_K[kv_index[g]], bufs[2]).transpose(-1, -2)  # this block's K heads
        AtA[g], BtA[g] = A.transpose(-1, -2) @ A, Bt @ A
        WoA[g], WoWo[g] = Wo @ A, Wo @ Wo.transpose(-1, -2)
    del bufs
    m2 = s**2 * _tr(AtA @ BtB[kv_index])  # ‖M‖_F²
    trMM = s**2 * _tr(BtA @ BtA)
    asym2 = (2 * m2 - 2 * trMM).clamp_min(0.0)  # ‖M − Mᵀ‖_F²
    vm = s * _tr(BtV[kv_index] @ WoA)  # ⟨V, M⟩_F
    v2 = _tr(VtV[kv_index] @ WoWo)  # ‖V‖_F²
    m_f, v_f = m2.sqrt(), v2.sqrt()
    cos = (vm / (m_f * v_f)).clamp(-1.0, 1.0)
    return FlowDefects(
        sym_defect=asym2.sqrt() / (2 * m_f),
        value_cos=cos,
        value_defect=((1 - cos) / 2).clamp_min(0.0).sqrt(),
        M_fro=m_f,
        V_fro=v_f,
    )
