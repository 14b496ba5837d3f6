"""Head budget (docs/ensemble.md A5, Thm 6.1): split a fixed ``D = H · d_k`` between heads and head size.

:func:`budget_sweep` estimates the integrated MSE of the uniform ensemble for every split
(``d_k`` a divisor of ``D``, ``H = D/d_k``) by Monte Carlo; :func:`continuous_optimum` locates the
optimum on a continuous ``log d_k`` scale (a parabola through the best split and its neighbours);
:func:`fit_power_law` fits ``log d_k* = a + p · log t`` for ``t = n`` (polynomial law) or
``t = log n`` (the stated law), with the exponent free or fixed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.validation import check_int
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import decompose
from attnlab.ensemble.layouts import projection_layout

__all__ = ["BudgetSweep", "budget_splits", "budget_sweep", "continuous_optimum", "fit_power_law"]


def budget_splits(D: int, max_d_k: int | None = None) -> list[int]:
    """The per-head dimensions ``d_k`` that divide ``D`` (ascending), at most ``max_d_k`` when given."""
    D = check_int("D", D, min=1)
    top = D if max_d_k is None else check_int("max_d_k", max_d_k, min=1)
    return [k for k in range(1, D + 1) if D % k == 0 and k <= top]


@dataclass(frozen=True)
class BudgetSweep:
    """Integrated MSE for every split of the budget."""

    d_k: np.ndarray  # (S,) per-head dimensions
    heads: np.ndarray  # (S,) H = D / d_k
    mse: np.ndarray  # (S,) integrated MSE
    bias2: np.ndarray  # (S,)
    variance_part: np.ndarray  # (S,) variance + covariance terms

    @property
    def best_d_k(self) -> int:
        return int(self.d_k[int(np.argmin(self.mse))])


def budget_sweep(
    task: RegressionTask,
    D: int,
    n_train: int,
    reps: int,
    n_queries: int,
    c: float = 1.0,
    layout: str = "random",
    kernel: str = "gaussian",
    seed: int = 0,
    device: str | torch.device = "cpu",
    max_d_k: int | None = None,
) -> BudgetSweep:
    """Integrated MSE of the uniform ensemble for each split ``D = H · d_k``.

    Every split sees the same queries and training samples (common random numbers: the
    generator is re-seeded per split), so differences between splits are not sampling noise
    of the data. Projections: ``layout`` frames scaled by ``c``; the default bandwidth
    convention ``scale = 1/√d_k``. Random draws use CPU generators (the same numbers on every
    device); the Monte Carlo kernel sums run on ``device``. ``max_d_k`` keeps only the splits with
    ``d_k <= max_d_k`` (e.g. ``d − 1``: every head a proper subspace of the input, so heads differ).
    """
    ks = budget_splits(D, max_d_k)
    mse, b2, vp = [], [], []
    for k in ks:  # one MC decomposition per split (a handful of splits)
        H = D // k
        W = projection_layout(
            layout, H, task.d, k, c, generator=torch.Generator().manual_seed(seed + 7919 * k)
        ).to(device)  # (H, d, k) drawn and orthonormalised on CPU, then moved
        alpha = torch.full((H,), 1.0 / H, dtype=torch.float64, device=device)
        dec = decompose(
            task, W, alpha, n_train, n_queries, reps, torch.Generator().manual_seed(seed), kernel=kernel
        )
        it = dec.integrated()
        mse.append(it["mse"])
        b2.append(it["bias2"])
        vp.append(it["variance"] + it["covariance"])
    return BudgetSweep(
        np.array(ks), np.array([D // k for k in ks]), np.array(mse), np.array(b2), np.array(vp)
    )


def continuous_optimum(d_k: np.ndarray, mse: np.ndarray) -> float:
    """Optimal ``d_k`` on a continuous scale: vertex of a parabola in ``log d_k`` through the best
    split and its neighbours (the best split itself at either end of the range)."""
    i = int(np.argmin(mse))
    if i == 0 or i == len(d_k) - 1:
        return float(d_k[i])
    x = np.log(d_k[i - 1 : i + 2].astype(float))
    yv = mse[i - 1 : i + 2]
    a, b, _ = np.polyfit(x, yv, 2)
    if a <= 0:
        return float(d_k[i])
    v = float(np.clip(-b / (2 * a), x[0], x[2]))
    return math.exp(v)


def fit_power_law(t: np.ndarray, dk: np.ndarray, exponent: float | None = None) -> dict[str, float]:
    """Least squares ``log dk = a + p log t``; ``p`` fixed when ``exponent`` is given.

    Returns ``a``, ``p``, ``p_se`` (nan when fixed or too few points), ``rss`` and ``r2``.
    """
    x = np.log(np.asarray(t, dtype=float))
    yv = np.log(np.asarray(dk, dtype=float))
    if exponent is None:
        A = np.vstack([np.ones_like(x), x]).T
        coef, *_ = np.linalg.lstsq(A, yv, rcond=None)
        a, p = float(coef[0]), float(coef[1])
        res = yv - (a + p * x)
        dof = len(x) - 2
        sxx = float(((x - x.mean()) ** 2).sum())
        p_se = math.sqrt(float(res @ res) / dof / sxx) if dof > 0 and sxx > 0 else math.nan
    else:
        p = float(exponent)
        a = float((yv - p * x).mean())
        res = yv - (a + p * x)
        p_se = math.nan
    tss = float(((yv - yv.mean()) ** 2).sum())
    rss = float(res @ res)
    return {"a": a, "p": p, "p_se": p_se, "rss": rss, "r2": 1 - rss / tss if tss > 0 else math.nan}
