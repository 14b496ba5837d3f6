"""The test error at T = 2 by a tensor Gauss–Hermite rule in the two logit differences (docs/se-accuracy.md):
what the refined state evolution reports at each scramble's ``(q, m)`` instead of the channel's own
quadrature of it; its minimum over matrices, the test error of infinite data."""

from __future__ import annotations

import math

import torch

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.channel_nodes import hermite
from attnlab.highdim.setting import Setting

__all__ = ["infinite_sample_limit", "two_token_gradient", "two_token_test_error"]


def two_token_test_error(
    setting: Setting, q: float, m: float, n: int = 256, *, q0: float | None = None
) -> float:
    """``E‖σ_β0(ζ) − σ_β(z)‖²`` at T = 2 by a tensor Gauss–Hermite rule (``n`` nodes per dimension).

    Each of the two rows contributes ``2 (σ(β0 X) − σ(β Y))²`` with ``σ`` the logistic function and ``X``,
    ``Y`` its logit differences of ``ζ`` and ``z`` (coefficients ``p`` with ``|p|² = 3``: one diagonal entry
    ×√2, one off-diagonal): per flat coordinate ``Var ζ = Q0 + Δ/2``, ``Var z = q``, ``Cov(ζ, z) = m``, so
    ``(X, Y)`` is Gaussian with covariance ``3 [[Q0 + Δ/2, m], [m, q]]``, the same for both rows. The
    integrand is analytic, so the two-dimensional rule converges geometrically: 256 nodes per dimension
    move it by ≤ 2e-8 from 192 at q up to 30 (the poles of the logistic function slow it at large variance).
    ``q0`` replaces ``setting.q0`` as the target's ``Tr S0²/d`` (a finite-d realisation's own).
    """
    X, Y, W = _rule(setting, q, m, n, q0)
    f = (torch.sigmoid(setting.beta0 * X) - torch.sigmoid(setting.beta * Y)) ** 2  # (n, n)
    return float(4 * (W * f).sum())


def two_token_gradient(
    setting: Setting, q: float, m: float, n: int = 256, *, q0: float | None = None
) -> tuple[float, float]:
    """``(∂e/∂q, ∂e/∂m)`` of :func:`two_token_test_error` at ``(q, m)``, by Price's theorem on the same rule.

    With ``(X, Y)`` Gaussian of covariance ``C = 3 [[Q0 + Δ/2, m], [m, q]]`` and ``F = (σ(β0 X) − σ(β Y))²``,
    ``∂E[F]/∂C_yy = E[F_YY]/2`` and ``∂E[F]/∂C_xy = E[F_XY]`` (the covariance's two off-diagonal entries move
    together), so ``∂e/∂q = 6 E[F_YY]`` and ``∂e/∂m = 12 E[F_XY]`` with ``F_YY = 2β² (σ'(βY)² − (σ(β0 X) −
    σ(βY)) σ''(βY))`` and ``F_XY = −2 β0 β σ'(β0 X) σ'(βY)``. A shift ``S0 → S0 + P`` moves ``(q, m)``
    by ``(2a + E, a)`` with ``a = Tr P S0/d`` and ``E = Tr P²/d``; where ``S0`` is stationary along its own
    scale (``2 ∂e/∂q + ∂e/∂m = 0``) every part's excess is ``∂e/∂q · E`` to first order. ``q0`` as in
    :func:`two_token_test_error`."""
    X, Y, W = _rule(setting, check_real("q", q, min=0.0), check_real("m", m), n, q0)
    b0, b1 = setting.beta0, setting.beta
    sX, sY = torch.sigmoid(b0 * X), torch.sigmoid(b1 * Y)
    dX, dY = sX * (1 - sX), sY * (1 - sY)  # σ' at β0 X and β Y
    F_yy = 2 * b1 * b1 * (dY * dY - (sX - sY) * dY * (1 - 2 * sY))
    F_xy = -2 * b0 * b1 * dX * dY
    return float(6 * (W * F_yy).sum()), float(12 * (W * F_xy).sum())


def infinite_sample_limit(setting: Setting, n: int = 256, *, q0: float | None = None) -> tuple[float, float]:
    """The test error of infinite data at T = 2 read through Gaussian logits: ``(c*, e∞)`` with
    ``e∞ = min_c e_G(c² Q0, c Q0)``, the error of ``c* S0``.

    The read-out depends on a matrix through ``(q, m)`` alone, with ``m² <= q Q0``; the minimum lies on
    ``m² = q Q0``, a multiple of the target (a part orthogonal to ``S0`` adds logits independent of the
    labels; a search over both parameters ends there, tests/highdim/test_large_sample_limit.py). With label
    noise inside the logistic the target is not the best predictor of the noisy labels
    (``E[σ(ζ)|z0] ≠ σ(z0)``): ``c* < 1`` and ``e∞`` below the target's own error; without noise ``c* = 1``
    and ``e∞ = 0``. The minimisation is bounded on ``c ∈ [0, 2]`` to 1e-10.
    """
    from scipy.optimize import minimize_scalar

    check_int("n", n, min=2)
    q0 = setting.q0 if q0 is None else check_real("q0", q0, min=0.0, min_open=True)
    r = minimize_scalar(
        lambda c: two_token_test_error(setting, c * c * q0, c * q0, n, q0=q0),
        bounds=(0.0, 2.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    return float(r.x), float(r.fun)


def _rule(
    setting: Setting, q: float, m: float, n: int, q0: float | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tensor rule's logit differences ``X``, ``Y`` and weights ``W`` (each (n, n)) for the covariance
    ``3 [[Q0 + Δ/2, m], [m, q]]``, ``Q0`` the setting's or ``q0``."""
    if setting.tokens != 2:
        raise ValueError(f"setting.tokens: expected 2 for the Gauss–Hermite test error, got {setting.tokens}")
    n = check_int("n", n, min=2, max=300)  # the weights of numpy's rule overflow past ~400
    q0 = setting.q0 if q0 is None else check_real("q0", q0, min=0.0, min_open=True)
    x, w = hermite(n)
    vx, vy, cxy = 3 * (q0 + setting.noise / 2), 3 * q, 3 * m
    sx = math.sqrt(vx)
    a = cxy / sx
    b = math.sqrt(max(vy - a * a, 0.0))
    g1, g2 = x[:, None], x[None, :]
    X = sx * g1
    Y = a * g1 + b * g2
    return X, Y, w[:, None] * w[None, :]
