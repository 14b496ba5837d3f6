"""Target spectra, their free convolution with a semicircle, and the function J (docs/highdim.md C3, C4).

Conventions
-----------
The Cauchy transform is ``G(z) = ∫ μ(dx) / (z − x)`` (so ``G(z) ~ 1/z`` at infinity and the density is
``ρ(x) = −Im G(x + i0) / π``). ``μ_δ = μ0 ⊞ semicircle(variance δ²)``; with ``t = δ²`` the subordination
relation is ``G_δ(z) = G_0(z − t G_δ(z))``.

Two targets:

* :class:`MarchenkoPastur` — the spectrum of ``S0 = W0ᵀW0/√(p0 d)`` at ``d → ∞`` (an atom of mass
  ``1 − κ0`` at 0 when ``κ0 < 1``). Its free convolution has a closed-form cubic for ``G_δ`` (the fast path).
* :class:`DiscreteSpectrum` — ``d`` eigenvalues (a finite-d power law, a sampled matrix, any list). Its free
  convolution is computed on the real axis through Biane's parametrisation of the subordination function:
  ``ω = u + i v(u)`` with ``Σ_i w_i / ((u − s_i)² + v²) = 1/t``, ``x = u + t Re G_0(ω)``,
  ``ρ(x) = v / (π t)``,
  ``Re G_δ(x) = (x − u)/t``.

``J(δ, ε) = ∫_ε^∞ (x − ε)² μ_δ(dx)``; its derivatives are single integrals:
``∂_ε J = −2 ∫_ε^∞ (x − ε) μ_δ(dx)`` and, from the free heat equation ``∂_t ∫ f dμ_t =
½ ∬ (f'(x) − f'(y))/(x − y) dμ_t dμ_t`` with ``f'(x)/2 = (x − ε)_+``,
``∂_δ J = 4 δ ∫_ε^∞ (x − ε) ρ_δ(x) Re G_δ(x) dx``. All integrals use Gauss–Legendre nodes in an angle variable
(``x = a + (b − a)(1 − cos θ)/2``), exact for the square-root edges of the support.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnlab.core.validation import check_real
from attnlab.highdim.convolution import ConvolvedLaw, semicircle_convolution
from attnlab.highdim.targets import DiscreteSpectrum, MarchenkoPastur, power_law_spectrum

__all__ = [
    "MarchenkoPastur",
    "DiscreteSpectrum",
    "ConvolvedLaw",
    "JValue",
    "power_law_spectrum",
    "semicircle_convolution",
    "J",
    "J_and_derivatives",
]


@dataclass(frozen=True)
class JValue:
    """``J(δ, ε)`` with ``∂_δ J``, ``∂_ε J`` and the mass ``μ_δ((ε, ∞))`` (the rank fraction)."""

    J: float
    dJ_ddelta: float
    dJ_deps: float
    mass: float


def J_and_derivatives(
    target: MarchenkoPastur | DiscreteSpectrum, delta: float, eps: float, n: int | None = None
) -> JValue:
    """``J(δ, ε) = ∫_ε^∞ (x − ε)² μ_δ(dx)`` and its partial derivatives (module docstring).

    Parameters
    ----------
    target : MarchenkoPastur or DiscreteSpectrum
        The target spectrum ``μ0``.
    delta : float
        Semicircle width ``δ > 0``.
    eps : float
        Threshold ``ε`` (any real).
    n : int, optional
        Quadrature size per support component (default 200 for MP, 96 for a discrete target; a
        component split into pieces uses ``n/4`` nodes per piece).
    """
    eps = check_real("eps", eps)
    if n is None:
        n = 200 if isinstance(target, MarchenkoPastur) else 96
    law = semicircle_convolution(target, delta)
    x, w, reg = law.nodes(eps, n)
    y = np.clip(x - eps, 0.0, None)
    J = float(np.sum(w * y * y))
    dJe = float(-2.0 * np.sum(w * y))
    dJd = float(4.0 * law.delta * np.sum(w * y * reg))
    mass = float(min(max(np.sum(w), 0.0), 1.0))
    return JValue(J, dJd, dJe, mass)


def J(target: MarchenkoPastur | DiscreteSpectrum, delta: float, eps: float) -> float:
    """``J(δ, ε)`` (see :func:`J_and_derivatives`)."""
    return J_and_derivatives(target, delta, eps).J
