"""The MP ⊞ semicircle Cauchy transform by Cardano's formula (attnlab.highdim.convolution)."""

import math

import numpy as np
import pytest

from attnlab.highdim import MarchenkoPastur, semicircle_convolution
from attnlab.highdim.convolution import _cubic_roots


def test_cubic_roots_against_companion_eigenvalues():
    # random monic cubics with real coefficients: the three roots match numpy's companion-matrix
    # eigenvalues (an independent method) as sets, to 1e-9 (simple roots of O(1) coefficients)
    rng = np.random.default_rng(0)
    B, C, D = (rng.normal(size=200) * 3 for _ in range(3))
    R = _cubic_roots(B, C, D)
    for i in range(200):
        ref = np.roots([1.0, B[i], C[i], D[i]])
        dist = np.abs(ref[:, None] - R[i][None, :])  # (3, 3)
        assert np.max(np.min(dist, axis=1)) < 1e-9 * (1 + np.max(np.abs(ref)))
        assert np.max(np.min(dist, axis=0)) < 1e-9 * (1 + np.max(np.abs(ref)))


@pytest.mark.parametrize(("k0", "delta"), [(0.05, 1e-3), (0.5, 1e-3), (0.5, 0.3), (4.0, 0.01), (0.2, 3.0)])
def test_density_and_real_part_against_the_cubic(k0, delta):
    # inside the support the chosen root solves the cubic to rounding and has Im G < 0 (the density); the
    # density integrates to the mass of the support (1: every component together), checked by quadrature
    law = semicircle_convolution(MarchenkoPastur(k0), delta)
    s, t = math.sqrt(k0), delta**2
    for a, b in law.intervals:
        x = np.linspace(a, b, 401)[1:-1]
        rho, reg = law._eval_mp(x)
        g = reg - 1j * math.pi * rho
        res = (t / s) * g**3 - (x / s + t) * g**2 + (x + 1 / s - s) * g - 1
        assert np.max(np.abs(res)) < 1e-9 * max(1.0, t / s * np.max(np.abs(g)) ** 3)
        assert np.all(rho >= 0)
    _, w, _ = law.nodes()
    assert np.sum(w) == pytest.approx(1.0, abs=1e-10)
