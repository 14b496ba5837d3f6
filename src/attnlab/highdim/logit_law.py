"""The law of the target's logits, and where it is not Gaussian (docs/highdim.md C6, "The level").

The state evolution treats the logits ``Z_ab(S) = (x_aᵀ S x_b − δ_ab Tr S)/√d`` as Gaussian: for a target
whose spectrum spreads over many directions they are (a sum of ``d`` independent terms). In the target's
eigenbasis, with isotropic tokens, ``Z_ab(S0) = Σ_i s_i (u_ia u_ib − δ_ab)/√d`` with ``u`` i.i.d. N(0, 1),
and each off-diagonal term has variance ``s_i²/d``: the strongest direction carries the share
``max s_i² / Σ s_i²`` of every logit's variance (:func:`top_share`). For a Marchenko–Pastur target that share
is ``O(1/d)``; for a power law ``s_i ∝ i^(−γ)`` with ``γ > 1/2`` (the regime of the scaling law) it tends to
``1/ζ(2γ)`` at every ``d`` (0.61 at ``γ = 1``): one weighted chi-square term dominates, and no ``d`` makes
the logits Gaussian.

:func:`target_error` measures what that changes in the simplest observable: the error of the target itself
against its noisy labels, ``e0 = E‖rowsoftmax(β0 (Z0 + ξ)) − rowsoftmax(β0 Z0)‖²``, under the exact law of
``Z0`` (drawn in the eigenbasis: ``d`` numbers per token, no rotation), against the Gaussian-equivalent
value the state evolution uses (:func:`attnlab.highdim.two_token.two_token_test_error` at
``q = m = Q0``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_int, check_real
from attnlab.highdim.data import label_noise

__all__ = ["target_error", "top_share"]

#: sequences drawn per block (memory ``block · T · d`` doubles)
_BLOCK = 8192


def _eigenvalues(eigenvalues) -> np.ndarray:
    s = np.asarray(getattr(eigenvalues, "eigenvalues", eigenvalues), dtype=float).ravel()
    if s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError(f"eigenvalues: expected a non-empty finite array, got {s.size} values")
    if not np.any(s != 0):
        raise ValueError("eigenvalues: expected at least one non-zero eigenvalue, got all zeros")
    return s


def top_share(eigenvalues) -> float:
    """``max s_i² / Σ s_i²``: the share of each off-diagonal logit's variance carried by the strongest
    direction of the target (``eigenvalues``: an array or a :class:`~attnlab.highdim.DiscreteSpectrum`).
    ``1/d`` for a flat spectrum; ``1/Σ_{i≤d} i^(−2γ)`` for a power law, which tends to ``1/ζ(2γ)`` for
    ``γ > 1/2`` and to 0 (like ``1/log d`` at ``γ = 1/2``) below."""
    s2 = _eigenvalues(eigenvalues) ** 2
    return float(s2.max() / s2.sum())


def target_error(
    eigenvalues,
    noise: float,
    *,
    beta0: float = 1.0,
    tokens: int = 2,
    samples: int = 200_000,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """The target's own test error ``e0`` against noisy labels under the exact law of its logits.

    Parameters
    ----------
    eigenvalues : array or DiscreteSpectrum
        The spectrum ``s_1 … s_d`` of ``S0`` (its eigenvectors do not matter for isotropic tokens).
    noise : float
        Label-noise variance ``Δ`` (``Δ`` on the diagonal of ``ξ``, ``Δ/2`` off it, as
        :func:`attnlab.highdim.sample`).
    beta0 : float
        Target inverse temperature.
    tokens : int
        Sequence length ``T`` (≥ 2).
    samples : int
        Monte Carlo sequences (≥ 2), drawn in blocks of 8192.
    generator : torch.Generator, optional

    Returns
    -------
    (e0, stderr) : the Monte Carlo mean of the per-sequence error (summed over the ``T²`` entries) and its
    standard error.
    """
    s = _eigenvalues(eigenvalues)
    noise = check_real("noise", noise, min=0.0)
    beta0 = check_real("beta0", beta0, min=0.0)
    T = check_int("tokens", tokens, min=2)
    samples = check_int("samples", samples, min=2, max=100_000_000)
    d = s.size
    dev = draw_device(generator, "cpu")
    st = torch.as_tensor(s, dtype=torch.float64, device=dev)
    shift = float(s.sum()) * torch.eye(T, dtype=torch.float64, device=dev)
    total, total2, done = 0.0, 0.0, 0
    while done < samples:
        b = min(_BLOCK, samples - done)
        u = torch.randn(b, T, d, generator=generator, dtype=torch.float64, device=dev)
        Z0 = (torch.einsum("btd,d,bsd->bts", u, st, u) - shift) / math.sqrt(d)  # (b, T, T)
        xi = label_noise(b, T, noise, generator, device=dev)
        err = ((torch.softmax(beta0 * (Z0 + xi), -1) - torch.softmax(beta0 * Z0, -1)) ** 2).sum((-1, -2))
        total += float(err.sum())
        total2 += float((err * err).sum())
        done += b
    mean = total / samples
    var = max(total2 / samples - mean * mean, 0.0) * samples / (samples - 1)
    return mean, math.sqrt(var / samples)
