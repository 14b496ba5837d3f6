"""Bias–variance–covariance decomposition of an NW ensemble's MSE (docs/ensemble.md A2, Thm 3.1).

At a query ``q``, over the randomness of the training sample (R Monte Carlo replications,
population-style 1/R moments):

``MSE(q) = (Σ_h α_h b_h)² + Σ_h α_h² V_h + Σ_{h≠h'} α_h α_h' C_hh'``

with ``b_h = mean_r f_h^r(q) − f(q)``, ``C_hh' = mean_r (f_h^r − f̄_h)(f_h'^r − f̄_h')`` and
``V_h = C_hh``. With these moments the identity is exact (up to rounding) against the directly
estimated ``MSE = mean_r (Σ_h α_h f_h^r(q) − f(q))²``. The integrated MSE is the average over a
sample of queries from the input distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_int, check_tensor
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.heads import DEFAULT_MAX_ELEMS, head_predictions

__all__ = [
    "Decomposition",
    "decompose",
    "decompose_predictions",
    "equicorrelated_check",
    "equicorrelated_predictions",
    "equicorrelated_variance",
    "monte_carlo_predictions",
]


@dataclass(frozen=True)
class Decomposition:
    """The three terms of Thm 3.1 and the direct MSE, per query and integrated.

    Attributes
    ----------
    alpha : Tensor (H,)
        Head weights.
    bias : Tensor (H, m)
        Per-head bias ``b_h(q)``.
    variance : Tensor (H, m)
        Per-head variance ``V_h(q)``.
    covariance : Tensor (H, H, m)
        Head covariance matrix ``C_hh'(q)`` (diagonal = variance).
    bias_term, variance_term, covariance_term : Tensor (m,)
        ``(Σ α b)²``, ``Σ α² V``, ``Σ_{h≠h'} α α C``.
    mse : Tensor (m,)
        Directly estimated MSE of the weighted ensemble.
    reps : int
        Monte Carlo replications.
    """

    alpha: torch.Tensor
    bias: torch.Tensor
    variance: torch.Tensor
    covariance: torch.Tensor
    bias_term: torch.Tensor
    variance_term: torch.Tensor
    covariance_term: torch.Tensor
    mse: torch.Tensor
    reps: int

    @property
    def n_heads(self) -> int:
        return int(self.alpha.shape[0])

    @property
    def terms_sum(self) -> torch.Tensor:
        """``bias_term + variance_term + covariance_term`` (m,)."""
        return self.bias_term + self.variance_term + self.covariance_term

    @property
    def identity_rel_error(self) -> float:
        """``max_q |terms_sum − mse| / mse`` (0 when the MSE is 0 everywhere)."""
        denom = self.mse.abs().clamp_min(torch.finfo(self.mse.dtype).tiny)
        return float(((self.terms_sum - self.mse).abs() / denom).max())

    def integrated(self) -> dict[str, float]:
        """The query-averaged terms: ``bias2``, ``variance``, ``covariance``, ``mse``, ``terms_sum``."""
        return {
            "bias2": float(self.bias_term.mean()),
            "variance": float(self.variance_term.mean()),
            "covariance": float(self.covariance_term.mean()),
            "mse": float(self.mse.mean()),
            "terms_sum": float(self.terms_sum.mean()),
        }

    @property
    def mean_variance(self) -> float:
        """Mean over heads and queries of ``V_h(q)``."""
        return float(self.variance.mean())

    def pair_correlation(self) -> torch.Tensor:
        """Per query, the mean over ordered pairs ``h ≠ h'`` of ``C_hh' / √(V_h V_h')`` (m,); nan for one
        head."""
        H = self.n_heads
        if H < 2:
            return torch.full_like(self.variance[0], float("nan"))
        sd = self.variance.clamp_min(0).sqrt()  # (H, m)
        corr = self.covariance / (sd.unsqueeze(1) * sd.unsqueeze(0)).clamp_min(1e-300)  # (H, H, m)
        off = ~torch.eye(H, dtype=torch.bool, device=corr.device)
        return corr[off].mean(dim=0)  # (m,) every query has the same H(H−1) pairs

    def equicorrelated_form(self) -> torch.Tensor:
        """Per query, the closed form ``V(q)(ρ(q) + (1 − ρ(q))/H)`` of uniform weights (m,), at that query's
        mean head variance ``V(q)`` and mean correlation ``ρ(q)`` over pairs ``h ≠ h'`` (Thm 3.1 is stated
        at a fixed query); exact when the heads share one variance and one correlation there. Taken at the
        query-averaged V and ρ instead, it differs from this one's mean by ``(1 − 1/H) Cov_q(V(q), ρ(q))``."""
        H = self.n_heads
        V = self.variance.mean(dim=0)  # (m,)
        if H < 2:
            return V
        rho = self.pair_correlation()  # (m,)
        return V * (rho + (1.0 - rho) / H)

    @property
    def mean_correlation(self) -> float:
        """Mean over pairs ``h ≠ h'`` and queries of ``C_hh' / √(V_h V_h')`` (nan for one head)."""
        return float(self.pair_correlation().mean())


def decompose_predictions(preds: torch.Tensor, truth: torch.Tensor, alpha: torch.Tensor) -> Decomposition:
    """Decompose from Monte Carlo head predictions.

    Parameters
    ----------
    preds : Tensor, shape (R, H, m)
        Head ``h``'s estimate at query ``q`` from training sample ``r``.
    truth : Tensor, shape (m,)
        ``f(q)``.
    alpha : Tensor, shape (H,)
        Head weights summing to one (the bias term ``(Σ α_h b_h)²`` is the ensemble's bias only then).

    Returns
    -------
    Decomposition
    """
    check_tensor("preds", preds, ndim=3)
    R, H, m = preds.shape
    check_tensor("truth", truth, shape=(m,))
    check_tensor("alpha", alpha, shape=(H,))
    if R < 1:
        raise ValueError("preds: expected at least one replication, got 0")
    alpha = alpha.to(preds)
    if abs(float(alpha.sum()) - 1.0) > 1e-9:
        raise ValueError(f"alpha: expected weights summing to 1, got a sum of {float(alpha.sum())!r}")
    mean_f = preds.mean(dim=0)  # (H, m)
    bias = mean_f - truth  # (H, m)
    dev = preds - mean_f  # (R, H, m)
    cov = torch.einsum("rhm,rgm->hgm", dev, dev) / R  # (H, H, m), population moments
    var = torch.diagonal(cov, dim1=0, dim2=1).transpose(0, 1)  # (H, m)
    bias_term = (alpha @ bias).square()  # (m,)
    variance_term = alpha.square() @ var  # (m,)
    quad = torch.einsum("h,g,hgm->m", alpha, alpha, cov)  # (m,)
    covariance_term = quad - variance_term
    ens = torch.einsum("h,rhm->rm", alpha, preds)  # (R, m)
    mse = (ens - truth).square().mean(dim=0)  # (m,)
    return Decomposition(alpha, bias, var, cov, bias_term, variance_term, covariance_term, mse, R)


def monte_carlo_predictions(
    task: RegressionTask,
    W_K: torch.Tensor,
    n_train: int,
    queries: torch.Tensor,
    reps: int,
    generator: torch.Generator | None = None,
    W_Q: torch.Tensor | None = None,
    scale: float | None = None,
    kernel: str = "gaussian",
    max_elems: int = DEFAULT_MAX_ELEMS,
    rep_chunk: int | None = None,
) -> torch.Tensor:
    """Head estimates at fixed queries from ``reps`` independent training samples.

    Training samples are drawn in chunks of replications so that inputs and scores stay bounded
    (``max_elems`` scores at once; ``rep_chunk`` samples drawn at once, default: as many as fit).
    The computation runs on ``queries``' device (``W_K``, ``W_Q`` must be there too); samples are
    drawn on the generator's device and moved, so a CPU generator gives the same draws everywhere.

    Returns
    -------
    Tensor, shape (reps, H, m)
    """
    reps = check_int("reps", reps, min=1)
    n_train = check_int("n_train", n_train, min=1)
    check_tensor("queries", queries, ndim=2)
    H = W_K.shape[0]
    m = queries.shape[0]
    if rep_chunk is None:
        rep_chunk = max(1, min(reps, max_elems // max(1, H * m * n_train)))
    dev = queries.device
    draw = draw_device(generator, dev)
    out = torch.empty(reps, H, m, dtype=queries.dtype, device=dev)
    for r0 in range(0, reps, rep_chunk):  # replications in chunks; each chunk fully vectorised
        r1 = min(reps, r0 + rep_chunk)
        X, y = task.sample(n_train, generator, batch=(r1 - r0,), dtype=queries.dtype, device=draw)
        X, y = X.to(dev), y.to(dev)  # (b, N, d), (b, N) drawn where the generator lives
        out[r0:r1] = head_predictions(queries, X, y, W_K, W_Q, scale, kernel, max_elems=max_elems)
    return out


def decompose(
    task: RegressionTask,
    W_K: torch.Tensor,
    alpha: torch.Tensor,
    n_train: int,
    n_queries: int,
    reps: int,
    generator: torch.Generator | None = None,
    W_Q: torch.Tensor | None = None,
    scale: float | None = None,
    kernel: str = "gaussian",
    max_elems: int = DEFAULT_MAX_ELEMS,
) -> Decomposition:
    """Monte Carlo MSE decomposition of the ensemble ``Σ_h α_h f_h`` on ``task``.

    Parameters
    ----------
    task : RegressionTask
    W_K : Tensor, shape (H, d, d_k)
        Projections (``W_Q`` defaults to them).
    alpha : Tensor, shape (H,)
    n_train : int
        Training-sample size N.
    n_queries : int
        Queries drawn once from the task's input distribution (integration points).
    reps : int
        Replications R of the training sample.
    generator : torch.Generator, optional
    scale, kernel
        See :func:`attnlab.ensemble.heads.head_predictions` (here ``kernel`` defaults to
        ``"gaussian"``).

    Returns
    -------
    Decomposition
    """
    n_queries = check_int("n_queries", n_queries, min=1)
    check_tensor("W_K", W_K, ndim=3)
    if W_K.shape[1] != task.d:
        raise ValueError(f"W_K: expected input dimension {task.d} (the task's d), got {W_K.shape[1]}")
    Q = task.sample_x(n_queries, generator, dtype=W_K.dtype, device=draw_device(generator, W_K.device))
    Q = Q.to(W_K.device)  # (m, d)
    preds = monte_carlo_predictions(task, W_K, n_train, Q, reps, generator, W_Q, scale, kernel, max_elems)
    return decompose_predictions(preds, task.f(Q), alpha.to(W_K))


def equicorrelated_variance(V: float, rho: float, H: int) -> float:
    """Variance part of a uniform ensemble of H heads with equal variance V and correlation ρ.

    ``Σ α² V + Σ_{h≠h'} α α C = V (ρ + (1 − ρ)/H)`` for ``α = 1/H``.
    """
    H = check_int("H", H, min=1)
    return V * (rho + (1.0 - rho) / H)


def equicorrelated_predictions(
    reps: int, H: int, V: float, rho: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Predictions of ``H`` heads whose sample moments are exactly equal variance ``V``, correlation ``ρ``.

    ``R`` zero-mean columns made orthonormal by QR (sample covariance exactly ``I/R``) and scaled by
    ``√R`` are mixed as ``√V (√ρ z_0 + √(1−ρ) z_h)``: with population (1/R) moments every head has
    variance ``V`` and every pair covariance ``ρ V``, to rounding. A test bed for the closed form
    :func:`equicorrelated_variance`.

    Returns
    -------
    Tensor, shape (reps, H), float64
    """
    reps = check_int("reps", reps, min=2)
    H = check_int("H", H, min=1)
    if reps < H + 2:
        raise ValueError(f"reps: expected at least H + 2 = {H + 2} replications, got {reps}")
    if not (V > 0 and 0.0 <= rho <= 1.0):
        raise ValueError(f"V, rho: expected V > 0 and rho in [0, 1], got V = {V!r}, rho = {rho!r}")
    Z = torch.randn(reps, H + 1, generator=generator, dtype=torch.float64)
    Z = Z - Z.mean(dim=0)
    Qz, _ = torch.linalg.qr(Z)  # (R, H+1) orthonormal, zero-mean columns: sample cov exactly I/R
    Qz = Qz * math.sqrt(reps)
    return math.sqrt(V) * (math.sqrt(rho) * Qz[:, :1] + math.sqrt(1 - rho) * Qz[:, 1:])  # (R, H)


def equicorrelated_check(
    reps: int, H: int, V: float, rho: float, generator: torch.Generator | None = None
) -> float:
    """Relative error of the decomposition's variance part against ``V(ρ + (1−ρ)/H)`` on
    :func:`equicorrelated_predictions` (uniform weights): rounding only, ~1e-16."""
    preds = equicorrelated_predictions(reps, H, V, rho, generator)  # (R, H)
    alpha = torch.full((H,), 1.0 / H, dtype=torch.float64)
    dec = decompose_predictions(preds.unsqueeze(-1), torch.zeros(1, dtype=torch.float64), alpha)
    got = float(dec.variance_term[0] + dec.covariance_term[0])
    want = equicorrelated_variance(V, rho, H)
    return abs(got - want) / want
