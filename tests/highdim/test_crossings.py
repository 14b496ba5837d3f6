"""Level crossings and their finite-size limit, against curves whose crossing is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.highdim.crossings import finite_size_limit, level_crossing, threshold_limit


def test_crossing_of_an_exponential_is_exact():
    # log(value) linear in α: the log-linear interpolation is exact, crossing at 0.1 + log(level/1e-6)/40
    a = np.linspace(0.1, 0.3, 6)
    v = 1e-6 * np.exp(40 * (a - 0.1))
    expect = 0.1 + math.log(1e-4 / 1e-6) / 40
    assert level_crossing(a, v, 1e-4) == pytest.approx(expect, rel=1e-12)
    assert level_crossing(a, v[::-1].copy(), 1e-4, "down") == pytest.approx(0.4 - expect, rel=1e-12)


def test_first_crossing_and_off_grid():
    a = [0.1, 0.2, 0.3, 0.4]
    assert level_crossing(a, [1e-6, 1e-2, 1e-6, 1e-2], 1e-4) == pytest.approx(0.15)
    assert level_crossing(a, [1e-6, 0.0, 1e-6, 1e-5], 1e-4) is None  # never above: off the grid
    assert level_crossing(a, [1.0, 1.0, 1.0, 1.0], 1e-4, "down") is None
    with pytest.raises(ValueError, match="alphas"):
        level_crossing([0.2, 0.1], [1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match="level"):
        level_crossing(a, [1.0] * 4, 0.0)
    with pytest.raises(ValueError, match="direction"):
        level_crossing(a, [1.0] * 4, 1.0, "sideways")


def test_finite_size_limit_recovers_the_intercept():
    ds = np.array([30.0, 60.0, 100.0])
    lim, slope = finite_size_limit(ds, 0.1535 + 0.9 / ds)
    assert lim == pytest.approx(0.1535, rel=1e-12) and slope == pytest.approx(0.9, rel=1e-12)
    lim, slope = finite_size_limit([30, 30], [0.17, 0.19])
    assert lim == pytest.approx(0.18) and math.isnan(slope)
    with pytest.raises(ValueError, match="crossings"):
        finite_size_limit([30, 60], [0.1])


def test_threshold_limit_extrapolates_only_a_resolved_trend():
    # a clear 1/d trend (seed spread 1e-4, difference 0.02): extrapolated to the intercept
    per_d = {30: [0.1835 - 1e-4, 0.1835 + 1e-4], 60: [0.1685 - 1e-4, 0.1685 + 1e-4]}
    lim, how = threshold_limit(per_d)
    assert how == "extrapolated" and lim == pytest.approx(0.1535, rel=1e-9)
    # the same means with a seed spread larger than the difference: pooled mean, no amplification
    lim, how = threshold_limit({30: [0.16, 0.2071], 60: [0.15, 0.187]})
    assert how == "pooled" and lim == pytest.approx((0.18355 + 0.1685) / 2)
    # one seed at an end: the trend cannot be resolved
    assert threshold_limit({30: [0.18, 0.19], 50: [0.17]})[1] == "pooled"
    with pytest.raises(ValueError, match="per_d"):
        threshold_limit({30: []})
