"""KS distances to a tabulated law and between two samples, against scipy's exact statistics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attnlab.highdim.law_distance import ks_to_tabulated, ks_two_sample, ks_with_atom, tabulated_cdf


def test_one_sample_matches_scipy_on_a_uniform_law():
    # a constant density tabulated on [0, 2]: the trapezoid CDF is exact (t/2), so the statistic is
    # scipy's one-sample KS against uniform(0, 2) to rounding
    rng = np.random.default_rng(0)
    s = rng.uniform(0, 2, 150)
    x = np.linspace(0, 2, 11)
    ref = stats.kstest(s, stats.uniform(0, 2).cdf).statistic
    assert ks_to_tabulated(s, x, np.ones_like(x)) == pytest.approx(ref, abs=1e-12)
    # a law scaled by 2 is uniform(0, 4)
    assert ks_to_tabulated(s, x, np.ones_like(x), scale=2.0) == pytest.approx(
        stats.kstest(s, stats.uniform(0, 4).cdf).statistic, abs=1e-12
    )


def test_triangular_density_cdf():
    # density 1 − |t| on [−1, 1]: CDF (1 + t)²/2 for t <= 0. The trapezoid masses are exact (linear
    # density per cell); between nodes the CDF is interpolated linearly, off by at most h²/8·max|F''| =
    # 1.25e-7 with h = 1e-3
    x = np.linspace(-1, 1, 2001)
    t = np.array([-0.5, -0.1234, 0.0, 0.5, 2.0])
    expect = [0.125, (1 - 0.1234) ** 2 / 2, 0.5, 0.875, 1.0]
    assert tabulated_cdf(x, 1 - np.abs(x), t) == pytest.approx(expect, abs=2e-7)


def test_two_sample_matches_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=80), rng.normal(0.3, 1.0, size=60)
    assert ks_two_sample(a, b) == pytest.approx(stats.ks_2samp(a, b).statistic, abs=1e-12)
    assert ks_two_sample(a, a) == 0.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="sample"):
        ks_to_tabulated([], [0, 1], [1, 1])
    with pytest.raises(ValueError, match="scale"):
        ks_to_tabulated([0.5], [0, 1], [1, 1], scale=0.0)
    with pytest.raises(ValueError, match="density"):
        tabulated_cdf([0, 1], [0, 0], [0.5])
    with pytest.raises(ValueError, match="a, b"):
        ks_two_sample([], [1.0])


def _brute_sup(sample, F, above):
    # sup over a fine grid of t >= above and the one-sided limits at every sample point (independent of the
    # closed-form evaluation in ks_with_atom)
    s = np.sort(sample)
    ts = np.concatenate([np.linspace(above, s.max() + 1, 20001), s[s >= above]])
    best = np.max(np.abs(np.searchsorted(s, ts, side="right") / s.size - F(ts)))
    left = s[s > above]
    return max(best, np.max(np.abs(np.searchsorted(s, left, side="left") / s.size - F(left))))


def test_ks_with_atom_against_a_brute_force_sup():
    # atom 0.4 at zero and uniform(0, 2) for the rest, sample with 30% zeros: the law's CDF is
    # 0.4 + 0.6·t/2; the grid sup is below the exact sup by at most the law's change over one grid cell
    # (0.6/2 · 1e-4 = 3e-5), and the sample points themselves are included exactly
    rng = np.random.default_rng(3)
    s = np.concatenate([np.zeros(60), rng.uniform(0, 2, 140)])
    x = np.linspace(0, 2, 5)

    def F(t):
        return np.where(t < 0, 0.0, 0.4 + 0.6 * np.clip(t / 2, 0, 1))

    for above in (0.01, 0.3):
        assert ks_with_atom(s, 0.4, x, np.ones_like(x), above=above) == pytest.approx(
            _brute_sup(s, F, above), abs=3e-5
        )

    # scale 2 stretches the non-zero part to uniform(0, 4)
    def F2(t):
        return np.where(t < 0, 0.0, 0.4 + 0.6 * np.clip(t / 4, 0, 1))

    assert ks_with_atom(s, 0.4, x, np.ones_like(x), above=0.01, scale=2.0) == pytest.approx(
        _brute_sup(s, F2, 0.01), abs=3e-5
    )
    with pytest.raises(ValueError, match="atom"):
        ks_with_atom(s, 1.5, x, np.ones_like(x))


def test_two_sample_above_a_cut():
    # restricted to t >= 0.5 the statistic is the sup of |F_a − F_b| over that range, which a fine grid
    # finds exactly for step functions once every sample point is on it
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=70), rng.normal(0.2, 1.0, size=50)
    ts = np.concatenate([[0.5], a[a >= 0.5], b[b >= 0.5]])
    Fa = np.searchsorted(np.sort(a), ts, side="right") / a.size
    Fb = np.searchsorted(np.sort(b), ts, side="right") / b.size
    assert ks_two_sample(a, b, above=0.5) == pytest.approx(np.max(np.abs(Fa - Fb)), abs=1e-15)
    assert ks_two_sample(a, b, above=0.5) <= ks_two_sample(a, b)
