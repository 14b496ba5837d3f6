"""The accurate state evolution (docs/highdim.md C3, "Accuracy"): the T = 2 proximal kernel, the Gauss–Hermite
test error, the refined solve and its error bar."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

from attnlab.highdim import OutputChannel, Setting
from attnlab.highdim.channel import two_token_test_error


@pytest.mark.parametrize("lam,q,m,sigma", [(1e-2, 1.46, 1.38, 2.3), (1e-4, 5.13, 2.12, 62.2)])
def test_two_token_prox_matches_the_flat_solver(lam, q, m, sigma):
    # The T = 2 kernel solves the proximal step in the two logit differences; the independent computation is
    # the flat K-dimensional Newton solver on the same nodes, from the same starts (z, the interpolating
    # point) and on a subset of rows. Both stop at a scale-free gradient of 1e-11, so the minimisers agree to
    # ~1e-10 (the objective's curvature is >= 1/(2Σ)·(smallest eigenvalue of G)) and the values to rounding.
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=lam)
    ch = OutputChannel(s, 2048, seed=5)
    z = ch.z_of(q, m)
    for h0 in (None, ch.interpolating_start(z)):
        h1, v1 = ch._prox_generic(z, sigma, 1e-11, 100, h0, ch.y)
        h2, v2 = ch.prox(z, sigma, h0=h0)
        assert float((h1 - h2).abs().max()) < 1e-8 * (1 + float(h1.abs().max()))
        assert float((v1 - v2).abs().max()) < 1e-12
    rows = torch.arange(0, 2048, 3)
    h1, _ = ch._prox_generic(z[rows], sigma, 1e-11, 100, None, ch.y[rows])
    h2, _ = ch.prox(z[rows], sigma, rows=rows)
    assert float((h1 - h2).abs().max()) < 1e-8 * (1 + float(h1.abs().max()))
    # the large-Σ case has nodes with two local minima: the two starts end in different ones there
    if lam == 1e-4:
        a, _ = ch.prox(z, sigma)
        b, _ = ch.prox(z, sigma, h0=ch.interpolating_start(z))
        assert bool(((a - b).abs().amax(-1) > 1e-3).any())


def test_gauss_hermite_test_error_against_independent_computations():
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-3)
    vx = 3 * (s.q0 + s.noise / 2)
    # m = 0: the two logit differences are independent and E σ = 1/2 by symmetry, so the error per row is
    # 2 (E σ(X)² + E σ(Y)² − 1/2); each second moment by adaptive 1-d quadrature (tolerance 1e-12).
    q = 2.0

    def second(v):
        f = lambda x: (1 / (1 + math.exp(-x))) ** 2 * math.exp(-x * x / (2 * v)) / math.sqrt(2 * math.pi * v)
        return integrate.quad(f, -60 * math.sqrt(v), 60 * math.sqrt(v), epsabs=1e-13, limit=400)[0]

    closed = 4 * (second(vx) + second(3 * q) - 0.5)
    assert two_token_test_error(s, q, 0.0) == pytest.approx(closed, abs=1e-9)
    # correlated case: against the channel's own quasi-random nodes (four scrambles of 2^14), within four
    # standard errors of their mean
    q, m = 3.0, 1.5
    vals = [OutputChannel(s, 2**14, seed=k).test_error(q, m) for k in range(4)]
    se = np.std(vals, ddof=1) / 2
    assert abs(two_token_test_error(s, q, m) - np.mean(vals)) < 4 * se
    # its nodes: 192 and 256 per dimension agree to 1e-8 (the rule's convergence)
    assert two_token_test_error(s, q, m, n=192) == pytest.approx(two_token_test_error(s, q, m), abs=1e-8)
    with pytest.raises(ValueError, match="tokens"):
        two_token_test_error(Setting(tokens=3), q, m)
