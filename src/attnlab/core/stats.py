"""Small statistics shared by the claims: confidence intervals, rank correlation, power-law slopes.

One implementation per quantity, used everywhere a verdict needs it (no inline ``polyfit``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["mean_ci", "spearman", "loglog_slope", "local_slopes", "linear_slope"]


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and a two-sided Student-t confidence interval ``(mean, lo, hi)``.

    With fewer than two values the bounds are nan (no spread to estimate).
    """
    from scipy import stats

    if not 0.0 < level < 1.0:
        raise ValueError(f"level: expected a probability in (0, 1), got {level!r}")
    v = np.asarray(values, dtype=float)
    m = float(v.mean()) if v.size else math.nan
    if v.size < 2:
        return m, math.nan, math.nan
    se = float(v.std(ddof=1) / math.sqrt(v.size))
    t = float(stats.t.ppf(0.5 + level / 2, v.size - 1))
    return m, m - t * se, m + t * se


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (nan when either side is constant)."""
    from scipy import stats

    if len(a) != len(b):
        raise ValueError(f"b: expected {len(a)} values like a, got {len(b)}")
    r = stats.spearmanr(a, b).statistic
    return float(r) if r == r else math.nan


def linear_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``y`` against ``x`` (at least two distinct x)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise ValueError(f"y: expected a 1-d array shaped like x {xa.shape}, got {ya.shape}")
    if xa.size < 2 or np.ptp(xa) == 0:
        raise ValueError(f"x: expected at least two distinct values, got {xa.tolist()}")
    return float(np.polyfit(xa, ya, 1)[0])


def loglog_slope(x: Sequence[float], y: Sequence[float], drop_nonpositive: bool = True) -> float | None:
    """Slope of ``log y`` against ``log x`` (the exponent of a power law ``y ∝ x^slope``).

    Pairs with ``y`` None or ≤ 0 (or ``x`` ≤ 0) are dropped when ``drop_nonpositive``; None when
    fewer than two pairs remain.
    """
    pts = [
        (float(a), float(b))
        for a, b in zip(x, y)
        if b is not None and a is not None and (not drop_nonpositive or (a > 0 and b > 0))
    ]
    if len(pts) < 2:
        return None
    arr = np.array(pts)
    return linear_slope(np.log(arr[:, 0]), np.log(arr[:, 1]))


def local_slopes(x: Sequence[float], y: Sequence[float], window: int = 2) -> list[float | None]:
    """Log-log slopes over successive windows of ``window + 1`` consecutive points.

    A power law has constant local slopes; a drift says the law has not set in on that range.
    """
    if window < 1:
        raise ValueError(f"window: expected an integer >= 1, got {window!r}")
    xs, ys = list(x), list(y)
    return [loglog_slope(xs[i : i + window + 1], ys[i : i + window + 1]) for i in range(len(xs) - window)]
