"""The windows over which ``highdim.scaling-law`` reads exponents (its module docstring, rule v10): the
state evolution's plateau of local exponents, the simulation's own plateau (v8's rule, reported), the
theory's plateau as the simulation's window, and the simulation's exponent over a fixed window."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab.core.stats import loglog_slope

__all__ = ["MIN_SEEDS", "PLATEAU_TOL", "SE_SIGMAS", "plateau", "sim_plateau", "sim_window", "theory_window"]

PLATEAU_TOL = 0.05  # local exponents within this of each other form a plateau (plus 2 se on simulations)
MIN_SEEDS = 3  # simulation: seeds with every point of a curve, for the standard errors
SE_SIGMAS = 2.0  # simulation: standard errors in the plateau's agreement and in the exponent's tolerance


def plateau(x: np.ndarray, y: np.ndarray) -> tuple[list, tuple[int, int] | None, float | None, float]:
    """The state evolution's plateau: (local exponents, span, exponent, spread)."""
    from attnlab.highdim import find_plateau, local_exponents

    ok = y > 0
    x, y = x[ok], y[ok]
    loc = local_exponents(x, y, window=1) if x.size >= 2 else []
    span = find_plateau(loc, PLATEAU_TOL, length=2)
    if span is None:
        return loc, None, None, 0.0
    i, j = span
    sel = [v for v in loc[i : j + 1] if v is not None]
    return loc, span, float(loglog_slope(x[i : j + 2], y[i : j + 2])), max(sel) - min(sel)


def sim_plateau(x: np.ndarray, y: np.ndarray) -> dict:
    """The simulation's own plateau on one curve (``y``: seeds × points), by v8's rule (reported, not
    deciding): the longest run of at least two local exponents of the seed means within ``PLATEAU_TOL +
    SE_SIGMAS`` times their largest standard error. A dict with those local exponents and their standard
    errors, the seeds used, and where a plateau exists its span (n/d), exponent, standard error and
    spread."""
    from attnlab.highdim import find_plateau, local_exponents, power_law_fit

    complete = y[np.all(np.isfinite(y) & (y > 0), axis=1)]
    out: dict = {"seeds": int(complete.shape[0])}
    if complete.shape[0] < MIN_SEEDS or x.size < 3:
        return out
    mean = complete.mean(axis=0)
    lx, ly = np.log(x), np.log(complete)
    per_seed = np.diff(ly, axis=1) / np.diff(lx)  # (seeds, points − 1): each seed's local exponents
    se_loc = per_seed.std(axis=0, ddof=1) / np.sqrt(complete.shape[0])
    loc = local_exponents(x, mean, window=1)
    tol = PLATEAU_TOL + SE_SIGMAS * float(se_loc.max())
    out.update(local=[float(v) for v in loc], local_se=[float(v) for v in se_loc], plateau_tol=tol)
    span = find_plateau(loc, tol, length=2)
    if span is None:
        return out
    i, j = span
    fit = power_law_fit(x[i : j + 2], complete[:, i : j + 2])
    sel = loc[i : j + 1]
    out.update(
        span=[float(x[i]), float(x[j + 1])],
        exponent=fit.slope,
        se=fit.se,
        spread=float(max(sel) - min(sel)),
    )
    return out


def theory_window(theory: tuple[float, np.ndarray, np.ndarray] | None, x: np.ndarray) -> dict:
    """The window a simulation curve at n/d = ``x`` is read over (rule v10 of
    :mod:`attnlab.claims.highdim.scaling_law`): the plateau of the state-evolution curve ``theory`` (γ, n/d,
    excess) restricted to ``x``. A dict with the theory's local exponents there and, where it plateaus,
    ``span`` (n/d, inclusive), its exponent and spread; empty without a theory curve at these n/d."""
    if theory is None:
        return {}
    _, xt, yt = theory
    on = np.isin(xt, x)
    if on.sum() < 3:
        return {}
    loc, span, expo, spread = plateau(xt[on], yt[on])
    xs = xt[on][yt[on] > 0]
    out: dict = {"local": [None if v is None else float(v) for v in loc]}
    if span is not None:
        out.update(span=[float(xs[span[0]]), float(xs[span[1] + 1])], exponent=expo, spread=spread)
    return out


def sim_window(x: np.ndarray, y: np.ndarray, span: Sequence[float]) -> dict:
    """The simulation's exponent over the fixed window ``span`` (n/d, inclusive) of one curve (``y``: seeds ×
    points): the log-log slope of the seed means of the complete seeds, with the standard error of the
    seeds' slopes; empty with fewer than three complete seeds or fewer than two points in the window."""
    from attnlab.highdim import power_law_fit

    complete = y[np.all(np.isfinite(y) & (y > 0), axis=1)]
    sel = (x >= span[0]) & (x <= span[1])
    if complete.shape[0] < MIN_SEEDS or sel.sum() < 2:
        return {}
    xs, ys = x[sel], complete[:, sel]
    if sel.sum() == 2:  # two points: the slope itself (power_law_fit needs three)
        per = np.diff(np.log(ys), axis=1)[:, 0] / np.diff(np.log(xs))[0]
        slope = float(loglog_slope(xs, ys.mean(axis=0)))
        return {"exponent": slope, "se": float(per.std(ddof=1) / np.sqrt(per.size))}
    fit = power_law_fit(xs, ys)
    return {"exponent": fit.slope, "se": fit.se}
