"""Thresholds (docs/highdim.md C5)."""

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
    # docs/highdim.md C3/C5 quote 0.153482 (6 digits)
    a, _ = interpolation_threshold(0.5, 0.5, 2)
    assert a == pytest.approx(0.153482, abs=1e-6)


def test_small_noise_limit():
    # ᾱ_interp(Δ = 0.002) = 0.4065 (docs/highdim.md C5) and the gap to (1 + 2κ0 − κ0²)/4 shrinks like Δ^{1/3}
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


def test_tiny_noise_down_to_the_floor_and_refused_below():
    # Down to the floor (NOISE_FLOOR·Q0 = 1.5e-11 at κ0 = 0.5) δ̄ keeps its Δ^(1/3) law (independent check:
    # the ratio per decade 10^(−1/3) = 0.4642, to 1%); below it the root is rounding noise (measured: from
    # Δ = 1e-16 on the bracket's end, δ̄ = 9.8e-7, came back for every Δ), so it is refused with one line
    # naming the noise, for Marchenko–Pastur and a discrete target alike (whose δ̄ jumped to the bracket's
    # end at Δ = 1e-13)
    from attnlab.highdim import power_law_spectrum
    from attnlab.highdim.thresholds import NOISE_FLOOR

    d1 = interpolation_threshold(0.5, 2e-10, 2)[1]
    d2 = interpolation_threshold(0.5, 2e-11, 2)[1]
    assert d2 / d1 == pytest.approx(10 ** (-1 / 3), rel=0.01)
    for bad in (1e-11, 1e-16, 1e-30):
        with pytest.raises(ValueError, match=r"^noise: expected a label noise of at least 1.5e-11 .* got"):
            interpolation_threshold(0.5, bad, 2)
    t = power_law_spectrum(100, 1.0)
    with pytest.raises(ValueError, match="noise: expected"):
        interpolation_threshold(0.5, 0.5 * NOISE_FLOOR * t.q0, 2, target=t)
    above = interpolation_threshold(0.5, 2 * NOISE_FLOOR * t.q0, 2, target=t)[1]
    assert above == pytest.approx(0.0653, rel=2e-3)
    with pytest.raises(ValueError, match="noise: expected"):
        thresholds(0.5, 1e-20, 2)


# ---------------------------------------------------------------------------------------------------------
# thresholds read off the state evolution (attnlab.highdim.se_thresholds)


def test_power_onset_recovers_exact_power_laws():
    import numpy as np

    from attnlab.highdim.se_thresholds import power_onset

    a = np.array([0.17, 0.18, 0.19, 0.2, 0.21])
    # above: 0.7 (α − 0.1535)³; below: 14 (0.2111 − α)^2 on α < 0.2111 — both exact, so the fit returns the
    # onset, the power and the amplitude to the bounded search's tolerance (1e-10 of the span)
    up = power_onset(a, 0.7 * (a - 0.1535) ** 3, "above")
    assert (up.alpha, up.exponent, up.amplitude) == pytest.approx((0.1535, 3.0, 0.7), rel=1e-6)
    b = a - 0.05
    down = power_onset(b, 14 * (0.2111 - b) ** 2, "below")
    assert (down.alpha, down.exponent) == pytest.approx((0.2111, 2.0), rel=1e-6) and down.rms < 1e-8
    # a pure exponential has no finite onset: the best α_c runs to the bound and is reported as NaN
    assert math.isnan(power_onset(a, np.exp(30 * a), "above").alpha)
    with pytest.raises(ValueError, match="three"):
        power_onset(a[:2], a[:2], "above")
    with pytest.raises(ValueError, match="positive"):
        power_onset(a, a - 0.18, "above")
    with pytest.raises(ValueError, match="side"):
        power_onset(a, a, "left")


def test_in_limit_mask():
    from attnlab.highdim.se_thresholds import in_limit

    assert in_limit([1.0, 1.0, 2.0], [1.04, 1.2, 2.0]).tolist() == [True, False, True]
    with pytest.raises(ValueError, match="larger"):
        in_limit([1.0], [1.0, 2.0])


def test_data_loss_and_scan_against_direct_solves():
    import numpy as np

    from attnlab.highdim import Setting, state_evolution
    from attnlab.highdim.se_thresholds import data_loss, lam_scan

    s = Setting(lam=1e-3)
    scan = lam_scan(s, [0.25, 0.3], [1e-2, 1e-3], nodes=256)
    # each point is the fixed point a cold solve finds (the warm starts only change the path): 1e-5
    # relative, ten times the solver tolerance (the scan solves on one set of nodes: so does this)
    for i, lam in enumerate([1e-2, 1e-3]):
        direct = state_evolution(Setting(lam=lam), 0.3, nodes=256, scrambles=1)
        assert scan[i][1].q == pytest.approx(direct.q, rel=1e-5)
    # the data loss is the training loss less λ̃ Tr Ŝ/d; at λ̃ = 0 the two coincide, and the penalty part
    # λ̃ Tr Ŝ/d = −λ̃ η ∂εJ/2 is checked against the spectrum predicted for Ŝ (its mean, C4)
    fp = scan[1][1]
    from attnlab.highdim import predicted_spectrum

    ps = predicted_spectrum(s, fp)
    mean = (
        ps.rank_fraction
        * float(np.trapezoid(ps.x * ps.density, ps.x))
        / max(float(np.trapezoid(ps.density, ps.x)), 1e-300)
    )
    assert s.lam * mean == pytest.approx(fp.train_loss - data_loss(s, fp), rel=1e-2)
