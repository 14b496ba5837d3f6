"""Target spectra of paper C (docs/highdim.md C1): the Marchenko–Pastur law of ``S0 = W0ᵀW0/√(p0 d)``
and finite lists of eigenvalues (finite-d targets such as a power law)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attnlab.core.validation import check_int, check_real

__all__ = ["MarchenkoPastur", "DiscreteSpectrum", "power_law_spectrum"]


@dataclass(frozen=True)
class MarchenkoPastur:
    """Spectrum of ``S0 = W0ᵀW0/√(p0 d)`` with ``κ0 = p0/d`` (``d → ∞``).

    The non-zero part is ``√κ0 ×`` a Marchenko–Pastur law of ratio ``1/κ0``; ``Q0 = ∫ x² μ0 = 1 + κ0``.
    """

    kappa0: float

    def __post_init__(self) -> None:
        check_real("kappa0", self.kappa0, min=0.0, min_open=True)

    @property
    def q0(self) -> float:
        """Second moment ``Tr S0²/d``."""
        return 1.0 + self.kappa0

    def cauchy(self, z: np.ndarray) -> np.ndarray:
        """``G_0(z)`` for ``Im z > 0`` (closed form, the root with ``G ~ 1/z``)."""
        return _mp_cauchy_quadratic(np.asarray(z, dtype=complex), self.kappa0)


def _mp_cauchy_quadratic(z: np.ndarray, k0: float) -> np.ndarray:
    # δ = 0 limit of the cubic: (z/√κ0) G² − (z + 1/√κ0 − √κ0) G + 1 = 0
    s = math.sqrt(k0)
    a = z / s
    b = -(z + 1 / s - s)
    disc = np.sqrt(b * b - 4 * a)
    r1 = (-b + disc) / (2 * a)
    r2 = (-b - disc) / (2 * a)
    # pick the root with Im G <= 0 in the upper half plane
    return np.where(r1.imag <= r2.imag, r1, r2)


@dataclass(frozen=True)
class DiscreteSpectrum:
    """A finite list of eigenvalues ``s_i`` (each with mass ``1/len(s)``), e.g. a finite-d target."""

    eigenvalues: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        s = np.sort(np.asarray(self.eigenvalues, dtype=float).ravel())
        if s.size == 0 or not np.all(np.isfinite(s)):
            raise ValueError(f"eigenvalues: expected a non-empty finite array, got {s.size} values")
        object.__setattr__(self, "eigenvalues", s)

    @property
    def q0(self) -> float:
        """Second moment ``Tr S0²/d``."""
        return float(np.mean(self.eigenvalues**2))

    @property
    def d(self) -> int:
        return int(self.eigenvalues.size)

    def cauchy(self, z: np.ndarray) -> np.ndarray:
        """``G_0(z) = mean_i 1/(z − s_i)``."""
        z = np.asarray(z, dtype=complex)
        return np.mean(1.0 / (z[..., None] - self.eigenvalues), axis=-1)


def power_law_spectrum(d: int, gamma: float) -> DiscreteSpectrum:
    """``s_i ∝ i^{−γ}``, ``i = 1..d``, normalised to ``Tr S0²/d = 1``
    (so ``s_1 ∝ √d``; docs/highdim.md C1, C6)."""
    d = check_int("d", d, min=1)
    gamma = check_real("gamma", gamma, min=0.0, min_open=True)
    s = np.arange(1, d + 1, dtype=float) ** (-gamma)
    s *= math.sqrt(d / np.sum(s**2))
    return DiscreteSpectrum(s)
