"""Power-law fits of the excess error: exact power laws, per-seed standard errors computed by hand,
missing seeds, local exponents and their plateau."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.highdim import find_plateau, local_exponents, power_law_fit


def test_exact_power_law_gives_its_exponent():
    x = np.array([2.0, 4.0, 8.0, 16.0])
    fit = power_law_fit(x, [3 * x**-0.5, 3 * x**-0.5])
    # log y is exactly linear in log x: least squares returns the exponent to rounding
    assert fit.slope == pytest.approx(-0.5, abs=1e-12)
    assert fit.se == pytest.approx(0.0, abs=1e-12) and len(fit.per_seed) == 2


def test_standard_error_is_that_of_the_per_seed_exponents():
    x = np.array([1.0, 2.0, 4.0])
    ys = [x**-1.0 * np.array([1.0, 1.0, 1.1]), x**-1.0 * np.array([1.0, 1.0, 0.9]), x**-1.0]
    fit = power_law_fit(x, ys)
    # by hand: a seed's exponent is the least-squares slope of log y on log x
    lx = np.log(x)
    slopes = [
        np.sum((lx - lx.mean()) * (np.log(y) - np.log(y).mean())) / np.sum((lx - lx.mean()) ** 2) for y in ys
    ]
    assert fit.per_seed == pytest.approx(slopes, abs=1e-12)
    assert fit.se == pytest.approx(np.std(slopes, ddof=1) / math.sqrt(3), rel=1e-12)
    mean = np.mean(ys, axis=0)
    assert fit.slope == pytest.approx(
        np.sum((lx - lx.mean()) * (np.log(mean) - np.log(mean).mean())) / np.sum((lx - lx.mean()) ** 2),
        abs=1e-12,
    )


def test_missing_and_non_positive_points():
    x = [1.0, 2.0, 4.0, 8.0]
    y = [[1.0, 0.5, 0.25, -1.0], [1.0, 0.5, np.nan, -1.0]]
    fit = power_law_fit(x, y)
    # the last point's mean is negative: dropped; the second seed misses a kept point: no exponent
    assert list(fit.x) == [1.0, 2.0, 4.0] and len(fit.per_seed) == 1 and math.isnan(fit.se)
    assert fit.slope == pytest.approx(-1.0, abs=1e-12)
    assert power_law_fit([1.0, 2.0, 4.0], [[1.0, -1.0, 0.5]]) is None
    with pytest.raises(ValueError, match="y_by_seed"):
        power_law_fit([1.0, 2.0], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="x"):
        power_law_fit([0.0, 1.0, 2.0], [[1.0, 2.0, 3.0]])


def test_local_exponents_and_plateau():
    # a crossover from x^-1 to x^-0.5 at x = 8: early windows see -1, late ones -0.5
    x = 2.0 ** np.arange(8)
    y = np.where(x <= 8, 8 / x, np.sqrt(8 / x))
    loc = local_exponents(x, y, window=1)
    assert loc[0] == pytest.approx(-1.0) and loc[-1] == pytest.approx(-0.5)
    # the longest flat run is the late one (4 windows at -0.5) rather than the early one (3 at -1)
    assert find_plateau(loc, tol=1e-9) == (3, 6)
    assert find_plateau(loc, tol=1e-9, length=5) is None
    assert find_plateau(loc, tol=0.6) == (0, 6)
    # missing exponents break a run; equally long runs: the earliest
    assert find_plateau([-0.5, None, -0.5, -0.5, 0.3, 0.3], tol=0.01) == (2, 3)
    assert find_plateau([-0.5], tol=1.0) is None
    with pytest.raises(ValueError, match="length"):
        find_plateau(loc, tol=0.1, length=0)


def test_mean_exponent_error_against_monte_carlo():
    # 2000 draws of 16 seeds with 20% independent noise on a 1/α fall at α = 4, 8, 16: the delta-method error
    # must match the spread of the slope over the draws (first order in 20%/√16 = 5%: within 10% of it, the
    # Monte Carlo spread itself known to 1.6%)
    from attnlab.highdim import mean_exponent

    rng = np.random.default_rng(1)
    x = np.array([4.0, 8.0, 16.0])
    law = 0.004 * (x / 4) ** -1.0
    slopes, errors = [], []
    for _ in range(2000):
        s, se = mean_exponent(x, law * (1 + 0.2 * rng.standard_normal((16, 3))))
        slopes.append(s)
        errors.append(se)
    assert np.mean(slopes) == pytest.approx(-1.0, abs=0.01)
    assert np.mean(errors) == pytest.approx(np.std(slopes), rel=0.1)
    # correlated columns: a common factor per seed moves every point alike and leaves the slope alone
    s, se = mean_exponent(x, law * (1 + 0.2 * rng.standard_normal((16, 1))))
    assert s == pytest.approx(-1.0, abs=1e-12) and se == pytest.approx(0.0, abs=1e-9)
    assert math.isnan(mean_exponent(x, [law])[1])
    with pytest.raises(ValueError, match="positive seed means"):
        mean_exponent(x, [law * np.array([1, -1, 1])])
    with pytest.raises(ValueError, match="shape"):
        mean_exponent(x, [law[:2]])
