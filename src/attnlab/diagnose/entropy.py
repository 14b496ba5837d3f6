"""Attention entropy per head on real text, against its maximum ``log n``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab.core.validation import check_tensor

__all__ = ["AttentionEntropy", "attention_entropy"]


@dataclass(frozen=True)
class AttentionEntropy:
    """Entropies of attention rows, per head (shapes: the leading dims of the input).

    Attributes
    ----------
    entropy : Tensor
        mean over queries of ``H_i = −Σ_j p_ij log p_ij`` (nats).
    max_entropy : Tensor
        mean over queries of ``log n_i``, ``n_i`` the number of keys query i can see
        (``log n`` without masking).
    ratio : Tensor
        ``Σ_i H_i / Σ_i log n_i`` in [0, 1] (1: uniform attention).
    """

    entropy: torch.Tensor
    max_entropy: torch.Tensor
    ratio: torch.Tensor


def attention_entropy(probs: torch.Tensor) -> AttentionEntropy:
    """Entropy of each attention row of ``probs`` ``(..., n_q, n_k)`` (rows sum to one).

    Keys with probability exactly 0 (masked) do not count towards ``n_i``.
    """
    check_tensor("probs", probs)
    if probs.ndim < 2:
        raise ValueError(f"probs: expected a (..., n_q, n_k) tensor, got shape {tuple(probs.shape)}")
    p = probs.to(torch.float64)
    if bool((p < 0).any()):
        raise ValueError("probs: expected non-negative attention weights, got negative entries")
    logp = torch.where(p > 0, p.log(), torch.zeros_like(p))
    h = -(p * logp).sum(-1)  # (..., n_q)
    n_vis = (p > 0).sum(-1).clamp_min(1).to(torch.float64)  # (..., n_q)
    hmax = n_vis.log()
    denom = hmax.sum(-1)
    ratio = torch.where(denom > 0, h.sum(-1) / denom.clamp_min(1e-300), torch.ones_like(denom))
    return AttentionEntropy(entropy=h.mean(-1), max_entropy=hmax.mean(-1), ratio=ratio)
