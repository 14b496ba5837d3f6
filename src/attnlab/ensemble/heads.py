"""Many NW heads at once: the batched, chunked kernel sums behind every ensemble computation.

Head ``h`` with key projection ``W_K^h`` and query projection ``W_Q^h`` (both ``d × d_k``;
tied ``W_Q = W_K`` unless given) has the score ``s_h(q, x) = scale · ⟨W_Q^hᵀ q, W_K^hᵀ x⟩``
(``kernel="dot"``, exactly attention, docs/ensemble.md A1) or
``s_h(q, x) = −scale · ‖W_Q^hᵀ q − W_K^hᵀ x‖² / 2`` (``kernel="gaussian"``, a Gaussian kernel in the
projected space with variance ``1/scale``; identical NW weights to ``"dot"`` when projected keys
have equal norms). The default ``scale = 1/√d_k`` is the attention convention; with projections
``W = c·U`` (orthonormal ``U``) the effective inverse temperature is ``c² · scale``.

The estimate ``f_h(q) = Σ_j e^{s_h(q,x_j)} y_j / Σ_j e^{s_h(q,x_j)}`` is computed with the
maximum score divided out of both sums (log-sum-exp), so it stays finite whatever the scale.
Work is chunked over the batch (Monte Carlo replications) and the queries so that one chunk's
score tensor holds at most ``max_elems`` numbers.
"""

from __future__ import annotations

import math

import torch

from attnlab.core.validation import check_choice, check_int, check_real, check_tensor

__all__ = ["KERNELS", "head_predictions", "resolve_scale"]

KERNELS = ("dot", "gaussian")
DEFAULT_MAX_ELEMS = 1 << 20  # 1M float64 = 8 MiB per score chunk (fastest measured: cache-friendly)


def resolve_scale(scale: float | None, d_k: int) -> float:
    """``scale`` if given (checked > 0), else the attention convention ``1/√d_k``."""
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    return check_real("scale", scale, min=0.0, min_open=True)


def _augmented_keys(pk: torch.Tensor, scale: float) -> torch.Tensor:
    """Keys ``[p_k, 1, −scale‖p_k‖²/2]`` (B, H, N, k+2) for the Gaussian kernel's one-matmul scores;
    computed once per batch chunk and shared by its query chunks."""
    half = 0.5 * scale
    return torch.cat([pk, torch.ones_like(pk[..., :1]), -half * pk.square().sum(-1, keepdim=True)], -1)


def _kernel_average(
    pq: torch.Tensor,
    pk: torch.Tensor,
    y2: torch.Tensor,
    scale: float,
    kernel: str,
    loo: bool,
    ka: torch.Tensor | None = None,
) -> torch.Tensor:
    """NW averages for one chunk.

    pq (B, H, m, k), pk (B, H, N, k), y2 (B, 1, N, 2) = [y, 1]; ``ka`` the Gaussian kernel's
    augmented keys (:func:`_augmented_keys`, computed here when not given). Returns (B, H, m).

    Gaussian kernel: the exponent ``−scale‖p_q − p_k‖²/2 <= 0`` comes out of one augmented matmul,
    so no max pass is needed (one exp per score); rows whose every term underflows (all keys
    farther than ~38/√scale) are recomputed with the max divided out. Dot kernel: the maximum
    score is divided out (log-sum-exp).
    """
    if kernel == "gaussian":
        half = 0.5 * scale
        qa = torch.cat(
            [scale * pq, -half * pq.square().sum(-1, keepdim=True), torch.ones_like(pq[..., :1])], -1
        )
        if ka is None:
            ka = _augmented_keys(pk, scale)
        s = torch.matmul(qa, ka.transpose(-1, -2))  # (B, H, m, N)  = −scale‖p_q − p_k‖²/2
        if loo:
            s.diagonal(dim1=-2, dim2=-1).fill_(-math.inf)
        s.clamp_(max=0.0).exp_()
        nd = torch.matmul(s, y2)  # (B, H, m, 2): numerator and denominator in one pass
        if bool((nd[..., 1] < _UNDERFLOW).any()):
            return _kernel_average_lse(pq, pk, y2, scale, kernel, loo)
        return nd[..., 0] / nd[..., 1]
    return _kernel_average_lse(pq, pk, y2, scale, kernel, loo)


_UNDERFLOW = 1e-250  # a denominator this small has lost precision to underflow


def _kernel_average_lse(
    pq: torch.Tensor, pk: torch.Tensor, y2: torch.Tensor, scale: float, kernel: str, loo: bool
) -> torch.Tensor:
    s = torch.matmul(pq, pk.transpose(-1, -2))  # (B, H, m, N)
    s.mul_(scale)
    if kernel == "gaussian":
        s.sub_(0.5 * scale * pk.square().sum(dim=-1).unsqueeze(-2))  # −scale‖k‖²/2; ‖q‖² cancels
    if loo:
        s.diagonal(dim1=-2, dim2=-1).fill_(-math.inf)  # leave the query's own point out
    s.sub_(s.amax(dim=-1, keepdim=True))  # scores <= 0: exp in (0, 1], one term == 1
    s.exp_()
    nd = torch.matmul(s, y2)  # (B, H, m, 2)
    return nd[..., 0] / nd[..., 1]


def head_predictions(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    W_K: torch.Tensor,
    W_Q: torch.Tensor | None = None,
    scale: float | None = None,
    kernel: str = "dot",
    loo: bool = False,
    max_elems: int = DEFAULT_MAX_ELEMS,
) -> torch.Tensor:
    """Every head's NW estimate at every query, batched over replications.

    Parameters
    ----------
    queries : Tensor, shape (m, d) or (B, m, d)
    keys : Tensor, shape (N, d) or (B, N, d)
        Training inputs ``x_j`` (one training set per batch member).
    values : Tensor, shape (N,) or (B, N)
        Scalar training targets ``y_j``.
    W_K : Tensor, shape (H, d, d_k)
    W_Q : Tensor, shape (H, d, d_k), optional
        Defaults to ``W_K`` (tied, a symmetric kernel).
    scale : float, optional
        Inverse temperature on the projected inner product (default ``1/√d_k``).
    kernel : {"dot", "gaussian"}
    loo : bool
        Leave-one-out: query ``i`` is training point ``i`` and its own term is dropped
        (needs ``queries`` equal to ``keys``; only the shapes are checked).
    max_elems : int
        Largest number of scores held at once (chunking over batch and queries).

    Returns
    -------
    Tensor, shape (H, m) or (B, H, m)
    """
    check_tensor("queries", queries)
    check_tensor("keys", keys)
    check_tensor("values", values)
    check_tensor("W_K", W_K, ndim=3)
    check_choice("kernel", kernel, KERNELS)
    max_elems = check_int("max_elems", max_elems, min=1)
    if W_Q is None:
        W_Q = W_K
    else:
        check_tensor("W_Q", W_Q, shape=tuple(W_K.shape))
    H, d, d_k = W_K.shape
    batched = keys.ndim == 3 or queries.ndim == 3
    if queries.ndim not in (2, 3) or queries.shape[-1] != d:
        raise ValueError(f"queries: expected shape (m, {d}) or (B, m, {d}), got {tuple(queries.shape)}")
    if keys.ndim not in (2, 3) or keys.shape[-1] != d:
        raise ValueError(f"keys: expected shape (N, {d}) or (B, N, {d}), got {tuple(keys.shape)}")
    if values.shape != keys.shape[:-1]:
        raise ValueError(
            f"values: expected shape {tuple(keys.shape[:-1])} (one per key), got {tuple(values.shape)}"
        )
    q3 = queries if queries.ndim == 3 else queries.unsqueeze(0)  # (Bq, m, d)
    k3 = keys if keys.ndim == 3 else keys.unsqueeze(0)  # (Bk, N, d)
    v2 = values if values.ndim == 2 else values.unsqueeze(0)  # (Bk, N)
    B = max(q3.shape[0], k3.shape[0])
    if q3.shape[0] not in (1, B) or k3.shape[0] not in (1, B):
        raise ValueError(f"queries/keys: batch sizes {q3.shape[0]} and {k3.shape[0]} do not broadcast")
    m, N = q3.shape[1], k3.shape[1]
    if loo and m != N:
        raise ValueError(
            f"queries: leave-one-out needs the training points as queries (m = N = {N}), got m = {m}"
        )
    if N == 0 or m == 0:
        raise ValueError("keys/queries: expected at least one row")
    sc = resolve_scale(scale, d_k)

    pq = torch.einsum("bmd,hdk->bhmk", q3, W_Q)  # (Bq, H, m, k)
    y2 = torch.stack([v2, torch.ones_like(v2)], dim=-1).unsqueeze(1)  # (Bk, 1, N, 2)

    per_item = H * m * N
    if per_item <= max_elems:
        b_chunk, m_chunk = max(1, max_elems // per_item), m
    else:
        b_chunk, m_chunk = 1, max(1, max_elems // (H * N))
    if loo:
        m_chunk = m  # the diagonal mask needs all queries of a batch member together
    out = torch.empty(B, H, m, dtype=pq.dtype, device=pq.device)
    pk_shared = torch.einsum("bnd,hdk->bhnk", k3, W_K) if k3.shape[0] == 1 else None  # (1, H, N, k)
    for b0 in range(0, B, b_chunk):  # chunks bound memory; each is fully vectorised
        bs = slice(b0, min(B, b0 + b_chunk))
        pqb = pq if pq.shape[0] == 1 else pq[bs]
        if pk_shared is not None:
            pkb = pk_shared
        else:
            pkb = torch.einsum("bnd,hdk->bhnk", k3[bs], W_K)  # (b, H, N, k) projected per chunk
        y2b = y2 if y2.shape[0] == 1 else y2[bs]
        if pqb.shape[0] == 1 and pkb.shape[0] == 1 and (bs.stop - bs.start) > 1:
            pqb = pqb.expand(bs.stop - bs.start, -1, -1, -1)
        kab = _augmented_keys(pkb, sc) if kernel == "gaussian" else None  # shared by the query chunks
        for m0 in range(0, m, m_chunk):
            ms = slice(m0, min(m, m0 + m_chunk))
            out[bs, :, ms] = _kernel_average(pqb[:, :, ms], pkb, y2b, sc, kernel, loo, kab)
    return out if batched else out[0]
