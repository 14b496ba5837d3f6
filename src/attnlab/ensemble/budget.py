"""Head budget (docs/ensemble.md A5, Thm 6.1): split a fixed ``D = H · d_k`` between heads and head size.

:func:`budget_sweep` estimates the integrated MSE of the uniform ensemble for every split
(``d_k`` a divisor of ``D``, ``H = D/d_k``) by Monte Carlo; :func:`continuous_optimum` locates the
optimum on a continuous ``log d_k`` scale (a parabola through the best split and its neighbours);
:func:`fit_power_law` fits ``log d_k* = a + p · log t`` for ``t = n`` (polynomial law) or
``t = log n`` (the stated law), with the exponent free or fixed.

How the heads are combined (``weighting``): ``averaged`` (``α_h = 1/H``, the ensemble of the paper),
``summed`` (``α_h = 1``, heads added as attention's concatenation followed by an identity output map
adds them) or ``fitted`` (least-squares weights ``α`` without constraint, a scalar output projection:
fitted on half of the Monte Carlo replications and scored on the other half, both ways). How the
scale ``1/√d_k`` is read (``bandwidth``): ``scale`` (the score ``−‖Δ‖²/(2√d_k)``, attention's
temperature) or ``sd`` (``1/√d_k`` as the Gaussian kernel's standard deviation: score ``−d_k‖Δ‖²/2``).

The large-sample limit (:func:`radial_limit`, :func:`limit_mse`). For the radial target
``f = (‖x‖² − d)/√(2d)``, ``x ~ N(0, I_d)``, and a Gaussian kernel of fixed width, the NW estimate of
head ``h`` tends as ``n → ∞`` to ``m_h(q) = E[f(x) K_h(q, x)] / E[K_h(q, x)]`` with
``K_h = exp(−s ‖W_hᵀ(q − x)‖²/2)``. ``K_h`` is the likelihood of observing ``W_hᵀ q`` as ``W_hᵀ x`` plus
``N(0, I/s)`` noise, so ``x`` given it is Gaussian with covariance ``Σ_h = (I + s W_h W_hᵀ)⁻¹`` and
mean ``M_h q``, ``M_h = I − Σ_h``: ``m_h(q) = (qᵀ M_h² q + tr Σ_h − d)/√(2d)``. With
``E[(qᵀAq + a)(qᵀBq + b)] = 2 tr(AB) + (tr A + a)(tr B + b)`` every moment is closed:
``G_hg = E[m_h m_g] = (2 tr(M_h² M_g²) + t_h t_g)/(2d)`` with ``t_h = tr M_h² + tr Σ_h − d``,
``b_h = E[f m_h] = tr(M_h²)/d`` and ``E f² = 1``, so the limit MSE of ``Σ α_h f_h`` is
``1 − 2αᵀb + αᵀGα`` and the best linear weights are ``G⁻¹b``. For mutually orthogonal frames
``W_h = c U_h`` and a vanishing width (``s → ∞``) averaging leaves the floor
``1 − 2 d_k/d + d_k/(d H)`` (:func:`averaging_floor`): the part of ``f`` a head cannot see, plus the
``1 − 1/H`` shrinkage of what each head does see. It falls with ``d_k`` at a fixed ``D = H d_k``, so at
large n averaging favours large heads whatever the smoothing; summing orthogonal heads that span
``R^d`` has no floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.validation import check_choice, check_int, check_real, check_tensor
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import monte_carlo_predictions
from attnlab.ensemble.layouts import projection_layout

__all__ = [
    "BANDWIDTHS",
    "WEIGHTINGS",
    "BudgetSweep",
    "averaging_floor",
    "budget_splits",
    "budget_sweep",
    "combine_heads",
    "continuous_optimum",
    "pooled_optimum",
    "fit_power_law",
    "head_scale",
    "limit_mse",
    "radial_limit",
]

#: How the heads' estimates are combined (see the module docstring).
WEIGHTINGS = ("averaged", "summed", "fitted")
#: How the scale 1/√d_k is read: attention's score temperature, or the Gaussian kernel's sd.
BANDWIDTHS = ("scale", "sd")


def budget_splits(D: int, max_d_k: int | None = None) -> list[int]:
    """The per-head dimensions ``d_k`` that divide ``D`` (ascending), at most ``max_d_k`` when given."""
    D = check_int("D", D, min=1)
    top = D if max_d_k is None else check_int("max_d_k", max_d_k, min=1)
    return [k for k in range(1, D + 1) if D % k == 0 and k <= top]


def head_scale(d_k: int, bandwidth: str = "scale") -> float:
    """The Gaussian score's ``s`` in ``−s‖Δ‖²/2`` for a head of size ``d_k``: ``1/√d_k`` read as the
    temperature (``scale``) or as the kernel's standard deviation (``sd``: ``s = d_k``)."""
    d_k = check_int("d_k", d_k, min=1)
    check_choice("bandwidth", bandwidth, BANDWIDTHS)
    return 1.0 / math.sqrt(d_k) if bandwidth == "scale" else float(d_k)


def averaging_floor(d: int, d_k: int, H: int) -> float:
    """Large-sample MSE of ``H`` averaged mutually orthogonal heads of size ``d_k`` on the radial target
    in ``R^d``, kernel width → 0: ``1 − 2 d_k/d + d_k/(d H)`` (module docstring)."""
    d, d_k, H = check_int("d", d, min=1), check_int("d_k", d_k, min=1), check_int("H", H, min=1)
    if H * d_k > d:
        raise ValueError(f"H·d_k: expected at most d = {d} for orthogonal heads, got {H * d_k}")
    return 1.0 - 2.0 * d_k / d + d_k / (d * H)


def radial_limit(W: torch.Tensor, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """``(G, b)`` of the radial target's large-sample limit (module docstring) for heads ``W`` (H, d, k)
    with the Gaussian score ``−scale‖W_hᵀ(q − x)‖²/2``: ``G`` (H, H), ``b`` (H,)."""
    check_tensor("W", W, ndim=3)
    scale = check_real("scale", scale, min=0.0, min_open=True)
    W = W.detach().to("cpu", torch.float64)
    H, d, _ = W.shape
    eye = torch.eye(d, dtype=torch.float64)
    Sig = torch.linalg.inv(eye + scale * W @ W.transpose(-1, -2))  # (H, d, d) posterior covariances
    M2 = (eye - Sig) @ (eye - Sig)  # (H, d, d)
    tr_m2 = torch.diagonal(M2, dim1=-2, dim2=-1).sum(-1)  # (H,)
    t = tr_m2 + torch.diagonal(Sig, dim1=-2, dim2=-1).sum(-1) - d  # (H,) mean of qᵀM²q + tr Σ − d
    cross = torch.einsum("hij,gji->hg", M2, M2)  # (H, H) tr(M_h² M_g²)
    G = (2.0 * cross + torch.outer(t, t)) / (2 * d)
    return G.numpy(), (tr_m2 / d).numpy()


def limit_mse(G: np.ndarray, b: np.ndarray, weighting: str = "averaged") -> float:
    """Large-sample MSE ``1 − 2αᵀb + αᵀGα`` of the heads combined by ``weighting`` (``fitted``: the best
    linear weights ``α = G⁻¹b``)."""
    check_choice("weighting", weighting, WEIGHTINGS)
    H = len(b)
    if weighting == "fitted":
        alpha = np.linalg.lstsq(G, b, rcond=None)[0]
    else:
        alpha = np.full(H, 1.0 / H if weighting == "averaged" else 1.0)
    return float(1.0 - 2.0 * alpha @ b + alpha @ G @ alpha)


def combine_heads(preds: torch.Tensor, truth: torch.Tensor, weighting: str = "averaged") -> dict[str, float]:
    """Integrated ``mse``, ``bias2`` and ``variance`` of the heads' estimates ``preds`` (R, H, m) against
    ``truth`` (m,) combined by ``weighting`` (population 1/R moments over replications, mean over
    queries: ``mse = bias2 + variance``). ``fitted``: least-squares weights fitted on half of the
    replications at half of the queries and applied to the other replications at the other queries (four
    quadrants, each scored with the weights of the opposite one): neither the training samples nor the
    queries the weights were fitted on are scored with them."""
    check_tensor("preds", preds, ndim=3)
    check_choice("weighting", weighting, WEIGHTINGS)
    R, H, m = preds.shape
    if weighting == "fitted":
        if R < 2 or m < 2:
            raise ValueError(
                f"preds: expected at least 2 replications and 2 queries to fit out of sample, got {R}, {m}"
            )
        rs, qs = (slice(0, R // 2), slice(R // 2, R)), (slice(0, m // 2), slice(m // 2, m))
        ens = torch.empty(R, m, dtype=preds.dtype, device=preds.device)
        for i in (0, 1):  # each quadrant (replications, queries) gets the weights of the opposite one
            for j in (0, 1):
                fit = preds[rs[1 - i]][:, :, qs[1 - j]]  # (r, H, q) other samples, other queries
                X = fit.permute(0, 2, 1).reshape(-1, H)  # (r·q, H)
                y = truth[qs[1 - j]].expand(fit.shape[0], -1).reshape(-1, 1)  # (r·q, 1)
                alpha = torch.linalg.lstsq(X, y, driver="gelsd").solution[:, 0]  # (H,)
                ens[rs[i], qs[j]] = torch.einsum("h,rhm->rm", alpha, preds[rs[i]][:, :, qs[j]])
    else:
        a = 1.0 / H if weighting == "averaged" else 1.0
        ens = a * preds.sum(dim=1)  # (R, m)
    mean = ens.mean(dim=0)  # (m,)
    return {
        "mse": float((ens - truth).square().mean()),
        "bias2": float((mean - truth).square().mean()),
        "variance": float((ens - mean).square().mean()),
    }


@dataclass(frozen=True)
class BudgetSweep:
    """Integrated MSE for every split of the budget."""

    d_k: np.ndarray  # (S,) per-head dimensions
    heads: np.ndarray  # (S,) H = D / d_k
    mse: np.ndarray  # (S,) integrated MSE
    bias2: np.ndarray  # (S,)
    variance_part: np.ndarray  # (S,) variance + covariance terms
    limit: np.ndarray  # (S,) large-sample limit of the MSE (radial target; nan for the others)

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
    weighting: str = "averaged",
    bandwidth: str = "scale",
) -> BudgetSweep:
    """Integrated MSE of the ensemble for each split ``D = H · d_k``.

    Every split sees the same queries and training samples (common random numbers: the
    generator is re-seeded per split), so differences between splits are not sampling noise
    of the data. Projections: ``layout`` frames scaled by ``c``; the heads combined by ``weighting``
    and the scale ``1/√d_k`` read by ``bandwidth`` (module docstring). Random draws use CPU generators
    (the same numbers on every device); the Monte Carlo kernel sums run on ``device``. ``max_d_k`` keeps
    only the splits with ``d_k <= max_d_k`` (e.g. ``d − 1``: every head a proper subspace of the input,
    so heads differ). ``limit`` holds the radial target's large-sample MSE of the same heads.
    """
    check_choice("weighting", weighting, WEIGHTINGS)
    check_choice("bandwidth", bandwidth, BANDWIDTHS)
    ks = budget_splits(D, max_d_k)
    mse, b2, vp, lim = [], [], [], []
    for k in ks:  # one MC estimate per split (a handful of splits)
        H = D // k
        W = projection_layout(
            layout, H, task.d, k, c, generator=torch.Generator().manual_seed(seed + 7919 * k)
        ).to(device)  # (H, d, k) drawn and orthonormalised on CPU, then moved
        s = head_scale(k, bandwidth)
        g = torch.Generator().manual_seed(seed)  # the same queries and samples at every split
        Q = task.sample_x(n_queries, g, dtype=W.dtype).to(device)  # (m, d)
        preds = monte_carlo_predictions(task, W, n_train, Q, reps, g, scale=s, kernel=kernel)  # (R, H, m)
        it = combine_heads(preds, task.f(Q), weighting)
        mse.append(it["mse"])
        b2.append(it["bias2"])
        vp.append(it["variance"])
        if task.target == "radial" and kernel == "gaussian":
            lim.append(limit_mse(*radial_limit(W, s), weighting))
        else:
            lim.append(math.nan)
    return BudgetSweep(
        np.array(ks), np.array([D // k for k in ks]), np.array(mse), np.array(b2), np.array(vp), np.array(lim)
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


def pooled_optimum(d_k: np.ndarray, curves: np.ndarray) -> tuple[float, bool]:
    """Optimal ``d_k`` of the seed-averaged MSE curve: ``curves`` (seeds, S) holds each seed's MSE by
    split on the grid ``d_k`` (S,); returns the :func:`continuous_optimum` of their mean and whether the
    mean's best split is at either end of the grid (an optimum the grid does not resolve)."""
    curves = np.atleast_2d(np.asarray(curves, dtype=float))
    d_k = np.asarray(d_k)
    if curves.shape[1] != len(d_k) or curves.shape[0] < 1:
        raise ValueError(f"curves: expected (seeds >= 1, {len(d_k)}) MSEs by split, got {curves.shape}")
    mean = curves.mean(axis=0)  # (S,)
    i = int(np.argmin(mean))
    return continuous_optimum(d_k, mean), i in (0, len(d_k) - 1)


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
