"""The test error of infinite data (``two_token.infinite_sample_limit``) against two independent
computations: a search over both overlaps (is the best matrix a multiple of the target?) and the state
evolution at large α, where the learned matrix must approach it."""

from __future__ import annotations

import pytest
from scipy.optimize import minimize

from attnlab.highdim import OutputChannel, Setting, power_law_spectrum, state_evolution
from attnlab.highdim.two_token import infinite_sample_limit, two_token_test_error


def _setting(noise):
    return Setting(noise=noise, lam=1e-2, target=power_law_spectrum(30, 1.0))


def test_the_best_matrix_is_a_multiple_of_the_target():
    s = _setting(0.5)
    c, e_inf = infinite_sample_limit(s)
    e0 = two_token_test_error(s, s.q0, s.q0)
    # with noise inside the logistic the target is not the best predictor: shrinking it by c* < 1 helps
    assert 0.8 < c < 0.95 and e_inf < e0 - 1e-3

    # over (q, m) with m² <= q Q0, written m = c Q0, q = c² Q0 + t² (t: a part orthogonal to the target)
    def err(x):
        return two_token_test_error(s, x[0] ** 2 * s.q0 + x[1] ** 2, x[0] * s.q0)

    best = min(
        (minimize(err, [c0, t0], method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-14})
         for c0 in (0.8, 1.0) for t0 in (0.0, 0.3)),
        key=lambda r: r.fun,
    )  # fmt: skip
    # the search ends on the target's ray (measured |t| 4e-9) at the same minimum (the bounded 1-d search
    # is converged to 1e-10 in c, so the values agree to rounding of the 256-node rule)
    assert abs(best.x[1]) < 1e-4 and best.x[0] == pytest.approx(c, abs=1e-6)
    assert best.fun == pytest.approx(e_inf, abs=1e-12)
    # without label noise the target is the best predictor and its error is zero
    c, e_inf = infinite_sample_limit(_setting(0.0))
    assert c == pytest.approx(1.0, abs=1e-6) and e_inf == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="q0"):
        infinite_sample_limit(s, q0=-1.0)


def test_the_state_evolution_approaches_it_as_alpha_grows():
    s = _setting(0.5)
    c, e_inf = infinite_sample_limit(s)
    e0 = two_token_test_error(s, s.q0, s.q0)
    ch = OutputChannel(s, 4096, fold=True)
    gaps = []
    for a in (64, 1024):
        fp = state_evolution(s, a, channel=ch)
        gaps.append(fp.test_error - ch.test_error(s.q0, s.q0) - (e_inf - e0))
        last = fp
    # e − e∞ measured 4.9e-4 at α = 64 and 4.3e-5 at 1024 (8192 nodes): positive and falling; the learned
    # matrix's overlaps reach c* S0's (m/Q0 0.8747 against c* = 0.8743, q/Q0 0.7651 against c*² = 0.7644;
    # 5e-3 covers the remaining O(1/α) and the 4096-node quadrature)
    assert gaps[0] > gaps[1] > 0 and gaps[1] < 1e-4
    assert last.m / s.q0 == pytest.approx(c, abs=5e-3) and last.q / s.q0 == pytest.approx(c * c, abs=5e-3)
