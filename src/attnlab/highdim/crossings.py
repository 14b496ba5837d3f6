"""Where a measured curve crosses a level, and the finite-size extrapolation of that crossing
(docs/highdim.md C5: thresholds measured by simulation at finite d).

A threshold in α shows at finite d as a sharp change of a measured quantity (the training data loss leaves
zero at the interpolation threshold; the noiseless test error reaches zero at perfect recovery).
:func:`level_crossing` locates where ``log(value)`` crosses ``log(level)`` along a grid of α, by linear
interpolation in log-value between the two grid points that bracket it; :func:`finite_size_limit`
extrapolates crossings measured at several d to ``d → ∞`` with a least-squares line in ``1/d``
(finite-size corrections of order ``1/d``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from attnlab.core.stats import linear_slope

__all__ = ["finite_size_limit", "level_crossing", "threshold_limit"]


def level_crossing(
    alphas: Sequence[float],
    values: Sequence[float],
    level: float,
    direction: Literal["up", "down"] = "up",
) -> float | None:
    """The first α at which ``values`` crosses ``level`` going ``direction`` ("up": from at or below
    the level to above it; "down": from above to at or below), interpolated linearly in
    ``log(value)`` between the bracketing grid points; None when the grid does not bracket a crossing
    (every value on one side: the crossing is off the grid).

    ``alphas`` increasing; ``values`` positive (a non-positive value counts as far below the level).
    """
    a = np.asarray(alphas, dtype=float)
    v = np.asarray(values, dtype=float)
    if a.ndim != 1 or v.shape != a.shape:
        raise ValueError(f"values: expected {a.size} values like alphas, got shape {v.shape}")
    if a.size and np.any(np.diff(a) <= 0):
        raise ValueError(f"alphas: expected an increasing grid, got {a.tolist()}")
    if not level > 0:
        raise ValueError(f"level: expected a positive level, got {level!r}")
    if direction not in ("up", "down"):
        raise ValueError(f"direction: expected 'up' or 'down', got {direction!r}")
    lv = np.log(np.maximum(v, 1e-300)) - math.log(level)  # > 0 above the level
    for i in range(a.size - 1):
        lo, hi = lv[i], lv[i + 1]
        if (direction == "up" and lo <= 0 < hi) or (direction == "down" and lo > 0 >= hi):
            return float(a[i] + (a[i + 1] - a[i]) * (0 - lo) / (hi - lo))
    return None


def finite_size_limit(ds: Sequence[float], crossings: Sequence[float]) -> tuple[float, float]:
    """``(limit, slope)`` of the least-squares line ``crossing = limit + slope / d``; with one d the
    limit is that crossing and the slope nan."""
    d = np.asarray(ds, dtype=float)
    c = np.asarray(crossings, dtype=float)
    if d.ndim != 1 or c.shape != d.shape or d.size == 0:
        raise ValueError(f"crossings: expected one value per d ({d.size}), got shape {c.shape}")
    if np.any(d <= 0):
        raise ValueError(f"ds: expected positive dimensions, got {d.tolist()}")
    if np.unique(d).size < 2:
        return float(np.mean(c)), math.nan
    slope = linear_slope(1 / d, c)
    return float(np.mean(c) - slope * np.mean(1 / d)), float(slope)


def threshold_limit(per_d: dict[int, Sequence[float]], z: float = 2.0) -> tuple[float, str]:
    """The large-d threshold from crossings measured per d (seed replicates per d): the 1/d extrapolation
    of :func:`finite_size_limit` when the trend between the smallest and the largest d exceeds ``z``
    standard errors of the difference of their seed means, else the mean over every d (no resolved trend:
    extrapolating would only amplify the seed noise). Returns ``(limit, "extrapolated" | "pooled")``; with
    one seed at either end the trend cannot be resolved and the pooled mean is returned."""
    ds = sorted(per_d)
    if not ds or any(len(per_d[d]) == 0 for d in ds):
        raise ValueError("per_d: expected at least one crossing for each d")
    means = [float(np.mean(per_d[d])) for d in ds]
    lo, hi = per_d[ds[0]], per_d[ds[-1]]
    if len(ds) >= 2 and len(lo) >= 2 and len(hi) >= 2:
        se = math.sqrt(np.var(lo, ddof=1) / len(lo) + np.var(hi, ddof=1) / len(hi))
        if abs(means[-1] - means[0]) > z * se:
            return finite_size_limit(ds, means)[0], "extrapolated"
    return float(np.mean(means)), "pooled"
