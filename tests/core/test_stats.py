"""core.stats against closed forms and scipy computed independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.core.stats import linear_slope, local_slopes, loglog_slope, mean_ci, spearman


def test_mean_ci_matches_the_t_interval_by_hand() -> None:
    v = [1.0, 2.0, 4.0, 7.0]
    m, lo, hi = mean_ci(v)
    # t_{0.975, 3} = 3.182446305284263 (tables); sd = sqrt(7) for these values
    half = 3.182446305284263 * math.sqrt(7.0) / 2.0
    assert (
        m == 3.5 and lo == pytest.approx(3.5 - half, rel=1e-12) and hi == pytest.approx(3.5 + half, rel=1e-12)
    )
    assert math.isnan(mean_ci([1.0])[1])
    with pytest.raises(ValueError, match="level"):
        mean_ci(v, level=1.5)


def test_spearman_on_monotone_and_reversed() -> None:
    x = [1, 2, 3, 4, 5]
    assert spearman(x, [v**3 for v in x]) == pytest.approx(1.0)
    assert spearman(x, [-v for v in x]) == pytest.approx(-1.0)
    assert math.isnan(spearman(x, [1, 1, 1, 1, 1]))


def test_loglog_slope_recovers_an_exponent_and_drops_bad_pairs() -> None:
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert loglog_slope(x, 3.0 * x**-0.75) == pytest.approx(-0.75, abs=1e-12)
    assert loglog_slope([1, 2, 4], [1.0, None, -1.0]) is None
    assert linear_slope([0, 1, 2], [1, 3, 5]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="x"):
        linear_slope([1, 1], [2, 3])


def test_local_slopes_are_constant_on_a_power_law_and_drift_otherwise() -> None:
    x = 2.0 ** np.arange(6)
    assert all(s == pytest.approx(-1.0) for s in local_slopes(x, 1 / x))
    bent = local_slopes(x, 1 / x + 0.1)
    assert bent[0] < bent[-1] < 0  # the floor flattens the late windows
