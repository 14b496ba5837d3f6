"""The test error at T = 2 by a tensor Gauss–Hermite rule in the two logit differences (docs/se-accuracy.md):
what the refined state evolution reports at each scramble's ``(q, m)`` instead of the channel's own
quadrature of it."""

from __future__ import annotations

import math

import torch

from attnlab.core.validation import check_int
from attnlab.highdim.channel_nodes import hermite
from attnlab.highdim.setting import Setting

__all__ = ["two_token_test_error"]


def two_token_test_error(setting: Setting, q: float, m: float, n: int = 256) -> float:
    """``E‖σ_β0(ζ) − σ_β(z)‖²`` at T = 2 by a tensor Gauss–Hermite rule (``n`` nodes per dimension).

    Each of the two rows contributes ``2 (σ(β0 X) − σ(β Y))²`` with ``σ`` the logistic function and ``X``,
    ``Y`` its logit differences of ``ζ`` and ``z`` (coefficients ``p`` with ``|p|² = 3``: one diagonal entry
    ×√2, one off-diagonal): per flat coordinate ``Var ζ = Q0 + Δ/2``, ``Var z = q``, ``Cov(ζ, z) = m``, so
    ``(X, Y)`` is Gaussian with covariance ``3 [[Q0 + Δ/2, m], [m, q]]``, the same for both rows. The
    integrand is analytic, so the two-dimensional rule converges geometrically: 256 nodes per dimension
    move it by ≤ 2e-8 from 192 at q up to 30 (the poles of the logistic function slow it at large variance).
    """
    if setting.tokens != 2:
        raise ValueError(f"setting.tokens: expected 2 for the Gauss–Hermite test error, got {setting.tokens}")
    n = check_int("n", n, min=2, max=300)  # the weights of numpy's rule overflow past ~400
    x, w = hermite(n)
    vx, vy, cxy = 3 * (setting.q0 + setting.noise / 2), 3 * q, 3 * m
    sx = math.sqrt(vx)
    a = cxy / sx
    b = math.sqrt(max(vy - a * a, 0.0))
    g1, g2 = x[:, None], x[None, :]
    X = sx * g1
    Y = a * g1 + b * g2
    f = (torch.sigmoid(setting.beta0 * X) - torch.sigmoid(setting.beta * Y)) ** 2  # (n, n)
    return float(4 * (w[:, None] * w[None, :] * f).sum())
