"""Interpolation and perfect-recovery thresholds (docs/highdim.md C5).

``ᾱ = α (T² + T − 2)/2`` is the rescaled sample size.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.spectra import DiscreteSpectrum, J_and_derivatives, MarchenkoPastur


def brentq(f, lo: float, hi: float, **kw) -> float:
    """``scipy.optimize.brentq``, imported at the first call: scipy.optimize costs about 0.4 CPU-s to
    import, which every user of ``attnlab.highdim`` (a training script, the CLI) would otherwise pay."""
    from scipy.optimize import brentq as _brentq

    return _brentq(f, lo, hi, **kw)


__all__ = [
    "Thresholds",
    "alpha_bar",
    "interpolation_threshold",
    "perfect_recovery_threshold",
    "perfect_recovery_unfactorised",
    "perfect_recovery_bayes",
    "thresholds",
]


def alpha_bar(alpha: float, tokens: int) -> float:
    """``ᾱ = α (T² + T − 2)/2``."""
    tokens = check_int("tokens", tokens, min=2)
    return check_real("alpha", alpha, min=0.0) * (tokens**2 + tokens - 2) / 2


#: the smallest label noise, relative to ``Q0``, whose interpolation threshold is resolved: below it
#: ``Q0 + Δ/2`` differs from ``Q0`` by fewer digits than ``J − (δ/2) ∂δJ`` carries, and the root δ̄ is
#: noise. For Marchenko–Pastur (κ0 = 0.5, Q0 = 1.5) δ̄ follows its Δ^(1/3) law (ratio 0.464 per decade) down to
#: Δ = 1e-11, is off by 2% at 1e-14 and 9% at 1e-15, and from 1e-16 on (Q0 + Δ/2 = Q0 in double precision)
#: the bracket's end comes back (δ̄ = 9.8e-7 for every smaller Δ); for a power-law target of 100 eigenvalues
#: δ̄ holds at 0.0653 down to Δ = 1e-12 and jumps to 2.5e-4, the bracket's end, at 1e-13.
NOISE_FLOOR = 1e-11


def interpolation_threshold(
    kappa0: float, noise: float, tokens: int, target: MarchenkoPastur | DiscreteSpectrum | None = None
) -> tuple[float, float]:
    """``(α_interp, δ̄)``: the sample ratio where the training loss vanishes as ``λ̃ → 0+``.

    ``δ̄`` solves ``Q0 + Δ/2 = J(δ̄, 0) − (δ̄/2) ∂_δ J(δ̄, 0)`` and
    ``α_interp = ∂_δ J(δ̄, 0) / (2 δ̄ (T² + T − 2))``. ``noise`` must be at least ``NOISE_FLOOR · Q0``
    (below it the root is not resolved in double precision); the limit Δ → 0+ of ``ᾱ_interp`` for a
    Marchenko–Pastur target is ``(1 + 2κ0 − κ0²)/4`` (docs/highdim.md C5).
    """
    kappa0 = check_real("kappa0", kappa0, min=0.0, min_open=True)
    noise = check_real("noise", noise, min=0.0, min_open=True)
    tokens = check_int("tokens", tokens, min=2)
    mu0 = target if target is not None else MarchenkoPastur(kappa0)
    if noise < NOISE_FLOOR * mu0.q0:
        raise ValueError(
            f"noise: expected a label noise of at least {NOISE_FLOOR * mu0.q0:.3g} ({NOISE_FLOOR:g}·Q0: "
            f"below it Q0 + Δ/2 is not resolved from Q0 and the interpolation threshold's δ̄ is not "
            f"found), got {noise!r}"
        )
    rhs = mu0.q0 + noise / 2

    def g(delta: float) -> float:
        jv = J_and_derivatives(mu0, delta, 0.0)
        return jv.J - delta / 2 * jv.dJ_ddelta - rhs

    # J − (δ/2)∂δJ grows from Q0 (δ → 0+) with δ; bracket the root geometrically
    lo, hi = 1e-3, 0.5
    while g(hi) < 0:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            raise ValueError(f"noise: expected a label noise with an interpolation threshold, got {noise}")
    while g(lo) > 0 and lo > 1e-9:
        lo /= 4
    db = brentq(g, lo, hi, xtol=1e-14, rtol=1e-13)
    jv = J_and_derivatives(mu0, db, 0.0)
    return jv.dJ_ddelta / (2 * db * (tokens**2 + tokens - 2)), db


def _P(k: int, c: float) -> float:
    """``P_k(c) = (1/2π) ∫_{−2}^{c} t^k √(4 − t²) dt`` (closed forms with ``t = 2 sin θ``), k = 0, 1, 2."""
    th = math.asin(min(max(c, -2.0), 2.0) / 2)
    if k == 0:
        return (2 * th + math.sin(2 * th) + math.pi) / (2 * math.pi)
    if k == 1:
        return -(8.0 / 3.0) * math.cos(th) ** 3 / (2 * math.pi)
    if k == 2:
        return (2 * th + math.pi - math.sin(4 * th) / 2) / (2 * math.pi)
    raise ValueError(f"k: expected 0, 1 or 2, got {k!r}")


def perfect_recovery_threshold(kappa0: float) -> float:
    """``ᾱ_PR`` of the factorised student (Δ = 0, λ̃ → 0+); 1/2 for ``κ0 ≥ 1``.

    ``c`` solves ``c = (1 − κ0)(c P_0(c) − P_1(c))`` and ``ᾱ_PR = 1/2 − ½(1 − κ0)² (P_2(c) − c P_1(c))``.
    """
    kappa0 = check_real("kappa0", kappa0, min=0.0, min_open=True)
    if kappa0 >= 1:
        return 0.5
    a = 1 - kappa0

    def f(c: float) -> float:
        return c - a * (c * _P(0, c) - _P(1, c))

    # f(−2) = −2 − a·(−2·0 − 0) < 0 and f(2) = 2 − a·2 > 0 for a < 1
    c = brentq(f, -2.0, 2.0, xtol=1e-14)
    return 0.5 - 0.5 * a**2 * (_P(2, c) - c * _P(1, c))


def perfect_recovery_unfactorised() -> float:
    """``ᾱ_PR = 1/2`` for the unfactorised (Frobenius-penalised) student."""
    return 0.5


def perfect_recovery_bayes(kappa0: float) -> float:
    """Bayes-optimal perfect-recovery threshold ``ᾱ = κ0 − κ0²/2`` (``1/2`` for ``κ0 ≥ 1``)."""
    kappa0 = check_real("kappa0", kappa0, min=0.0, min_open=True)
    k = min(kappa0, 1.0)
    return k - k * k / 2


@dataclass(frozen=True)
class Thresholds:
    """All thresholds of docs/highdim.md C5 for one setting (perfect recovery always at Δ = 0)."""

    alpha_interp: float
    alpha_bar_interp: float
    delta_bar: float
    alpha_pr: float
    alpha_bar_pr: float
    alpha_bar_pr_unfactorised: float
    alpha_bar_pr_bayes: float

    def to_dict(self) -> dict:
        return asdict(self)


def thresholds(kappa0: float, noise: float, tokens: int) -> Thresholds:
    """Interpolation threshold at label noise ``Δ = noise`` and the perfect-recovery thresholds (Δ = 0).

    ``alpha_interp`` is NaN when ``noise = 0`` (no interpolation transition with noiseless labels in this
    formula; use a tiny Δ to approach the limit).
    """
    kappa0 = check_real("kappa0", kappa0, min=0.0, min_open=True)
    noise = check_real("noise", noise, min=0.0)
    tokens = check_int("tokens", tokens, min=2)
    if noise > 0:
        ai, db = interpolation_threshold(kappa0, noise, tokens)
    else:
        ai, db = math.nan, math.nan
    abar = perfect_recovery_threshold(kappa0)
    fac = (tokens**2 + tokens - 2) / 2
    return Thresholds(
        alpha_interp=ai,
        alpha_bar_interp=ai * fac,
        delta_bar=db,
        alpha_pr=abar / fac,
        alpha_bar_pr=abar,
        alpha_bar_pr_unfactorised=perfect_recovery_unfactorised(),
        alpha_bar_pr_bayes=perfect_recovery_bayes(kappa0),
    )
