"""KS distances to a tabulated law and between two samples, against scipy's exact statistics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attnlab.highdim.law_distance import ks_to_tabulated, ks_two_sample, tabulated_cdf


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
