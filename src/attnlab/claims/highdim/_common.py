"""What the claims of paper C share: the ERM optimiser's configuration, the problem setting, row bookkeeping.

Devices: the random inputs (targets, sequences, label noise, the student's initialisation) are drawn from CPU
generators exactly as on CPU and moved to ``point.device``, where the labels, the ERM training, the test
errors and the eigen-decompositions of trained matrices run (float64). The state evolution (numpy/scipy
quadrature and small batched Newton solves) and the thresholds stay on CPU: theory-only rows record
``"device": "cpu"``, rows with a simulation record where it ran.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

from attnlab.engine.params import In
from attnlab.engine.protocol import Row

#: The domains every paper-C claim's Params shares (the setting, the ERM's step cap and tolerance); each
#: claim's DOMAINS adds its own fields to these.
SETTING_DOMAINS = {
    "alpha": In("(0, inf)", cap=1_000),
    "d": In("[2, inf)", cap=100_000),
    "noise": In("[0, inf)"),
    "kappa0": In("(0, 1]"),
    "tokens": In("[2, inf)", cap=1_000),
    "max_steps": In("[1, inf)", cap=1_000_000),
    "rtol": In("(0, 1)"),
}

PAPER = "C"

_T = TypeVar("_T")

#: the most recent results of :func:`shared` kept per process (a claim's grid visits one theory input for
#: all its seeds and controls in a row; 64 covers every paper-C quick grid's distinct theory inputs)
SHARED_SIZE = 64
_SHARED: OrderedDict[tuple, Any] = OrderedDict()


def shared(key: tuple, compute: Callable[[], _T]) -> _T:
    """``compute()``, computed once per process for each ``key`` (the most recent :data:`SHARED_SIZE`).

    For the seed-independent theory side of a point: the state evolution at one (setting, α, nodes) is the
    same deterministic computation for every seed and for a control that changes only the simulation, so
    the points of one worker share it instead of solving it again. ``key`` must hold every input
    ``compute`` reads; the value is returned as computed (callers must not modify it). A memo, not state:
    the result is the one ``compute()`` returns (tests hold shared and fresh results equal).
    """
    if key in _SHARED:
        _SHARED.move_to_end(key)
        return _SHARED[key]
    value = compute()
    _SHARED[key] = value
    while len(_SHARED) > SHARED_SIZE:
        _SHARED.popitem(last=False)
    return value


#: the parameters of theory-vs-adam's family that only its simulation side reads (a control's planted
#: change on the ERM side); the theory row of a control differing only in these equals the test's
SIM_ONLY = frozenset({"sim_lam_scale", "sim_beta"})


def shared_theory_row(point: Any, run: Callable[[Any], _T], sim_only: frozenset[str] = SIM_ONLY) -> _T:
    """``run(point)`` for a ``side = "theory"`` point, shared between the points whose parameters differ
    only in ``sim_only`` (the test's theory row and a control's; by default theory-vs-adam's family's
    :data:`SIM_ONLY`)."""
    import dataclasses

    p = point.p
    key = tuple(
        sorted((f.name, repr(getattr(p, f.name))) for f in dataclasses.fields(p) if f.name not in sim_only)
    )
    r = shared(("theory-row", type(p).__module__, key), lambda: run(point))
    return type(r)(metrics=dict(r.metrics), arrays=dict(r.arrays))  # a copy: the caller may modify it


def device_name(device: Any) -> str:
    """The device a computation ran on, as torch names it (``cpu``, ``cuda:0``)."""
    import torch

    return str(torch.empty(0, device=device).device)


def ok_rows(rows: Sequence[Row]) -> tuple[list[Row], str]:
    """(the rows that computed, a note on the failed ones)."""
    good = [r for r in rows if r.ok]
    bad = len(rows) - len(good)
    return good, (f"{bad} failed row(s) ignored. " if bad else "")


def train_config(p: Any):
    """The ERM optimiser from a claim's ``Params``: fields ``max_steps`` and ``rtol`` (None: the optimiser's
    default), and ``optimizer`` (``"lbfgs"`` or ``"adam"``), ``dtype`` and ``init_scale`` where the
    ``Params`` has them; a ``Params`` without ``optimizer`` keeps the published protocol (Adam in float64)."""
    from attnlab.highdim import TrainConfig

    optimizer = getattr(p, "optimizer", "adam")
    dtype = getattr(p, "dtype", "float64")
    rtol = None if p.rtol is None else float(p.rtol)
    init_scale = float(getattr(p, "init_scale", 1.0))
    return TrainConfig(
        max_steps=int(p.max_steps), rtol=rtol, optimizer=optimizer, dtype=dtype, init_scale=init_scale
    )


def simulate_point(point: Any, p: Any, config: Any, **extra: Any):
    """The ERM of a simulation point: :func:`attnlab.highdim.simulate` at the ``d``, ``α``, ``κ0``, ``Δ``,
    ``T`` and ``λ̃`` of ``p`` (the point's parameters as the claim reads them: a control may have rescaled
    some) and the point's seed and device, with the optimiser ``config``; ``extra``: the further keywords of
    ``simulate`` a claim varies (``factorised``, ``beta``, ``task``, ...)."""
    from attnlab.highdim import simulate

    return simulate(
        p.d,
        p.alpha,
        kappa0=p.kappa0,
        noise=p.noise,
        tokens=p.tokens,
        lam=p.lam,
        seed=point.seed,
        config=config,
        device=point.device,
        **extra,
    )


def setting(p: Any, **over: Any):
    """The problem of docs/highdim.md C from a claim's ``Params`` (fields ``kappa0``, ``noise``, ``tokens``,
    ``lam``), with ``over`` replacing any of them (or adding ``target``)."""
    from attnlab.highdim import Setting

    kw = dict(kappa0=p.kappa0, noise=p.noise, tokens=p.tokens, lam=p.lam)
    kw.update(over)
    return Setting(**kw)


def groups(rows: Sequence[Row], keys: Sequence[str]) -> dict[tuple[Hashable, ...], list[Row]]:
    """Rows grouped by the values of the parameters ``keys``."""
    out: dict = {}
    for r in rows:
        out.setdefault(tuple(r.params[k] for k in keys), []).append(r)
    return out


def se_threshold(row: Row, metric: str, side: str) -> tuple[float, dict]:
    """The state evolution's threshold from a threshold claim's theory row: (α_c, numbers).

    ``metric`` (``se_data_loss`` or ``se_test_error``) holds the scan at each of ``se_lams`` over
    ``se_alphas``; the points where the two smallest λ̃ agree to ``se_rtol`` (in the λ̃ → 0 limit) and the
    value is positive are fitted by a power-law onset on ``side`` (``"above"``: leaves zero above α_c;
    ``"below"``: reaches zero at α_c from below). NaN when fewer than three points are in the limit, or when
    the row ran no scan (``se_closed_form`` false: the quick profiles leave this numerics check to the full
    one).
    """
    from attnlab.highdim.se_thresholds import in_limit, power_onset

    p, m = row.params, row.metrics
    lams = list(p["se_lams"])
    if not p.get("se_closed_form", True) or len(m.get(metric) or []) < 2:
        return float("nan"), {"se_converged": m["se_converged"], "se_scan": "not run"}
    i, j = int(np.argmin(lams)), int(np.argsort(lams)[1])
    small, check = m[metric][i], m[metric][j]
    ok = in_limit(small, check, p["se_rtol"]) & (np.asarray(small) > 0)
    a = np.asarray(p["se_alphas"], dtype=float)[ok]
    nums = {"se_alphas_used": a.tolist(), "se_converged": m["se_converged"]}
    if a.size < 3:
        return float("nan"), nums
    on = power_onset(a, np.asarray(small)[ok], side)
    nums.update(se_exponent=on.exponent, se_fit_rms=on.rms)
    return on.alpha, nums


#: the trend a + b/d of a finite-size estimate is refuted when its fit's χ² exceeds this quantile
TREND_QUANTILE = 0.99
MIN_SIZES = 3  # sizes of d that test a + b/d (two determine it exactly)


def large_d_estimate(
    per_d: dict[int, Sequence[float]],
    pooled: bool = False,
    spread_power: float = 0.0,
    correction: float = 1.0,
) -> dict[str, Any]:
    """The d → ∞ value of a quantity measured per seed at several d, with its standard error.

    Per d the seed mean and its standard error (spread between seeds over √seeds; ``pooled``: one spread for
    every d, the within-size variances pooled with their degrees of freedom, so that a size whose few seeds
    happen to agree does not take a weight its spread does not earn; with ``spread_power`` k the spread is
    taken to fall like ``d^−k``: the residuals are scaled by ``d^k`` before pooling and each size's standard
    error is ``spread/(d^k √seeds)``, ``spread`` then being the value at d = 1); over at least
    :data:`MIN_SIZES` sizes the weighted least-squares fit ``a + b/d`` (weights the inverse squared standard
    errors; the O(1/d) finite-size correction) gives ``estimate = a`` and ``se`` = a's standard error from the
    fit's covariance ``(AᵀWA)⁻¹``, and its χ² (``len(per_d) − 2`` degrees of freedom) tests that trend:
    ``refuted`` when it exceeds the :data:`TREND_QUANTILE` quantile. ``correction`` p fits ``a + b/d^p``
    instead (a finite-size correction of another order; 1, the default, is the O(1/d) one). With fewer
    sizes, or a size with no spread between seeds, ``estimate`` is NaN and ``why`` says what is missing.
    """
    from scipy.stats import chi2

    if not (math.isfinite(correction) and correction > 0):
        raise ValueError(f"correction: expected a positive power of 1/d, got {correction!r}")
    ds = sorted(per_d)
    means = {d: float(np.mean(per_d[d])) for d in ds}
    ses = {
        d: float(np.std(per_d[d], ddof=1) / np.sqrt(len(per_d[d]))) if len(per_d[d]) > 1 else 0.0 for d in ds
    }
    dof = sum(len(per_d[d]) - 1 for d in ds)
    spread = float("nan")
    if pooled and dof > 0:
        ss = sum(float(np.sum(((np.asarray(per_d[d]) - means[d]) * d**spread_power) ** 2)) for d in ds)
        spread = float(np.sqrt(ss / dof))
        ses = {
            d: spread / (d**spread_power * np.sqrt(len(per_d[d]))) if len(per_d[d]) > 1 else 0.0 for d in ds
        }
    out: dict[str, Any] = {
        "means": [means[d] for d in ds],
        "ses": [ses[d] for d in ds],
        "estimate": float("nan"),
        "se": float("nan"),
        "slope": float("nan"),
        "chi2": float("nan"),
        "chi2_limit": float("nan"),
        "refuted": False,
        "why": "",
        "spread": spread,
    }
    if len(ds) < MIN_SIZES:
        out["why"] = (
            f"{len(ds)} size(s) of d; the 1/d trend needs >= {MIN_SIZES} to be tested, not only fitted"
        )
        return out
    if any(ses[d] <= 0 for d in ds):
        out["why"] = "a size with fewer than two seeds or no spread between them: no weights"
        return out
    x = np.array(ds, dtype=float)
    m = np.array([means[d] for d in ds])
    w = 1 / np.array([ses[d] for d in ds]) ** 2
    A = np.stack([np.ones_like(x), x**-correction], axis=1)  # (k, 2)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))  # (2, 2)
    coef = cov @ (A.T @ (w * m))
    c2 = float(np.sum(w * (m - A @ coef) ** 2))
    limit = float(chi2.ppf(TREND_QUANTILE, len(ds) - 2))
    out.update(
        estimate=float(coef[0]),
        se=float(np.sqrt(cov[0, 0])),
        slope=float(coef[1]),
        chi2=c2,
        chi2_limit=limit,
        refuted=c2 > limit,
    )
    if c2 > limit:
        form = "a + b/d" if correction == 1 else f"a + b/d^{correction:g}"
        out["why"] = f"the seed means do not follow {form} (χ² {c2:.1f} > {limit:.1f})"
    return out


#: the finite-size forms ``a + b/d^p`` along which a large-d estimate is taken to d → ∞ besides ``a + b/d``.
#: The order of the correction is not known: the interpolation threshold's crossings at d = 20–150 (16
#: seeds per size) give a = 0.188, 0.179, 0.174 for p = 1/2, 1, 2, no form refuted by its χ², and p =
#: 0.3–1.75 at 95%; the diagonal logits xᵀSx/√d of Gaussian tokens have a third cumulant of order 1/√d
#: (docs/highdim.md, "The order of the finite-size correction, measured"). A decision that moves with the form
#: is not a verdict.
CORRECTIONS = (0.5, 1.0, 2.0)
#: how :func:`along_forms`' reason for a form-dependent decision begins
FORM_DEPENDENT = "form-dependent"


def along_forms(
    per_d: dict[int, Sequence[float]],
    decide: Callable[[dict[str, Any]], bool],
    corrections: Sequence[float] = CORRECTIONS,
    **fit: Any,
) -> tuple[dict[float, dict[str, Any]], str | None]:
    """The seed values ``per_d`` taken to d → ∞ along each form of ``corrections`` (default
    :data:`CORRECTIONS`; :func:`large_d_estimate` with ``fit``'s keywords and ``correction=p``), and whether
    the forms agree.

    ``decide(estimate)`` says whether the statement holds along one form. Returns ``(forms, why)``: ``forms``
    maps each p to its estimate with ``"holds"`` added (None for a form without an estimate), and ``why`` is
    None when every form the seeds do not refute (χ² under its limit) decides alike, else a sentence naming
    the forms along which it holds and those along which it fails (the verdict is form-dependent)."""
    forms = {p: dict(large_d_estimate(per_d, correction=p, **fit)) for p in corrections}
    for f in forms.values():
        f["holds"] = bool(decide(f)) if np.isfinite(f["estimate"]) else None
    allowed = {p: f["holds"] for p, f in forms.items() if f["holds"] is not None and not f["refuted"]}
    if len(set(allowed.values())) <= 1:
        return forms, None
    yes = ", ".join(f"{p:g}" for p, h in allowed.items() if h)
    no = ", ".join(f"{p:g}" for p, h in allowed.items() if not h)
    return forms, f"{FORM_DEPENDENT}: holds along a + b/d^p for p = {yes}, fails for p = {no}"


def forms_numbers(forms: dict[float, dict[str, Any]]) -> dict[str, list]:
    """``{p: [a, se(a), χ², holds]}`` of :func:`along_forms`' forms, for a verdict's numbers."""
    return {f"{p:g}": [f["estimate"], f["se"], f["chi2"], f["holds"]] for p, f in forms.items()}


#: how the thresholds' crossings are weighted on their way to d → ∞: one spread between seeds pooled over the
#: sizes (three or four seeds give a size's own spread too few degrees of freedom to weight by), falling like
#: 1/d. Measured: the spread of per-seed interpolation crossings falls like d^−(1.01 ± 0.11) over d = 20–200
#: (16 seeds per size up to 100; 0.0105 at d = 20, 0.0010 at 150), that of perfect-recovery crossings like
#: d^−(0.91 ± 0.10) over d = 20–200 (16 seeds per size); a spread held constant over the sizes is refuted
#: (docs/highdim.md, "The order of the finite-size correction, measured").
CROSSING_FIT = {"pooled": True, "spread_power": 1.0}


def crossing_against_theory(
    cross: dict[int, Sequence[float]],
    c_se: float,
    c_se_err: float,
    min_seeds: int,
    nums: dict[str, Any],
    corrections: Sequence[float] = CORRECTIONS,
) -> tuple[str | None, float, float]:
    """The simulations' large-d level crossing held against the state evolution's (the thresholds' rule).

    ``cross`` holds each d's per-seed crossings, ``c_se`` the state evolution's crossing (already through
    the claim's prediction hook) and ``c_se_err`` its standard error over scrambled node sets. The crossings
    are taken to d → ∞ by :func:`large_d_estimate` (:data:`CROSSING_FIT`: one spread pooled over the sizes,
    falling like 1/d); the tolerance is ``2 √(se² + c_se_err²)``; the same test is taken along each form of
    ``corrections`` (:func:`along_forms`). Fills ``nums`` and returns ``(why, gap, tol)``: ``why`` is the
    reason the verdict is outside its regime (too few seeds, the 1/d trend refuted, form-dependent), None
    when the gap decides.
    """
    seeds = min(len(cs) for cs in cross.values())
    est = large_d_estimate(cross, **CROSSING_FIT)
    nums.update(
        seeds=seeds,
        mean_crossing_per_d=est["means"],
        crossing_se_per_d=est["ses"],
        trend_chi2=est["chi2"],
        trend_chi2_limit=est["chi2_limit"],
    )
    if seeds < min_seeds:
        return f"{seeds} seed(s) at some d; the band needs >= {min_seeds}", float("nan"), float("nan")
    if not np.isfinite(est["estimate"]) or est["refuted"]:
        return est["why"], float("nan"), float("nan")
    tol = 2 * float(np.hypot(est["se"], c_se_err))
    gap = abs(est["estimate"] - c_se)
    forms, form_why = along_forms(
        cross,
        lambda f: abs(f["estimate"] - c_se) <= 2 * float(np.hypot(f["se"], c_se_err)),
        corrections,
        **CROSSING_FIT,
    )
    nums["crossing_forms"] = forms_numbers(forms)
    nums.update(
        alpha_measured=est["estimate"],
        alpha_measured_se=est["se"],
        alpha_cross_se=c_se,
        rel_gap=gap / c_se,
        gap_over_tol=gap / tol if tol > 0 else float("inf"),
        band=tol / c_se,
    )
    if form_why is not None:
        return form_why, gap, tol
    return None, gap, tol
