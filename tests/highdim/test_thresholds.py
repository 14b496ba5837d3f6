"""Thresholds (THEORY.md C5)."""

import math

import pytest
from scipy import integrate

from attnlab.highdim import (
    alpha_bar,
    interpolation_threshold,
    perfect_recovery_bayes,
    perfect_recovery_threshold,
    thresholds,
)
from attnlab.highdim.thresholds import _P


def test_interpolation_reference():
    # THEORY.md C3/C5 quote 0.153482 (6 digits)
    a, _ = interpolation_threshold(0.5, 0.5, 2)
    assert a == pytest.approx(0.153482, abs=1e-6)


def test_small_noise_limit():
    # ᾱ_interp(Δ = 0.002) = 0.4065 (THEORY.md C5) and the gap to (1 + 2κ0 − κ0²)/4 shrinks like Δ^{1/3}
    k0 = 0.5
    lim = (1 + 2 * k0 - k0 * k0) / 4
    a1 = alpha_bar(interpolation_threshold(k0, 2e-3, 2)[0], 2)
    assert a1 == pytest.approx(0.4065, abs=1e-4)
    a2 = alpha_bar(interpolation_threshold(k0, 2e-4, 2)[0], 2)
    ratio = (lim - a2) / (lim - a1)
    # a 10× smaller Δ divides the gap by 10^{1/3} (ratio 0.464); allow 0.40..0.55 for sub-leading terms
    assert 0.40 < ratio < 0.55


def test_P_closed_forms():
    for k in range(3):
        for c in (-1.5, 0.0, 0.7, 1.99):
            ref = integrate.quad(lambda t, k=k: t**k * math.sqrt(4 - t * t), -2, c)[0] / (2 * math.pi)
            assert _P(k, c) == pytest.approx(ref, abs=1e-10)


def test_perfect_recovery_ordering_and_limits():
    for k0 in (0.1, 0.3, 0.5, 0.8):
        bayes, fac = perfect_recovery_bayes(k0), perfect_recovery_threshold(k0)
        # Bayes-optimal needs fewer samples than the factorised ERM, which needs fewer than unfactorised (1/2)
        assert bayes < fac < 0.5
    assert perfect_recovery_threshold(1.0) == 0.5
    assert perfect_recovery_threshold(1e-6) == pytest.approx(0.0, abs=1e-2)


def test_thresholds_bundle():
    t = thresholds(0.5, 0.5, 2)
    assert t.alpha_bar_interp == pytest.approx(2 * t.alpha_interp)
    assert t.alpha_bar_pr == pytest.approx(2 * t.alpha_pr)
    assert t.alpha_bar_pr_bayes == pytest.approx(0.375)
    assert math.isnan(thresholds(0.5, 0.0, 2).alpha_interp)
    with pytest.raises(ValueError, match="kappa0"):
        thresholds(-1, 0.5, 2)


def test_tiny_noise_limit_rate():
    # Δ down to 2e-8 (δ̄ ≈ 0.005): each 10× smaller Δ divides the gap to (1 + 2κ0 − κ0²)/4 by 10^{1/3}
    # (ratio 0.4642) up to sub-leading terms, which shrink with Δ; 0.46..0.48 holds from Δ = 2e-6 on
    k0 = 0.5
    lim = (1 + 2 * k0 - k0 * k0) / 4
    gaps = [lim - alpha_bar(interpolation_threshold(k0, D, 2)[0], 2) for D in (2e-6, 2e-7, 2e-8)]
    assert all(g > 0 for g in gaps)
    for g1, g2 in zip(gaps, gaps[1:]):
        assert 0.46 < g2 / g1 < 0.48
