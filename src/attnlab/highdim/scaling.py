"""Power laws of the excess test error in the number of samples (docs/highdim.md C6).

The excess error ``e − e0`` of a run is measured at several sample sizes ``x = n/d`` (one value per seed
replicate); :func:`power_law_fit` fits the exponent of the seed-mean curve in log-log coordinates and its
standard error from the per-seed exponents, :func:`local_exponents` gives the exponents over successive
windows (a power law has constant local exponents; a drift says the law has not set in, and a fit over a
window that straddles a crossover measures the crossover), and :func:`find_plateau` finds the longest
run of windows that agree; :func:`mean_exponent` gives the exponent of the seed means with a delta-method
standard error that needs no seed's own curve to be positive (differences of noisy errors often are not).
The statistics themselves are :mod:`attnlab.core.stats`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.core.stats import local_slopes, loglog_slope

__all__ = ["PowerLawFit", "find_plateau", "local_exponents", "mean_exponent", "power_law_fit"]


@dataclass(frozen=True)
class PowerLawFit:
    """Exponent of ``y ∝ x^slope`` over ``x`` (the points whose seed-mean ``y`` is positive).

    ``se``: standard error of the exponent from the per-seed exponents (nan with fewer than two complete
    seeds); ``per_seed``: those exponents.
    """

    slope: float
    se: float
    x: np.ndarray
    y: np.ndarray
    per_seed: tuple[float, ...]


def power_law_fit(x: Sequence[float], y_by_seed: Sequence[Sequence[float]]) -> PowerLawFit | None:
    """Fit a power law to the seed mean of ``y_by_seed`` (seeds × len(x); nan where a seed is missing).

    Points whose seed mean is not positive are dropped; None with fewer than three points left. A seed
    contributes a per-seed exponent only when it has a positive value at every kept point.
    """
    xa = np.asarray(x, dtype=float)
    ya = np.atleast_2d(np.asarray(y_by_seed, dtype=float))
    if xa.ndim != 1 or ya.shape[1] != xa.size:
        raise ValueError(f"y_by_seed: expected shape (seeds, {xa.size}), got {ya.shape}")
    if np.any(xa <= 0):
        raise ValueError(f"x: expected positive sample sizes, got {xa.tolist()}")
    means = np.array([np.mean(col[~np.isnan(col)]) if np.any(~np.isnan(col)) else np.nan for col in ya.T])
    keep = np.flatnonzero(means > 0)
    if keep.size < 3:
        return None
    xs, ys = xa[keep], means[keep]
    slope = loglog_slope(xs, ys)
    per_seed = []
    for row in ya[:, keep]:
        if np.all(~np.isnan(row)) and np.all(row > 0):
            per_seed.append(float(loglog_slope(xs, row)))
    se = float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed))) if len(per_seed) > 1 else math.nan
    return PowerLawFit(float(slope), se, xs, ys, tuple(per_seed))


def local_exponents(x: Sequence[float], y: Sequence[float], window: int = 2) -> list[float | None]:
    """Log-log exponents of ``y`` against ``x`` over successive windows of ``window + 1`` points."""
    return local_slopes(x, y, window)


def find_plateau(exponents: Sequence[float | None], tol: float, length: int = 2) -> tuple[int, int] | None:
    """The longest run of at least ``length`` consecutive local exponents that lie within ``tol`` of each
    other (max − min), as ``(first, last)`` indices (inclusive; the earliest of equally long runs), or
    None when there is none (missing exponents break a run)."""
    if length < 1:
        raise ValueError(f"length: expected an integer >= 1, got {length!r}")
    if not tol >= 0:
        raise ValueError(f"tol: expected a non-negative tolerance, got {tol!r}")
    ex = list(exponents)
    best: tuple[int, int] | None = None
    for i in range(len(ex)):
        lo = hi = None
        for j in range(i, len(ex)):
            e = ex[j]
            if e is None or not math.isfinite(e):
                break
            lo, hi = (e, e) if lo is None else (min(lo, e), max(hi, e))
            if hi - lo > tol:
                break
            if j - i + 1 >= length and (best is None or j - i > best[1] - best[0]):
                best = (i, j)
    return best


def mean_exponent(x: Sequence[float], y_by_seed: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Log-log slope of the seed means of ``y_by_seed`` (seeds × len(x)) against ``x``, and its standard
    error by the delta method.

    The slope is ``Σ_i c_i log ȳ_i`` with least-squares weights ``c_i`` of ``log x``; to first order
    ``log ȳ_i`` moves by ``δȳ_i / ȳ_i``, so its variance is ``cᵀ D C D c / n`` with ``C`` the seeds'
    covariance of the columns (correlated columns, such as successive differences of one curve, are accounted
    for) and ``D = diag(1/ȳ)``. Individual seeds may be negative; the means must be positive (else a
    ValueError), and at least two seeds are needed for the error (nan with one).
    """
    xa = np.asarray(x, dtype=float)
    ya = np.atleast_2d(np.asarray(y_by_seed, dtype=float))
    if xa.ndim != 1 or xa.size < 2 or ya.shape[1] != xa.size or np.any(~np.isfinite(ya)):
        raise ValueError(f"y_by_seed: expected finite values of shape (seeds, {xa.size}), got {ya.shape}")
    if np.any(xa <= 0):
        raise ValueError(f"x: expected positive values, got {xa.tolist()}")
    means = ya.mean(axis=0)
    if np.any(means <= 0):
        raise ValueError(f"y_by_seed: expected positive seed means, got {means.tolist()}")
    lx = np.log(xa)
    c = (lx - lx.mean()) / float(((lx - lx.mean()) ** 2).sum())
    slope = float(c @ np.log(means))
    n = ya.shape[0]
    if n < 2:
        return slope, math.nan
    g = c / means
    cov = np.atleast_2d(np.cov(ya, rowvar=False, ddof=1))
    return slope, float(math.sqrt(max(float(g @ cov @ g), 0.0) / n))
