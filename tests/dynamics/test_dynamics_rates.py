"""Crossing times, late-rate fits and the super-additivity sampler against closed forms."""

import math

import numpy as np
import pytest

from attnlab.dynamics import crossing_time, late_rate_fit, superadditivity_sample, wilson_interval
from attnlab.dynamics import theory as T


def test_crossing_time_of_a_line_is_exact():
    t = np.linspace(0.0, 2.0, 21)
    assert crossing_time(t, 0.3 * t, 0.45) == pytest.approx(1.5, rel=1e-14)
    assert crossing_time(t, 0.3 * t + 0.5, 0.45) == 0.0  # starts above the target
    assert crossing_time(t, 0.1 * t, 0.45) is None
    with pytest.raises(ValueError, match="g"):
        crossing_time(t, t[:-1], 0.5)


def test_late_rate_fit_recovers_an_exponential():
    t = np.linspace(0.0, 20.0, 201)
    eps = 0.7 * np.exp(-1.9 * t)
    # log of an exact exponential is linear: the least-squares slope is exact up to rounding
    assert late_rate_fit(t, eps) == pytest.approx(1.9, rel=1e-12)
    assert late_rate_fit(t[:3], eps[:3]) is None  # nothing inside (1e-7, 1e-3)


def test_superadditivity_sample_against_the_direct_formula():
    s = superadditivity_sample(2, 1.0, 32, 500, np.random.default_rng(0))
    phi = lambda lam: 2 * lam / (np.exp(lam) + 31)  # noqa: E731  φ at β = 1, n = 32
    np.testing.assert_allclose(s.hetero, phi(s.lam).sum(1), rtol=1e-13)
    np.testing.assert_allclose(s.equal, 2 * phi(s.lam.mean(1)), rtol=1e-13)
    assert s.lambda_c == pytest.approx(T.lambda_c(1.0, 32))
    assert np.all(s.lam[s.all_convex] > s.lambda_c) and np.all(s.mean[s.mean_convex] > s.lambda_c)
    # Jensen: strictly convex φ on the region, distinct strengths -> strictly super-additive
    assert np.all(s.gain[s.all_convex] > 0)
    assert math.isclose(float(s.gain[0]), float(s.hetero[0] - s.equal[0]))


@pytest.mark.parametrize(("k", "n"), [(0, 10), (5, 10), (10, 10), (37, 128), (1, 640)])
def test_wilson_interval_is_the_score_tests_acceptance_set(k, n):
    # independent: the interval is {p : |k/n − p| ≤ z √(p(1−p)/n)}; find its ends by bisection on p
    z = 1.959963984540054
    inside = lambda p: abs(k / n - p) <= z * math.sqrt(p * (1 - p) / n)  # noqa: E731

    def edge(a, b):  # a inside, b outside (or the boundary of [0, 1])
        for _ in range(200):
            m = 0.5 * (a + b)
            a, b = (m, b) if inside(m) else (a, m)
        return a

    p0 = k / n if 0 < k < n else (1e-300 if k == 0 else 1 - 1e-16)
    lo = 0.0 if k == 0 else edge(p0, 0.0)
    hi = 1.0 if k == n else edge(p0, 1.0)
    got = wilson_interval(k, n)
    # bisection to 2^-200 and the closed form to rounding: 1e-12 absolute is ample
    assert got == pytest.approx((lo, hi), abs=1e-12)
    assert wilson_interval(0, 0) == (0.0, 1.0)
