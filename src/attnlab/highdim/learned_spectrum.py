"""The predicted spectrum of the learned ``Ŝ`` at a state-evolution fixed point (docs/highdim.md C4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attnlab.core.validation import check_int
from attnlab.highdim.convolution import semicircle_convolution
from attnlab.highdim.fixed_point import FixedPoint
from attnlab.highdim.setting import Setting

__all__ = ["PredictedSpectrum", "predicted_spectrum"]


@dataclass(frozen=True)
class PredictedSpectrum:
    """Law of the eigenvalues of the learned ``Ŝ`` (docs/highdim.md C4): ``η · ReLU(S0 + δZ − ε)``.

    ``atom``: mass at zero ``μ_δ((−∞, ε])``; ``rank_fraction = 1 − atom``; ``x`` and ``density`` (per unit
    eigenvalue, normalised over the non-zero part) tabulate ``μ_δ'(ε + x/η)/(η r)``; ``outlier_edge`` is
    ``η (b − ε)`` with ``b`` the upper edge of the support component holding the most mass (the bulk).
    """

    atom: float
    rank_fraction: float
    x: np.ndarray = field(repr=False)
    density: np.ndarray = field(repr=False)
    delta: float
    eps: float
    eta: float
    outlier_edge: float

    def cdf_nonzero(self, x: np.ndarray) -> np.ndarray:
        """CDF of the non-zero part at ``x`` (trapezoid on the tabulated density)."""
        c = np.concatenate([[0.0], np.cumsum(np.diff(self.x) * (self.density[1:] + self.density[:-1]) / 2)])
        c = c / c[-1] if c[-1] > 0 else c
        return np.interp(np.asarray(x, dtype=float), self.x, c, left=0.0, right=1.0)

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """CDF of the whole law (atom at zero included) at ``x``: ``atom + r · F_nonzero(x)`` for
        ``x ≥ 0``, 0 below zero."""
        xa = np.asarray(x, dtype=float)
        return np.where(xa < 0, 0.0, self.atom + self.rank_fraction * self.cdf_nonzero(xa))

    def resolution_cut(self, d: int) -> float:
        """The eigenvalue below which the predicted law puts one non-zero eigenvalue of ``d``: the smallest
        ``c`` with ``r · F_nonzero(c) = 1/d``.

        At dimension ``d`` an eigenvalue below ``c`` cannot be told from the atom at zero by the law itself
        (the law expects one eigenvalue there), and a factorised optimiser drives the eigenvalues that
        belong to the atom to zero only slowly (the gradient along an eigenvalue ``s`` of ``WᵀW`` vanishes
        like ``√s``), so the atom is measured as the fraction of eigenvalues at or below ``c`` and held
        against ``cdf(c) = atom + 1/d``. ``inf`` when the non-zero part holds less than ``1/d``.
        """
        d = check_int("d", d, min=1)
        target = 1.0 / (d * self.rank_fraction) if self.rank_fraction > 0 else math.inf
        if target >= 1.0:
            return math.inf
        c = np.concatenate([[0.0], np.cumsum(np.diff(self.x) * (self.density[1:] + self.density[:-1]) / 2)])
        c = c / c[-1]
        return float(np.interp(target, c, self.x))


def predicted_spectrum(setting: Setting, fp: FixedPoint, points: int = 400) -> PredictedSpectrum:
    """The predicted spectrum of ``Ŝ`` at the fixed point ``fp`` (docs/highdim.md C4)."""
    law = semicircle_convolution(setting.spectrum, fp.delta)
    r = law.mass_above(fp.eps)
    xs = []
    for a, b in law.intervals:
        lo = max(a, fp.eps)
        if lo < b:
            th = np.linspace(0, math.pi, points)
            xs.append(lo + (b - lo) * (1 - np.cos(th)) / 2)
    xg = np.unique(np.concatenate(xs)) if xs else np.array([fp.eps, fp.eps + 1e-9])
    dens = law.density(xg) / (fp.eta * max(r, 1e-300))
    masses = [law.mass_above(a) - law.mass_above(b) for a, b in law.intervals]
    bulk_b = law.intervals[int(np.argmax(masses))][1]
    return PredictedSpectrum(
        atom=1 - r,
        rank_fraction=r,
        x=fp.eta * (xg - fp.eps),
        density=dens,
        delta=fp.delta,
        eps=fp.eps,
        eta=fp.eta,
        outlier_edge=fp.eta * (bulk_b - fp.eps),
    )
