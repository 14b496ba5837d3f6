"""Closed forms of docs/flow.md B4–B6, with guards.

- :func:`c_star`, :func:`beta_star` (B4): the critical inverse temperature of radial dominance
  (form 3) for identical scalar heads at pairwise orthogonal tokens, with the form-2 threshold;
  :func:`radial_threshold_direct` evaluates the forms directly on the token configuration (bisection
  on β), a check of the derivation.
- :func:`phi`, :func:`lambda_c`, :func:`equiangular_rhs`, :func:`equiangular_time`,
  :func:`equiangular_gamma`, :func:`early_rate`, :func:`late_rate` (B5).
- :func:`softmax_linear_time`, :func:`relu_linear_time`, :func:`relu_equiangular_rhs`,
  :func:`relu_equiangular_time`, :func:`relu_large_n_time` (B6).

``scale="1/n"`` divides every rate by n (the summary's normalisation) and multiplies times by n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import integrate, optimize

from attnlab.core.validation import check_choice, check_int, check_real

__all__ = [
    "BetaStar",
    "c_star",
    "beta_star",
    "beta_form2",
    "radial_threshold_direct",
    "phi",
    "lambda_c",
    "equiangular_rhs",
    "equiangular_time",
    "equiangular_gamma",
    "early_rate",
    "late_rate",
    "late_constant",
    "softmax_linear_time",
    "relu_linear_time",
    "relu_equiangular_rhs",
    "relu_equiangular_time",
    "relu_large_n_time",
    "relu_random_init_rate",
]

SCALES = ("1", "1/n")


def _scale(scale: str, n: int) -> float:
    return 1.0 if check_choice("scale", scale, SCALES) == "1" else 1.0 / n


# -------------------------------------------------------------------------------------------- B4
def c_star(heads: int) -> float:
    """``c*(H) = (sqrt((H-1)^2 + 4) - (H-1)) / 2``, the positive root of ``c^2 + (H-1)c - 1 = 0``."""
    H = check_int("heads", heads, min=1)
    return (math.sqrt((H - 1) ** 2 + 4) - (H - 1)) / 2


def beta_form2(heads: int, n: int, strength: float = 1.0) -> float:
    """Form-2 threshold ``ln((n-1)/(H-1)) / (2λ)`` (``inf`` for H = 1; may be <= 0)."""
    H = check_int("heads", heads, min=1)
    n = check_int("n", n, min=2)
    lam = check_real("strength", strength, min=0.0, min_open=True)
    if H == 1:
        return math.inf
    return math.log((n - 1) / (H - 1)) / (2 * lam)


@dataclass(frozen=True)
class BetaStar:
    """β* of docs/flow.md B4 with its validity.

    ``beta_star`` is the closed-form value (``inf`` for H = 1); ``valid`` is False when it is <= 0
    or infinite, and ``note`` then says why. ``beta_form2`` is the weaker form-2 threshold.
    """

    heads: int
    n: int
    strength: float
    c_star: float
    beta_star: float
    valid: bool
    beta_form2: float
    note: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "heads": self.heads,
            "n": self.n,
            "strength": self.strength,
            "c_star": self.c_star,
            "beta_star": self.beta_star if math.isfinite(self.beta_star) else None,
            "valid": self.valid,
            "beta_form2": self.beta_form2 if math.isfinite(self.beta_form2) else None,
            "note": self.note,
        }


def beta_star(heads: int, n: int, strength: float = 1.0) -> BetaStar:
    """``β* = (1/(2λ)) ln(c*^2 (n-1) / (1 - c*^2))`` (docs/flow.md B4), flagged when <= 0 or infinite.

    Parameters
    ----------
    heads : int
        Number of identical scalar heads H >= 1.
    n : int
        Number of pairwise orthogonal tokens, >= 2.
    strength : float
        Head strength λ > 0 (``M_h = λ I``).
    """
    H = check_int("heads", heads, min=1)
    n = check_int("n", n, min=2)
    lam = check_real("strength", strength, min=0.0, min_open=True)
    c = c_star(H)
    f2 = beta_form2(H, n, lam)
    if H == 1:
        return BetaStar(H, n, lam, c, math.inf, False, f2, "H = 1: no other head, beta* is infinite")
    val = math.log(c * c * (n - 1) / (1 - c * c)) / (2 * lam)
    if val <= 0:
        note = (
            f"closed form is {val:.4g} <= 0 (c*^2 (n-1) = {c * c * (n - 1):.4g} <= 1 - c*^2 = "
            f"{1 - c * c:.4g}): form 3 fails at every beta > 0 for these H, n"
        )
        return BetaStar(H, n, lam, c, val, False, f2, note)
    return BetaStar(H, n, lam, c, val, True, f2, "")


def radial_threshold_direct(
    heads: int, n: int, strength: float = 1.0, form: int = 3, beta_max: float = 60.0, tol: float = 1e-12
) -> float:
    """The β at which form ``form`` (2 or 3) of radial dominance stops holding, evaluated directly.

    Builds n pairwise orthogonal tokens (standard basis of R^n) and H identical scalar heads λ I,
    computes the head outputs and the radial shadows with the simulator's code, and bisects on β
    (the forms are invariant to a per-token rescaling, so the ``softmax`` kind is used to stay
    finite). Returns 0.0 if the form fails at every β > 0 and ``inf`` if it holds up to ``beta_max``.
    """
    from attnlab.dynamics.field import head_outputs
    from attnlab.dynamics.model import Heads
    from attnlab.dynamics.observables import radial_dominance

    H = check_int("heads", heads, min=2)
    n = check_int("n", n, min=2)
    check_choice("form", form, (2, 3))  # type: ignore[arg-type]
    lam = check_real("strength", strength, min=0.0, min_open=True)
    spec = Heads.scalar([lam] * H, d=n, kind="softmax")
    x = torch.eye(n, dtype=torch.float64)[None]  # (1, n, n)

    def holds(beta: float) -> bool:
        rd = radial_dominance(head_outputs(spec, x, beta, fused=False), x, rtol=0.0)
        return bool((rd.form3 if form == 3 else rd.form2).all())

    lo = 1e-9
    if not holds(lo):
        return 0.0
    if holds(beta_max):
        return math.inf
    hi = beta_max
    while hi - lo > tol * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if holds(mid) else (lo, mid)
    return 0.5 * (lo + hi)


# -------------------------------------------------------------------------------------------- B5
def _inv_exp_plus(u: np.ndarray, k: float) -> np.ndarray:
    """``1 / (e^u + k)`` without overflow: ``e^{-u} / (1 + k e^{-u})`` for u > 0."""
    e = np.exp(-np.abs(u))
    return np.where(u > 0, e / (1 + k * e), 1 / (np.exp(np.minimum(u, 0)) + k))


def phi(lam: float | np.ndarray, beta: float, n: int, scale: str = "1") -> float | np.ndarray:
    """Early rate of one head ``φ(λ) = 2λ / (e^{λβ} + n - 1)`` (stable for large λβ)."""
    n = check_int("n", n, min=2)
    beta = check_real("beta", beta, min=0.0)
    lam = np.asarray(lam, dtype=float)
    out = 2 * lam * _inv_exp_plus(lam * beta, n - 1) * _scale(scale, n)
    return float(out) if out.ndim == 0 else out


def lambda_c(beta: float, n: int) -> float:
    """Inflection ``λ_c`` of φ: φ is concave for λ < λ_c and convex beyond.

    With ``u = λβ`` and ``k = n - 1``, ``φ'' ∝ e^u [(u-2) e^u - (u+2) k] / (e^u + k)^3``, so ``u_c`` is the
    root of ``(u-2) e^u = (u+2) k`` (``u_c = 2`` when k = 0).
    """
    n = check_int("n", n, min=2)
    beta = check_real("beta", beta, min=0.0, min_open=True)
    k = n - 1

    def g(u: float) -> float:  # log form: ln(u-2) + u - ln((u+2) k), increasing in u > 2
        return math.log(u - 2) + u - math.log((u + 2) * k)

    uc = optimize.brentq(g, 2 + 1e-15, 2 + 50 + math.log(k + 1), xtol=1e-14, rtol=1e-15)
    return uc / beta


def _strengths(strengths: Sequence[float]) -> np.ndarray:
    lam = np.asarray([check_real("strengths", s, min=0.0, min_open=True) for s in strengths], dtype=float)
    if lam.size == 0:
        raise ValueError("strengths: expected at least one head strength, got none")
    return lam


def equiangular_rhs(
    gamma: float | np.ndarray, strengths: Sequence[float], beta: float, n: int, scale: str = "1"
) -> float | np.ndarray:
    """``γ' = Σ_h 2λ_h (1-γ)(1+(n-1)γ) / (exp(λ_h β (1-γ)) + n - 1)`` (softmax scalar heads,
    docs/flow.md B5)."""
    lam = _strengths(strengths)
    n = check_int("n", n, min=2)
    g = np.asarray(gamma, dtype=float)
    u = lam[:, None] * beta * (1 - g.reshape(1, -1))  # (H, G)
    w = _inv_exp_plus(u, n - 1)  # (H, G)
    val = (2 * lam[:, None] * w).sum(0) * ((1 - g.ravel()) * (1 + (n - 1) * g.ravel())) * _scale(scale, n)
    val = val.reshape(g.shape)
    return float(val) if val.ndim == 0 else val


def equiangular_time(
    strengths: Sequence[float],
    beta: float,
    n: int,
    target: float = 0.999,
    gamma0: float = 0.0,
    scale: str = "1",
) -> float:
    """Time ``t*`` for γ to go from ``gamma0`` to ``target`` under :func:`equiangular_rhs` "
    "(quadrature of 1/γ')."""
    n = check_int("n", n, min=2)
    beta = check_real("beta", beta, min=0.0)
    gamma0 = check_real("gamma0", gamma0, min=-1.0 / (n - 1), max=1.0, max_open=True)
    target = check_real("target", target, min=gamma0, max=1.0, max_open=True)
    lam = _strengths(strengths)
    f = lambda g: 1.0 / equiangular_rhs(g, lam, beta, n, scale)  # noqa: E731
    val, _ = integrate.quad(f, gamma0, target, epsabs=1e-13, epsrel=1e-12, limit=500)
    return float(val)


def equiangular_gamma(
    strengths: Sequence[float],
    beta: float,
    n: int,
    times: Sequence[float] | np.ndarray,
    gamma0: float = 0.0,
    scale: str = "1",
) -> np.ndarray:
    """γ(t) at ``times`` from ``gamma0`` (scipy DOP853, rtol 1e-13)."""
    lam = _strengths(strengths)
    t = np.asarray(times, dtype=float)
    sol = integrate.solve_ivp(
        lambda _t, g: equiangular_rhs(g, lam, beta, n, scale),
        (0.0, float(t.max())),
        [gamma0],
        method="DOP853",
        t_eval=t,
        rtol=1e-13,
        atol=1e-15,
    )
    return sol.y[0]


def early_rate(strengths: Sequence[float], beta: float, n: int, scale: str = "1") -> float:
    """``γ'(0) = Σ_h φ(λ_h)``."""
    return float(np.sum(phi(_strengths(strengths), beta, n, scale)))


def late_rate(strengths: Sequence[float], n: int = 2, scale: str = "1") -> float:
    """Late exponential rate ``2Λ`` of ``ε = 1 - γ`` (``ε ~ C e^{-2Λt}``, Λ = Σ λ_h)."""
    return float(2 * _strengths(strengths).sum() * _scale(scale, n))


# -------------------------------------------------------------------------------------------- B6
def softmax_linear_time(lam: float, beta: float, n: int, target: float = 0.5, gamma0: float = 0.0) -> float:
    """Time under the linearised softmax equation ``γ' = 2λ/(e^{βλ} + n - 1)`` (O(n) for n ≫ e^{βλ})."""
    return float((target - gamma0) / phi(lam, beta, n))


def relu_linear_time(lam: float, beta: float, n: int, gamma0: float, target: float = 0.5) -> float:
    """Time under the linearised ReLU equation ``γ' = (2βλ²/n) γ``: ``n ln(target/γ0) / (2βλ²)``."""
    gamma0 = check_real("gamma0", gamma0, min=0.0, min_open=True)
    return float(n * math.log(target / gamma0) / (2 * beta * lam * lam))


def relu_equiangular_rhs(gamma: float | np.ndarray, lam: float, beta: float, n: int) -> float | np.ndarray:
    """``γ' = (2βλ²/n) γ (1-γ)(1+(n-1)γ)`` for γ >= 0 (ReLU kind, scalar head, 1/n inside f)."""
    g = np.asarray(gamma, dtype=float)
    val = (2 * beta * lam * lam / n) * np.maximum(g, 0) * (1 - g) * (1 + (n - 1) * g)
    return float(val) if val.ndim == 0 else val


def relu_equiangular_time(lam: float, beta: float, n: int, gamma0: float, target: float = 0.5) -> float:
    """Exact time of the ReLU equiangular ODE from ``gamma0 > 0`` to ``target`` (quadrature)."""
    gamma0 = check_real("gamma0", gamma0, min=0.0, min_open=True)
    val, _ = integrate.quad(
        lambda g: 1.0 / relu_equiangular_rhs(g, lam, beta, n), gamma0, target, epsrel=1e-12, limit=500
    )
    return float(val)


def relu_large_n_time(lam: float, beta: float, gamma0: float, target: float = 0.5) -> float:
    """Large-n ReLU time ``[1/γ0 - 1/γ* + ln(γ*(1-γ0)/(γ0(1-γ*)))] / (2βλ²)`` (docs/flow.md B6)."""
    gamma0 = check_real("gamma0", gamma0, min=0.0, min_open=True)
    return float(
        (1 / gamma0 - 1 / target + math.log(target * (1 - gamma0) / (gamma0 * (1 - target))))
        / (2 * beta * lam * lam)
    )


def relu_random_init_rate(lam: float, beta: float, n: int, d: int) -> float:
    """Mean ``dγ/dt`` at uniform random tokens for one ReLU scalar head, large d: ``2βλ²/(n √(2π d))``.

    At random init ``s_ij = <x_i, x_j> ~ N(0, 1/d)``; the pair's own term ``(λ/n) ReLU(βλ s_ij)`` dominates
    ``<ẋ_i, x_j>``, and ``E[max(s, 0)] = 1/√(2π d)``: the force vanishes as ``d^{−1/2}`` (zero at γ = 0 in the
    limit), against the softmax head's constant ``φ(λ) = 2λ/(e^{βλ} + n − 1)`` (:func:`phi`).
    """
    n = check_int("n", n, min=2)
    d = check_int("d", d, min=1)
    return float(2 * beta * lam * lam / (n * math.sqrt(2 * math.pi * d)))


def late_constant(strengths: Sequence[float], beta: float, n: int, gamma0: float = 0.0) -> float:
    """The constant C of ``ε(t) = 1 − γ(t) ~ C e^{−2Λt}`` on the equiangular ODE from ``gamma0`` (B5).

    With ``f = γ'`` of :func:`equiangular_rhs` (``f(γ) = 2Λ(1−γ)(1 + O(1−γ))`` near 1),
    ``ln C = lim_{γ→1} [ln(1−γ) + 2Λ t(γ)] = ln(1−γ0) + ∫_{γ0}^1 [2Λ/f(g) − 1/(1−g)] dg``, a convergent
    quadrature (the integrand tends to a constant at g = 1).
    """
    lam = _strengths(strengths)
    n = check_int("n", n, min=2)
    beta = check_real("beta", beta, min=0.0)
    gamma0 = check_real("gamma0", gamma0, min=-1.0 / (n - 1), max=1.0, max_open=True)
    L = float(lam.sum())

    def integrand(g: float) -> float:
        e = 1.0 - g
        return 2 * L / float(equiangular_rhs(g, lam, beta, n)) - 1.0 / e

    val, _ = integrate.quad(integrand, gamma0, 1.0 - 1e-9, epsabs=1e-13, epsrel=1e-12, limit=500)
    return float(math.exp(math.log(1.0 - gamma0) + val))
