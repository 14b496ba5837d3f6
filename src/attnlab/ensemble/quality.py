"""Heads of graded quality (docs/ensemble.md A6): consistency rates set by construction or by the heads'
sizes, and the weighting schemes compared on them.

Head ``h`` of :func:`quality_graded_projections` projects onto one input coordinate with inverse
temperature ``s_0 (n/n_0)^{2κ_h}``, i.e. a kernel bandwidth ``∝ n^{−κ_h}``. For ``κ_h < 1/5`` the
head is bias-dominated (the bias² of an NW smoother in one dimension is ``O(h⁴)``), so its MSE decays
like ``n^{−4κ_h}``: the heads' rates ``r_h = 4κ_h`` are known in advance.

:func:`split_half_scheme_mse` evaluates weighting schemes on Monte Carlo head errors: the optimal
weights are fitted on the first half of the replications and every scheme is scored on the other half
(so the optimal scheme is not scored on the moments it was fitted to).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.core.validation import check_int, check_real, check_tensor
from attnlab.ensemble.weights import head_weights, optimal_weights

__all__ = ["quality_graded_projections", "size_graded_projections", "size_rates", "split_half_scheme_mse"]


def quality_graded_projections(
    kappas: Sequence[float], d: int, n: int, n0: float, s0: float, coordinate: int = 0
) -> torch.Tensor:
    """One-dimensional heads with bandwidth schedules ``h_h ∝ n^{−κ_h}``.

    Parameters
    ----------
    kappas : sequence of float
        Bandwidth exponents ``κ_h >= 0``, one per head (sorted best first for the weighting schemes).
    d : int
        Input dimension.
    n : int
        Training-sample size the bandwidths are set for.
    n0, s0 : float
        Reference size and the inverse temperature every head has at ``n = n0``.
    coordinate : int
        The input coordinate every head projects on (the target's relevant one).

    Returns
    -------
    Tensor, shape (H, d, 1), float64
        ``W_h = √(s_0 (n/n_0)^{2κ_h}) e_coordinate``: with kernel scale 1 the inverse temperature is
        ``s_0 (n/n_0)^{2κ_h}``.
    """
    if len(kappas) == 0:
        raise ValueError("kappas: expected at least one bandwidth exponent, got none")
    ks = [check_real("kappas", k, min=0.0) for k in kappas]
    d = check_int("d", d, min=1)
    n = check_int("n", n, min=1)
    n0 = check_real("n0", n0, min=0.0, min_open=True)
    s0 = check_real("s0", s0, min=0.0, min_open=True)
    coordinate = check_int("coordinate", coordinate, min=0, max=d - 1)
    W = torch.zeros(len(ks), d, 1, dtype=torch.float64)  # (H, d, 1)
    W[:, coordinate, 0] = torch.tensor([math.sqrt(s0 * (n / n0) ** (2 * k)) for k in ks], dtype=torch.float64)
    return W


def size_rates(sizes: Sequence[int]) -> list[float]:
    """The NW rates ``4/(4 + m_h)`` of heads of sizes ``m_h`` with the classical bandwidth schedule."""
    return [4.0 / (4.0 + check_int("sizes", m, min=1)) for m in sizes]


def size_graded_projections(sizes: Sequence[int], d: int, n: int, n0: float, s0: float) -> torch.Tensor:
    """Heads of sizes ``m_h`` (the first ``m_h`` coordinates) with bandwidths ``h ∝ n^{−1/(4+m_h)}``.

    Parameters
    ----------
    sizes : sequence of int
        Head sizes ``1 <= m_h <= d``, one per head (sorted best first, smallest first, for the schemes).
    d : int
        Input dimension.
    n : int
        Training-sample size the bandwidths are set for.
    n0, s0 : float
        Reference size and the inverse temperature every head has at ``n = n0``.

    Returns
    -------
    Tensor, shape (H, d, max m_h), float64
        ``W_h = √(s_0 (n/n_0)^{2/(4+m_h)}) [e_1 … e_{m_h}]``, zero columns after the ``m_h``-th (they add
        nothing to ``‖W_hᵀ(q − x)‖²``): with kernel scale 1 the head smooths the first ``m_h``
        coordinates at inverse temperature ``s_0 (n/n_0)^{2/(4+m_h)}``.
    """
    if len(sizes) == 0:
        raise ValueError("sizes: expected at least one head size, got none")
    d = check_int("d", d, min=1)
    ms = [check_int("sizes", m, min=1, max=d) for m in sizes]
    n = check_int("n", n, min=1)
    n0 = check_real("n0", n0, min=0.0, min_open=True)
    s0 = check_real("s0", s0, min=0.0, min_open=True)
    W = torch.zeros(len(ms), d, max(ms), dtype=torch.float64)  # (H, d, k)
    for h, m in enumerate(ms):  # a handful of heads
        W[h, torch.arange(m), torch.arange(m)] = math.sqrt(s0 * (n / n0) ** (2.0 / (4.0 + m)))
    return W


def split_half_scheme_mse(
    err: torch.Tensor, schemes: Sequence[str], rho: float = 0.5
) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Integrated MSE of each weighting scheme on held-out replications.

    Parameters
    ----------
    err : Tensor, shape (R, H, m)
        Head errors ``f_h − f`` at ``m`` queries for ``R >= 2`` training samples.
    schemes : sequence of str
        Among ``uniform``, ``geometric``, ``fibonacci``, ``optimal``.
    rho : float
        Ratio of the geometric scheme.

    Returns
    -------
    (mse, weights)
        ``mse[s]`` the mean over the second half's replications and queries of ``(Σ α_h err_h)²``;
        ``weights[s]`` the scheme's ``α`` (on ``err``'s device). The optimal weights minimise
        ``αᵀ M α`` with ``M`` the error cross-moments of the first ``⌊R/2⌋`` replications.
    """
    check_tensor("err", err, ndim=3)
    R, H, m = err.shape
    if R < 2:
        raise ValueError(f"err: expected at least 2 replications to split in halves, got {R}")
    for s in schemes:
        if s not in ("uniform", "geometric", "fibonacci", "optimal"):
            raise ValueError(f"schemes: expected uniform, geometric, fibonacci or optimal, got {s!r}")
    half = R // 2
    M = torch.einsum("rhm,rgm->hg", err[:half], err[:half]) / (half * m)  # (H, H) on the first half
    weights = {s: head_weights(s, H, rho=rho) for s in schemes if s != "optimal"}
    if "optimal" in schemes:
        weights["optimal"] = optimal_weights(M)  # a small QP: scipy on CPU
    weights = {s: weights[s].to(err.device) for s in schemes}
    test = err[half:]  # (R - half, H, m) held-out replications
    mse = {s: float(torch.einsum("h,rhm->rm", a, test).square().mean()) for s, a in weights.items()}
    return mse, weights
