"""Clustering rates measured on trajectories, and the early-rate comparison of docs/flow.md B5.

- :func:`crossing_time`: first time a recorded curve reaches a target (linear interpolation);
- :func:`late_rate_fit`: the exponential decay rate of ``ε = 1 − γ`` fitted on a window of ε values;
- :func:`wilson_interval`: the Wilson score interval of a binomial fraction (rates of events over
  trajectories);
- :func:`superadditivity_sample`: random head strengths with their summed early rate ``Σ_h φ(λ_h)``
  against ``H φ(λ̄)`` (equal heads with the same total), with the two readings' sample masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.stats import linear_slope
from attnlab.core.validation import check_int, check_real
from attnlab.dynamics import theory as T

__all__ = [
    "SuperadditivitySample",
    "crossing_time",
    "gamma_rate",
    "late_rate_fit",
    "local_superadditivity",
    "superadditivity_sample",
    "wilson_interval",
]


def wilson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial fraction ``k/n`` at confidence ``level`` ((0, 1) for n = 0).

    ``(p̂ + z²/2n ± z √(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)``, ``z`` the two-sided normal quantile; unlike
    the Wald interval it stays inside [0, 1] and is not empty at ``k = 0`` or ``k = n``.
    """
    from statistics import NormalDist

    check_int("n", n, min=0)
    check_int("k", k, min=0, max=n)
    check_real("level", level, min=0.0, max=1.0, min_open=True, max_open=True)
    if n == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p, z2 = k / n, z * z
    mid = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return float(max(0.0, mid - half)), float(min(1.0, mid + half))


def crossing_time(t: np.ndarray, g: np.ndarray, target: float) -> float | None:
    """First time the recorded ``g(t)`` reaches ``target`` (linear interpolation between records).

    ``t`` and ``g`` are 1-d of the same length; None when ``g`` never reaches ``target``; ``t[0]``
    when it starts there.
    """
    t, g = np.asarray(t, dtype=float), np.asarray(g, dtype=float)
    if t.ndim != 1 or t.shape != g.shape:
        raise ValueError(f"g: expected a 1-d array shaped like t {t.shape}, got {g.shape}")
    idx = np.nonzero(g >= target)[0]
    if idx.size == 0:
        return None
    k = int(idx[0])
    if k == 0:
        return float(t[0])
    return float(t[k - 1] + (target - g[k - 1]) * (t[k] - t[k - 1]) / (g[k] - g[k - 1]))


def late_rate_fit(
    t: np.ndarray, eps: np.ndarray, lo: float = 1e-7, hi: float = 1e-3, min_points: int = 3
) -> float | None:
    """Rate ``r`` of ``ε(t) ≈ C e^{−r t}``: minus the least-squares slope of ``log ε`` in t, ``lo < ε < hi``.

    None when fewer than ``min_points`` records fall in the window.
    """
    t, eps = np.asarray(t, dtype=float), np.asarray(eps, dtype=float)
    if t.ndim != 1 or t.shape != eps.shape:
        raise ValueError(f"eps: expected a 1-d array shaped like t {t.shape}, got {eps.shape}")
    check_real("lo", lo, min=0.0, min_open=True)
    check_real("hi", hi, min=lo, min_open=True)
    check_int("min_points", min_points, min=2)
    win = (eps > lo) & (eps < hi)
    if int(win.sum()) < min_points:
        return None
    return float(-linear_slope(t[win], np.log(eps[win])))


@dataclass(frozen=True)
class SuperadditivitySample:
    """Random strengths and the two early rates compared by super-additivity (docs/flow.md B5).

    ``lam`` (S, H) strengths; ``mean`` (S,); ``hetero`` = ``Σ_h φ(λ_h)`` (S,); ``equal`` = ``H φ(λ̄)`` (S,);
    ``all_convex``: every ``λ_h > λ_c`` (Jensen's reading); ``mean_convex``: ``λ̄ > λ_c`` (the summary's
    reading); both exclude samples whose strengths are all within ``1e-3 λ_c`` of the mean.
    """

    lambda_c: float
    lam: np.ndarray
    mean: np.ndarray
    hetero: np.ndarray
    equal: np.ndarray
    all_convex: np.ndarray
    mean_convex: np.ndarray

    @property
    def gain(self) -> np.ndarray:
        """``Σ_h φ(λ_h) − H φ(λ̄)`` (S,): positive where heterogeneous strengths cluster faster early on."""
        return self.hetero - self.equal


def superadditivity_sample(
    heads: int, beta: float, n: int, samples: int, rng: np.random.Generator, spread: float = 4.0
) -> SuperadditivitySample:
    """``samples`` strength vectors drawn uniformly on ``[0.05, spread λ_c]^H`` and their early rates."""
    H = check_int("heads", heads, min=2)
    S = check_int("samples", samples, min=1)
    spread = check_real("spread", spread, min=0.0, min_open=True)
    lc = T.lambda_c(beta, n)
    lam = rng.uniform(0.05, spread * lc, size=(S, H))  # (S, H)
    mean = lam.mean(1)
    hetero = T.phi(lam, beta, n).sum(1)
    equal = H * T.phi(mean, beta, n)
    distinct = np.abs(lam - mean[:, None]).max(1) > 1e-3 * lc
    return SuperadditivitySample(
        lc, lam, mean, hetero, equal, (lam > lc).all(1) & distinct, (mean > lc) & distinct
    )


def gamma_rate(xdot: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``dγ/dt`` of the mean off-diagonal inner product at a state: (B,) from ``x``, ``xdot`` (B, n, d).

    ``d<x_i, x_j>/dt = <ẋ_i, x_j> + <x_i, ẋ_j>`` averaged over the ``n(n−1)`` ordered pairs i ≠ j.
    """
    if x.ndim != 3 or xdot.shape != x.shape:
        raise ValueError(f"xdot: expected the shape of x {tuple(x.shape)} (B, n, d), got {tuple(xdot.shape)}")
    n = x.shape[1]
    G = xdot @ x.transpose(1, 2)  # (B, n, n): <ẋ_i, x_j>
    total = 2 * G.sum((-2, -1)) - 2 * G.diagonal(dim1=-2, dim2=-1).sum(-1)  # off-diagonal pairs, both orders
    return total / (n * (n - 1))


def local_superadditivity(heads: int, beta: float, n: int, means: np.ndarray, spread: float) -> np.ndarray:
    """``Σ_h φ(λ_h) − H φ(λ̄)`` for strengths spread symmetrically around each mean: (M,) for ``means`` (M,).

    ``λ_h = λ̄ (1 + spread·u_h)`` with ``u = (+1, −1, +1, −1, …)`` (a trailing 0 for odd H): zero mean and
    zero third moment, so for small ``spread`` the gain is ``φ''(λ̄) λ̄² spread² H/2`` to fourth order,
    positive exactly where φ is convex (λ̄ > λ_c).
    """
    H = check_int("heads", heads, min=2)
    spread = check_real("spread", spread, min=0.0, min_open=True, max=1.0, max_open=True)
    m = np.asarray(means, dtype=float)
    u = np.array([(-1.0) ** h for h in range(H)])
    if H % 2:
        u[-1] = 0.0
    lam = m[:, None] * (1 + spread * u[None, :])  # (M, H)
    return T.phi(lam, beta, n).sum(1) - H * T.phi(m, beta, n)
