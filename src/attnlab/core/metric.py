"""Head diversity in the metric of the data, and Monte Carlo nulls for any overlap form.

Weight-space geometry (:mod:`attnlab.core.geometry`) compares the column spaces of ``W_h`` with the
Euclidean inner product of model space. What a head reads from its input ``x`` (covariance ``Σ``) is
the feature ``x W_h``, and two heads' features covary as ``W_hᵀ Σ W_h' = (Σ^{1/2} W_h)ᵀ (Σ^{1/2} W_h')``.
The data-metric HDI is therefore the HDI of the factors ``Σ^{1/2} W_h`` (docs/ensemble.md A3 in the inner
product ``⟨u, v⟩_Σ``); in the subspace form it is one minus the mean over pairs of the mean squared
canonical correlation between the two heads' features.

Its null is drawn in the same metric: heads ``Σ^{1/2} G_h`` with ``G_h`` i.i.d. Gaussian (the
distribution of freshly initialised weights), whose subspaces are not uniform on the Grassmannian
when ``Σ`` is anisotropic (they lean towards ``Σ``'s top directions), so the null mean is below
``1 − k/d``. :func:`mc_null` estimates the mean and standard deviation of any HDI statistic under any
sampler of random heads; :func:`metric_null` is the data-metric case (``Σ = I``: Gaussian heads,
which also gives the null of the weight-aware form for Gaussian weights).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from attnlab.core import geometry
from attnlab.core.validation import check_choice, check_int, check_tensor

__all__ = ["batch_hdi", "covariance", "data_metric_diversity", "hdi", "mc_null", "metric_null", "metric_root"]

_DT = torch.float64


def covariance(X: torch.Tensor) -> torch.Tensor:
    """Sample covariance ``(X − X̄)ᵀ(X − X̄)/(N − 1)`` of rows ``X`` ``(N, d)``, float64 ``(d, d)``."""
    X = check_tensor("X", X, ndim=2)
    if X.shape[0] < 2:
        raise ValueError(f"X: expected at least 2 rows for a covariance, got {X.shape[0]}")
    Xc = X.to(_DT) - X.to(_DT).mean(0, keepdim=True)  # (N, d)
    return Xc.T @ Xc / (X.shape[0] - 1)


def metric_root(sigma: torch.Tensor) -> torch.Tensor:
    """Symmetric square root ``Σ^{1/2}`` of a covariance ``(d, d)`` (eigen-decomposition, float64).

    Eigenvalues below ``d · eps · λ_max`` (rounding of a singular covariance) are set to 0.
    """
    sigma = check_tensor("sigma", sigma, ndim=2)
    d = sigma.shape[0]
    if sigma.shape != (d, d) or d == 0:
        raise ValueError(f"sigma: expected a square (d, d) matrix, got shape {tuple(sigma.shape)}")
    S = sigma.to(_DT)
    scale = float(S.abs().max())
    if float((S - S.T).abs().max()) > 1e-8 * max(scale, 1e-300):
        raise ValueError("sigma: expected a symmetric matrix, got an asymmetric one")
    w, U = torch.linalg.eigh(0.5 * (S + S.T))  # ascending eigenvalues
    tol = d * torch.finfo(_DT).eps * float(w[-1].clamp_min(0))
    if float(w[0]) < -max(1e-8 * float(w[-1].abs()), 1e-300):
        raise ValueError(f"sigma: expected a positive semi-definite matrix, got eigenvalue {float(w[0]):.3g}")
    root = torch.where(w > tol, w.clamp_min(0).sqrt(), torch.zeros_like(w))
    return (U * root) @ U.T


def hdi(W: torch.Tensor, form: str = "subspace") -> float:
    """``1 − mean_{h<h'} overlap_hh'`` of a stack ``(H, d, k)`` in ``form`` (no null, no angles: fast)."""
    ov = geometry.overlap_matrix(W, form)
    H = ov.shape[0]
    if H < 2:
        raise ValueError(f"W: expected at least 2 heads (H >= 2) for a pairwise index, got H = {H}")
    iu = torch.triu_indices(H, H, 1, device=ov.device)
    return 1.0 - float(ov[iu[0], iu[1]].mean())


def batch_hdi(W: torch.Tensor, form: str = "subspace") -> torch.Tensor:
    """HDI of each stack in a batch ``(S, H, d, k)`` -> ``(S,)``, float64.

    The ``S·H`` heads go through :func:`attnlab.core.geometry.overlap_matrix` together, in chunks of at
    most ~256 head columns; each stack's ``H × H`` overlaps are the diagonal blocks of the result (the
    overlap of two heads does not depend on the other heads of the stack).
    """
    W = check_tensor("W", W, ndim=4)
    S, H, d, k = W.shape
    if H < 2:
        raise ValueError(f"W: expected at least 2 heads (H >= 2) for a pairwise index, got H = {H}")
    iu = torch.triu_indices(H, H, 1, device=W.device)
    chunk = max(1, 256 // (H * k))
    out = []
    for s0 in range(0, S, chunk):
        n = min(chunk, S - s0)
        ov = geometry.overlap_matrix(W[s0 : s0 + n].reshape(n * H, d, k), form)  # (nH, nH)
        blocks = torch.diagonal(ov.view(n, H, n, H), dim1=0, dim2=2).permute(2, 0, 1)  # (n, H, H)
        out.append(1.0 - blocks[:, iu[0], iu[1]].mean(-1))
    return torch.cat(out)


def mc_null(
    draw: Callable[[torch.Generator | None, int], torch.Tensor],
    form: str = "subspace",
    samples: int = 64,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """Mean and standard deviation of the HDI of random heads, by Monte Carlo.

    Parameters
    ----------
    draw : callable ``(generator, n) -> Tensor (n, H, d, k)``
        ``n`` independent draws of random head factors.
    form : {"subspace", "weight", "raw"}
    samples : int
        number of draws (the mean's standard error is ``sd/√samples``).
    generator : torch.Generator, optional
        passed to ``draw``.
    """
    check_choice("form", form, geometry.FORMS)
    samples = check_int("samples", samples, min=2)
    vals = batch_hdi(draw(generator, samples), form)  # (samples,)
    return float(vals.mean()), float(vals.std())


def metric_null(
    d: int,
    k: int,
    H: int,
    sigma: torch.Tensor | None = None,
    form: str = "subspace",
    samples: int = 64,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """Null of the HDI of ``Σ^{1/2} G_h``, ``G_h`` i.i.d. standard Gaussian ``(d, k)`` (``Σ = I`` if None)."""
    d = check_int("d", d, min=1)
    k = check_int("k", k, min=1)
    H = check_int("H", H, min=2)
    root = None
    if sigma is not None:
        root = metric_root(sigma)
        if root.shape[0] != d:
            raise ValueError(f"sigma: expected shape ({d}, {d}), got {tuple(sigma.shape)}")
    dev = generator.device if generator is not None else "cpu"

    def draw(g: torch.Generator | None, n: int) -> torch.Tensor:
        G = torch.randn(n, H, d, k, generator=g, dtype=_DT, device=dev)  # (n, H, d, k)
        return G if root is None else root.to(dev) @ G

    return mc_null(draw, form, samples, generator)


def data_metric_diversity(
    W: torch.Tensor,
    sigma: torch.Tensor,
    form: str = "subspace",
    samples: int = 64,
    generator: torch.Generator | None = None,
) -> geometry.Diversity:
    """:func:`attnlab.core.geometry.diversity` of ``Σ^{1/2} W`` with the null of :func:`metric_null`.

    Parameters
    ----------
    W : Tensor ``(H, d, k)``
        read projections of one layer (``W_Q``, ``W_K`` or ``W_V``).
    sigma : Tensor ``(d, d)``
        covariance of the hidden states entering the layer.
    form : {"subspace", "weight"}
    samples : int
        Monte Carlo draws of the null.
    generator : torch.Generator, optional

    Returns
    -------
    Diversity
        ``hdi``, angles and ranks of ``Σ^{1/2} W``; ``hdi_null``, ``hdi_null_sd`` and ``z`` from the
        null in the same metric.
    """
    W = check_tensor("W", W, ndim=3)
    check_choice("form", form, ("subspace", "weight"))
    H, d, k = W.shape
    root = metric_root(sigma)
    if root.shape[0] != d:
        raise ValueError(f"sigma: expected shape ({d}, {d}) to match W, got {tuple(sigma.shape)}")
    div = geometry.diversity(root.to(W.device) @ W.to(_DT), form=form)
    m, sd = metric_null(d, k, H, sigma, form, samples, generator)
    z = (div.hdi - m) / sd if sd > 0 else math.nan
    return dataclasses.replace(div, hdi_null=m, hdi_null_sd=sd, z=z)
