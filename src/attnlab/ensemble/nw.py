"""The Nadaraya–Watson estimator of one attention head, from its definition (docs/ensemble.md A1).

Head ``h`` with projections ``W_Q, W_K`` (d × d_k) has the kernel
``K(q, x) = exp(scale · ⟨W_Qᵀ q, W_Kᵀ x⟩)`` and estimate
``f(q) = Σ_j K(q, x_j) y_j / Σ_j K(q, x_j)``. The usual convention is ``scale = 1/√d_k``
("bandwidth h = 1/√d_k" as an inverse temperature); it is an explicit argument here.

The kernel sums are computed stably: numerator and denominator share the factor
``exp(max_j s_j)``, which is divided out (log-sum-exp), so the estimate stays finite for
scores far beyond the float range of ``exp``.
"""

from __future__ import annotations

import math

import torch

from attnlab.core.validation import check_real, check_tensor

__all__ = ["nw_estimate", "nw_weights", "default_scale"]


def default_scale(d_k: int) -> float:
    """The attention convention ``1/√d_k`` for the inner-product scale."""
    return 1.0 / math.sqrt(d_k)


def _scores(
    queries: torch.Tensor, keys: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, scale: float
) -> torch.Tensor:
    pq = queries @ W_Q  # (..., m, d_k)   projected queries
    pk = keys @ W_K  # (..., N, d_k)   projected keys
    return scale * (pq @ pk.transpose(-1, -2))  # (..., m, N)


def nw_weights(
    queries: torch.Tensor,
    keys: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Normalised NW kernel weights ``K(q_i, x_j) / Σ_j' K(q_i, x_j')``.

    Parameters
    ----------
    queries : Tensor, shape (..., m, d)
    keys : Tensor, shape (..., N, d)
    W_Q, W_K : Tensor, shape (..., d, d_k)
    scale : float, optional
        Inverse temperature on the projected inner product (default ``1/√d_k``).

    Returns
    -------
    Tensor, shape (..., m, N); rows sum to one.
    """
    scores = _scores(queries, keys, W_Q, W_K, _scale(scale, W_K))
    log_norm = torch.logsumexp(scores, dim=-1, keepdim=True)  # (..., m, 1)
    return torch.exp(scores - log_norm)


def nw_estimate(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    W_Q: torch.Tensor,
    W_K: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """The NW estimate ``f(q_i) = Σ_j K(q_i,x_j) y_j / Σ_j K(q_i,x_j)`` from kernel sums.

    Parameters
    ----------
    queries : Tensor, shape (..., m, d)
    keys : Tensor, shape (..., N, d)
        Training inputs ``x_j``.
    values : Tensor, shape (..., N, d_v)
        Training targets ``y_j``.
    W_Q, W_K : Tensor, shape (..., d, d_k)
    scale : float, optional
        Inverse temperature (default ``1/√d_k``).

    Returns
    -------
    Tensor, shape (..., m, d_v)
    """
    check_tensor("queries", queries)
    check_tensor("keys", keys)
    check_tensor("values", values)
    if queries.ndim < 2 or keys.ndim < 2 or values.ndim < 2:
        raise ValueError("queries/keys/values: expected tensors of at least 2 dimensions (…, rows, features)")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"values: expected {keys.shape[-2]} rows (one per key), got {values.shape[-2]}")
    if W_Q.shape[-2] != queries.shape[-1] or W_K.shape[-2] != keys.shape[-1]:
        raise ValueError(
            f"W_Q/W_K: expected (…, {queries.shape[-1]}, d_k), got {tuple(W_Q.shape)} and {tuple(W_K.shape)}"
        )
    scores = _scores(queries, keys, W_Q, W_K, _scale(scale, W_K))  # (..., m, N)
    smax = scores.amax(dim=-1, keepdim=True)  # (..., m, 1)
    kern = torch.exp(scores - smax)  # K(q, x_j) / exp(max_j s_j), in (0, 1]
    numerator = kern @ values  # (..., m, d_v)
    denominator = kern.sum(dim=-1, keepdim=True)  # (..., m, 1), >= 1
    return numerator / denominator


def _scale(scale: float | None, W_K: torch.Tensor) -> float:
    if scale is None:
        return default_scale(W_K.shape[-1])
    return check_real("scale", scale, min=0.0, min_open=True)
