"""Closed forms of docs/flow.md B4–B6 against the reference values and independent computations."""

import math

import numpy as np
import pytest
from scipy import integrate

from attnlab.dynamics import theory as T


def test_c_star_reference_and_root():
    # reference c*(2) = 1/φ = 0.618034 (6 digits as printed in docs/flow.md B4)
    assert T.c_star(2) == pytest.approx(0.618034, abs=5e-7)
    for H in range(1, 9):
        c = T.c_star(H)
        assert c * c + (H - 1) * c - 1 == pytest.approx(0.0, abs=1e-14)  # defining quadratic
        assert 0 < c <= 1


def test_beta_star_reference_values():
    # reference values are quoted to 4 decimals: tolerance half a unit of the last digit
    b = T.beta_star(2, 32, 1.0)
    assert b.beta_star == pytest.approx(1.4764, abs=5e-5)
    assert b.valid and b.note == ""
    assert b.beta_form2 == pytest.approx(1.717, abs=5e-4)
    assert T.beta_star(3, 128).beta_star == pytest.approx(1.6348, abs=5e-5)
    neg = T.beta_star(4, 8)
    assert neg.beta_star == pytest.approx(-0.174, abs=5e-4)
    assert not neg.valid and "<= 0" in neg.note


def test_beta_star_h1_infinite_and_json_null():
    b = T.beta_star(1, 32)
    assert math.isinf(b.beta_star) and not b.valid and b.note
    d = b.to_dict()
    assert d["beta_star"] is None and d["beta_form2"] is None


def test_beta_star_scales_with_strength():
    assert T.beta_star(2, 32, 2.0).beta_star == pytest.approx(
        T.beta_star(2, 32, 1.0).beta_star / 2, rel=1e-14
    )


@pytest.mark.parametrize("bad", [dict(heads=0, n=32), dict(heads=2, n=1), dict(heads=2, n=32, strength=-1.0)])
def test_beta_star_validation(bad):
    with pytest.raises(ValueError):
        T.beta_star(**bad)


@pytest.mark.parametrize("H,n", [(2, 32), (3, 128), (4, 64)])
def test_direct_form3_matches_closed_form(H, n):
    # bisection to 1e-12 on β of the direct evaluation with the simulator's head outputs
    assert T.radial_threshold_direct(H, n) == pytest.approx(T.beta_star(H, n).beta_star, rel=1e-9)
    assert T.radial_threshold_direct(H, n, form=2) == pytest.approx(T.beta_form2(H, n), rel=1e-9)


def test_direct_form3_negative_closed_form_means_never():
    assert T.radial_threshold_direct(4, 8) == 0.0


def test_t_star_reference():
    # docs/flow.md B5/B6: 5.27 (n = 32), 5.91, 6.58, 7.27 at β = λ = 1, γ: 0 -> 0.999
    for n, ref in [(32, 5.27), (128, 5.91), (512, 6.58), (2048, 7.27)]:
        assert T.equiangular_time([1.0], 1.0, n, 0.999) == pytest.approx(ref, abs=5e-3)


def test_equiangular_time_vs_ode_solution():
    lam = [1.0, 0.5]
    t = T.equiangular_time(lam, 2.0, 16, target=0.9)
    g = T.equiangular_gamma(lam, 2.0, 16, [t])
    assert g[0] == pytest.approx(0.9, abs=1e-9)  # quadrature and DOP853 (rtol 1e-13) agree


def test_early_and_late_rates():
    lam, beta, n = [1.0, 3.0], 1.5, 20
    assert T.early_rate(lam, beta, n) == pytest.approx(T.equiangular_rhs(0.0, lam, beta, n), rel=1e-14)
    # late: ε' / ε -> -2Λ as ε -> 0
    eps = 1e-9
    assert T.equiangular_rhs(1 - eps, lam, beta, n) / eps == pytest.approx(T.late_rate(lam), rel=1e-6)
    assert T.late_rate(lam, n=n, scale="1/n") == pytest.approx(T.late_rate(lam) / n)
    assert T.early_rate(lam, beta, n, "1/n") == pytest.approx(T.early_rate(lam, beta, n) / n)


def test_lambda_c_is_inflection():
    lc = T.lambda_c(1.0, 32)
    assert lc == pytest.approx(4.41, abs=5e-3)  # docs/flow.md B5
    h = 1e-3
    second = lambda lam: (T.phi(lam + h, 1, 32) - 2 * T.phi(lam, 1, 32) + T.phi(lam - h, 1, 32)) / h**2
    assert second(lc - 0.05) < 0 < second(lc + 0.05)  # concave before, convex after


def test_super_additivity_mean_reading_counterexample():
    # docs/flow.md B5: λ = (1.0, 8.82), n = 32, β = 1: Σφ = 0.062 < 2φ(λ̄) = 0.118
    assert T.early_rate([1.0, 8.82], 1.0, 32) == pytest.approx(0.062, abs=5e-4)
    assert 2 * T.phi(4.91, 1.0, 32) == pytest.approx(0.118, abs=5e-4)


def test_phi_stable_at_large_argument():
    v = T.phi(np.array([1.0, 1e3]), 10.0, 32)
    assert np.all(np.isfinite(v)) and v[1] == 0.0


def test_relu_times():
    lam, beta, g0 = 1.0, 1.0, 0.05
    # large n: the exact ODE time approaches the closed form (relative error O(1/(n γ0)))
    exact = T.relu_equiangular_time(lam, beta, 10**7, g0)
    assert exact == pytest.approx(T.relu_large_n_time(lam, beta, g0), rel=1e-4)
    # linearised: n ln(γ*/γ0)/(2βλ²), check against direct quadrature of 1/((2βλ²/n)γ)
    n = 64
    ref, _ = integrate.quad(lambda g: n / (2 * beta * lam**2 * g), g0, 0.5)
    assert T.relu_linear_time(lam, beta, n, g0) == pytest.approx(ref, rel=1e-10)
    assert T.softmax_linear_time(1.0, 1.0, 32) == pytest.approx(0.5 * (math.e + 31) / 2, rel=1e-14)
