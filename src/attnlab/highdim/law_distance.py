"""Kolmogorov–Smirnov distances between eigenvalues of a trained ``Ŝ`` and a predicted law
(docs/highdim.md C4).

The predicted law of the non-zero eigenvalues is tabulated (``PredictedSpectrum.x`` and ``density``);
:func:`ks_to_tabulated` measures a sample against the CDF of such a table (trapezoid rule, normalised),
optionally with the law's eigenvalue axis scaled (a law whose scale ``η`` is off by a factor), and
:func:`ks_two_sample` measures two samples against each other: two seeds of the same finite-d experiment,
which sets the distance that finite-d fluctuations alone produce. :func:`ks_with_atom` measures all the
eigenvalues (the atom at zero included) against ``atom + (1 − atom) · F_table``, over ``t ≥ above``: the
whole law at once, with the region below a resolution cut left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ks_to_tabulated", "ks_two_sample", "ks_with_atom", "tabulated_cdf"]


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


def ks_with_atom(
    sample: Sequence[float],
    atom: float,
    x: Sequence[float],
    density: Sequence[float],
    above: float = -np.inf,
    scale: float = 1.0,
) -> float:
    """``sup_{t ≥ above} |F_n(t) − F(t)|`` with ``F(t) = atom + (1 − atom) · F_table(t/scale)`` for
    ``t ≥ 0`` (0 below zero): the empirical CDF of all of ``sample`` against a law with an atom of mass
    ``atom`` at zero and the tabulated law for the rest."""
    s = np.sort(np.asarray(sample, dtype=float).ravel())
    if s.size == 0:
        raise ValueError("sample: expected at least one value")
    if not 0.0 <= atom <= 1.0:
        raise ValueError(f"atom: expected a mass in [0, 1], got {atom!r}")
    if not scale > 0:
        raise ValueError(f"scale: expected a positive factor, got {scale!r}")
    xs = np.asarray(x, dtype=float) * scale

    def law(t: np.ndarray) -> np.ndarray:
        return np.where(t < 0, 0.0, atom + (1 - atom) * tabulated_cdf(xs, density, t))

    n = s.size
    emp_hi = np.arange(1, n + 1) / n  # F_n at each sample point; F_n just below it is emp_hi − 1/n
    keep = s >= above
    gaps = [np.abs(emp_hi[keep] - law(s[keep]))]
    strict = s > above  # the left limit at a point is in the range only if the point is above the start
    gaps.append(np.abs(emp_hi[strict] - 1 / n - law(s[strict])))
    if np.isfinite(above):
        t0 = np.array([above])
        gaps.append(np.abs(np.searchsorted(s, t0, side="right") / n - law(t0)))
    return float(max((g.max() for g in gaps if g.size), default=0.0))


def ks_two_sample(a: Sequence[float], b: Sequence[float], above: float = -np.inf) -> float:
    """``sup_{t ≥ above} |F_a(t) − F_b(t)|`` between the empirical CDFs of two samples."""
    aa, bb = np.sort(np.asarray(a, dtype=float).ravel()), np.sort(np.asarray(b, dtype=float).ravel())
    if aa.size == 0 or bb.size == 0:
        raise ValueError("a, b: expected two non-empty samples")
    t = np.concatenate([aa, bb, [above]] if np.isfinite(above) else [aa, bb])
    t = t[t >= above]
    Fa = np.searchsorted(aa, t, side="right") / aa.size
    Fb = np.searchsorted(bb, t, side="right") / bb.size
    return float(np.max(np.abs(Fa - Fb)))
