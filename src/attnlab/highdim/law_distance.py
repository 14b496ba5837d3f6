"""Kolmogorov–Smirnov distances between eigenvalues of a trained ``Ŝ`` and a predicted law
(docs/highdim.md C4).

The predicted law of the non-zero eigenvalues is tabulated (``PredictedSpectrum.x`` and ``density``);
:func:`ks_to_tabulated` measures a sample against the CDF of such a table (trapezoid rule, normalised),
optionally with the law's eigenvalue axis scaled (a law whose scale ``η`` is off by a factor), and
:func:`ks_two_sample` measures two samples against each other: two seeds of the same finite-d experiment,
which sets the distance that finite-d fluctuations alone produce.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ks_to_tabulated", "ks_two_sample", "tabulated_cdf"]


def tabulated_cdf(x: Sequence[float], density: Sequence[float], at: Sequence[float]) -> np.ndarray:
    """CDF at ``at`` of the law with the tabulated ``density`` on increasing ``x`` (trapezoid, normalised
    to 1 over the table; 0 left of it, 1 right of it)."""
    xa, da = np.asarray(x, dtype=float), np.asarray(density, dtype=float)
    if xa.ndim != 1 or da.shape != xa.shape or xa.size < 2:
        raise ValueError(
            f"density: expected one value per x (at least two), got shapes {xa.shape}, {da.shape}"
        )
    if np.any(np.diff(xa) < 0):
        raise ValueError("x: expected a non-decreasing grid")
    c = np.concatenate([[0.0], np.cumsum(np.diff(xa) * (da[1:] + da[:-1]) / 2)])
    if not c[-1] > 0:
        raise ValueError("density: expected a positive total mass")
    return np.interp(np.asarray(at, dtype=float), xa, c / c[-1], left=0.0, right=1.0)


def ks_to_tabulated(
    sample: Sequence[float], x: Sequence[float], density: Sequence[float], scale: float = 1.0
) -> float:
    """``sup |F_n − F|`` between the empirical CDF of ``sample`` and the tabulated law with its axis
    multiplied by ``scale`` (``F(t) = F_table(t/scale)``)."""
    s = np.sort(np.asarray(sample, dtype=float).ravel())
    if s.size == 0:
        raise ValueError("sample: expected at least one value")
    if not scale > 0:
        raise ValueError(f"scale: expected a positive factor, got {scale!r}")
    F = tabulated_cdf(np.asarray(x, dtype=float) * scale, density, s)
    n = s.size
    emp_hi = np.arange(1, n + 1) / n
    return float(max(np.max(np.abs(emp_hi - F)), np.max(np.abs(emp_hi - 1 / n - F))))


def ks_two_sample(a: Sequence[float], b: Sequence[float]) -> float:
    """``sup |F_a − F_b|`` between the empirical CDFs of two samples."""
    aa, bb = np.sort(np.asarray(a, dtype=float).ravel()), np.sort(np.asarray(b, dtype=float).ravel())
    if aa.size == 0 or bb.size == 0:
        raise ValueError("a, b: expected two non-empty samples")
    t = np.concatenate([aa, bb])
    Fa = np.searchsorted(aa, t, side="right") / aa.size
    Fb = np.searchsorted(bb, t, side="right") / bb.size
    return float(np.max(np.abs(Fa - Fb)))
