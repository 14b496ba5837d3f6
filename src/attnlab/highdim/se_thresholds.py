"""Thresholds read off the state evolution itself (docs/highdim.md C5, "From the state evolution").

The closed forms of :mod:`attnlab.highdim.thresholds` are limits ``λ̃ → 0+`` of the state evolution; this
module locates the same thresholds from state-evolution fixed points, a computation that shares with the
closed forms only the function J:

* a scan (:func:`lam_scan`) solves the state evolution on an α grid at a few small λ̃, with continuation in
  α and in λ̃ (each point warm-started from the same α at the next larger λ̃, else from its α neighbour);
* a quantity is in the ``λ̃ → 0`` limit at an α when its values at the two smallest λ̃ agree to a relative
  ``rtol`` (:func:`in_limit`); the quantities that vanish on one side of a threshold are not, there (they
  shrink with λ̃), so the agreement also tells the sides apart;
* on the points in the limit the quantity is fitted by ``A·|α − α_c|^p`` with α_c, A and p free
  (:func:`power_onset`); α_c is the threshold.

The quantities: the data part of the training loss (penalty removed, :func:`data_loss`) grows from 0 above
the interpolation threshold (``p ≈ 3`` at κ0 = 0.5, Δ = 0.5); the test error at Δ = 0 falls to 0 at the
perfect-recovery threshold (``p ≈ 2``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from attnlab.core.validation import check_real
from attnlab.highdim.channel import OutputChannel
from attnlab.highdim.channel_nodes import default_fold
from attnlab.highdim.fixed_point import FixedPoint
from attnlab.highdim.setting import Setting
from attnlab.highdim.spectra import J_and_derivatives

__all__ = ["Onset", "power_onset", "data_loss", "lam_scan", "in_limit"]


@dataclass(frozen=True)
class Onset:
    """``value ≈ amplitude·|α − alpha|^exponent`` on the points used; ``alpha`` is NaN when the best α_c
    lies on the bound of its search interval (the data do not locate it); ``rms`` is the root mean square
    of the residuals of ``log value``."""

    alpha: float
    exponent: float
    amplitude: float
    rms: float
    n: int


def _fit(a: np.ndarray, lv: np.ndarray, ac: float) -> tuple[float, float, float]:
    """(rss, slope, intercept) of ``log v = c + p log|α − α_c|``."""
    x = np.log(np.abs(a - ac))
    p, c = np.polyfit(x, lv, 1)
    return float(np.sum((lv - (c + p * x)) ** 2)), float(p), float(c)


def power_onset(alphas: Sequence[float], values: Sequence[float], side: Literal["above", "below"]) -> Onset:
    """Fit ``v = A |α − α_c|^p`` to positive ``values`` that vanish at α_c.

    ``side="above"``: the points lie above α_c (the value grows from 0 as α passes α_c, e.g. the training
    loss past the interpolation threshold); α_c is searched in ``(min α − 2·span, min α)``.
    ``side="below"``: the points lie below α_c (the value falls to 0 at α_c, e.g. the test error at perfect
    recovery); α_c in ``(max α, max α + 2·span)``. For each α_c the fit of ``log v`` on ``log|α − α_c|`` is
    linear least squares; α_c minimises its residual (bounded scalar search). Needs three or more points.
    """
    a = np.asarray(alphas, dtype=float)
    v = np.asarray(values, dtype=float)
    if a.ndim != 1 or v.shape != a.shape:
        raise ValueError(f"values: expected {a.size} values like alphas, got shape {v.shape}")
    if a.size < 3:
        raise ValueError(f"alphas: expected at least three points, got {a.size}")
    if np.any(v <= 0) or not np.all(np.isfinite(v)):
        raise ValueError(f"values: expected positive finite values, got {v.tolist()}")
    if side not in ("above", "below"):
        raise ValueError(f"side: expected 'above' or 'below', got {side!r}")
    span = float(a.max() - a.min())
    if span <= 0:
        raise ValueError(f"alphas: expected distinct points, got {a.tolist()}")
    lv = np.log(v)
    gap = 1e-9 * span
    lo, hi = (a.min() - 2 * span, a.min() - gap) if side == "above" else (a.max() + gap, a.max() + 2 * span)
    from scipy import optimize  # at the call: importing scipy.optimize costs ~0.4 CPU-s

    res = optimize.minimize_scalar(
        lambda ac: _fit(a, lv, ac)[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-10 * span}
    )
    ac = float(res.x)
    rss, p, c = _fit(a, lv, ac)
    on_bound = min(ac - lo, hi - ac) < 1e-6 * span
    return Onset(math.nan if on_bound else ac, p, math.exp(c), math.sqrt(rss / a.size), int(a.size))


def data_loss(setting: Setting, fp: FixedPoint) -> float:
    """The data part of the training loss per d² at a fixed point: ``train_loss − λ̃ Tr Ŝ/d`` with
    ``Tr Ŝ/d = η ∫ (x − ε)_+ dμ_δ = −η ∂_ε J/2`` (the predicted spectrum of docs/highdim.md C4)."""
    jv = J_and_derivatives(setting.spectrum, fp.delta, fp.eps)
    return fp.train_loss - setting.lam * (-fp.eta * jv.dJ_deps / 2)


def lam_scan(
    setting: Setting,
    alphas: Sequence[float],
    lams: Sequence[float],
    *,
    nodes: int = 1024,
    seed: int = 0,
    tol: float = 1e-6,
) -> list[list[FixedPoint]]:
    """Fixed points on the grid ``lams × alphas`` (``[i][j]`` at ``lams[i]``, ``alphas[j]``).

    ``lams`` are solved from the largest down, each α warm-started from the same α at the previous λ̃ and,
    at the first λ̃, from its α neighbour, the first α from a ladder of λ̃ = 1e-3, 1e-4, … solved to 1e-3
    (``setting.lam`` is replaced by each λ̃; each λ̃ has its own ``nodes`` quasi-random nodes)."""
    from attnlab.highdim.state_evolution import state_evolution

    if not alphas or not lams:
        raise ValueError("alphas, lams: expected at least one value each")
    for lam in lams:
        check_real("lams", lam, min=0.0)
    order = sorted(range(len(lams)), key=lambda i: -lams[i])
    out: list[list[FixedPoint] | None] = [None] * len(lams)
    prev_row: list[FixedPoint] | None = None
    # the first α at the largest λ̃ is reached down a ladder of λ̃ from 1e-3 (a decade a step): a cold
    # start at a tiny λ̃ costs several times more evaluations than the whole ladder
    first: FixedPoint | None = None
    lam = 1e-3
    while lam > 3 * lams[order[0]]:
        s = replace(setting, lam=lam)
        fp = state_evolution(s, alphas[0], init=first, channel=_channel(s, nodes, seed), tol=1e-3)
        first = fp if fp.converged else first
        lam /= 10
    for i in order:
        s = replace(setting, lam=float(lams[i]))
        ch = _channel(s, nodes, seed)
        row: list[FixedPoint] = []
        for j, a in enumerate(alphas):
            init = (
                prev_row[j] if prev_row is not None and prev_row[j].converged else (row[-1] if row else first)
            )
            row.append(state_evolution(s, a, init=init, channel=ch, tol=tol))
        out[i] = row
        prev_row = row
    return out  # type: ignore[return-value]


def _channel(setting: Setting, nodes: int, seed: int) -> OutputChannel:
    # the nodes a default solve takes (folded at T = 2: channel_nodes.default_fold)
    return OutputChannel(setting, nodes, seed, fold=default_fold(setting))


def in_limit(small: Sequence[float], larger: Sequence[float], rtol: float = 0.05) -> np.ndarray:
    """Boolean mask: the value at the smallest λ̃ agrees with the one at the next larger λ̃ to ``rtol``
    (relative), i.e. it has reached its ``λ̃ → 0`` limit there."""
    s = np.asarray(small, dtype=float)
    b = np.asarray(larger, dtype=float)
    if s.shape != b.shape:
        raise ValueError(f"larger: expected shape {s.shape} like small, got {b.shape}")
    return np.abs(s - b) <= rtol * np.maximum(np.abs(s), 1e-300)
