"""Training the heads' projections on a leave-one-out or held-out objective (docs/ensemble.md A4).

In-sample fit is the wrong objective for NW heads: each training point's own kernel weight
lets a head interpolate (a kernel that sees only the point itself has zero training error).
``objective="loo"`` drops each point's own term (the diagonal of the score matrix);
``objective="holdout"`` fits the NW memory on one part of the sample and the loss on the rest.
Early stopping (optional): with a validation sample ``(X_val, y_val)`` kept out of training, the
held-out ensemble MSE at ``X_val`` (NW memory: the whole training sample) is recorded before every
step and after the last; the projections returned are those of the step with the lowest validation
MSE, and training stops after ``patience`` steps without a new lowest value.
An optional orthogonality penalty ``λ · mean_{h<h'} ‖W_hᵀW_h'‖_F² / (‖W_hᵀW_h‖_F ‖W_h'ᵀW_h'‖_F)``
(the weight-form overlap, invariant to the projections' scale so that it does not act on the
bandwidth) pushes the heads towards mutually orthogonal subspaces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.stats import linear_slope
from attnlab.core.validation import check_choice, check_int, check_real, check_tensor
from attnlab.ensemble.heads import KERNELS, resolve_scale

__all__ = [
    "OBJECTIVES",
    "TrainedProjections",
    "ensemble_loss",
    "kept_path_slope",
    "train_projections",
    "weight_overlap_penalty",
]

OBJECTIVES = ("loo", "holdout")


@dataclass(frozen=True)
class TrainedProjections:
    """Result of :func:`train_projections`: final projections and the loss history."""

    W: torch.Tensor  # (H, d, d_k)
    loss_history: torch.Tensor  # (steps,) objective without the penalty
    penalty_history: torch.Tensor  # (steps,) penalty value (before the factor λ)
    objective: str
    penalty: float
    val_history: torch.Tensor | None = None  # validation MSE before each step (and after the last)
    best_step: int | None = None  # optimiser steps taken by the returned W (0: the initial projections)
    checkpoints: torch.Tensor | None = None  # (T, H, d, d_k) projections at ``checkpoint_steps``
    checkpoint_steps: tuple[int, ...] = ()  # optimiser steps taken at each checkpoint (0: the start)


def _soft_predictions(
    Xq: torch.Tensor,
    Xk: torch.Tensor,
    yk: torch.Tensor,
    W: torch.Tensor,
    scale: float,
    kernel: str,
    loo: bool,
) -> torch.Tensor:
    pq = torch.einsum("md,hdk->hmk", Xq, W)  # (H, m, k)
    pk = torch.einsum("nd,hdk->hnk", Xk, W)  # (H, N, k)
    s = scale * pq @ pk.transpose(-1, -2)  # (H, m, N)
    if kernel == "gaussian":
        s = s - 0.5 * scale * pk.square().sum(-1).unsqueeze(-2)
    if loo:
        mask = torch.eye(Xq.shape[0], dtype=torch.bool, device=Xq.device)
        s = s.masked_fill(mask, -math.inf)
    return torch.softmax(s, dim=-1) @ yk  # (H, m)


def weight_overlap_penalty(W: torch.Tensor) -> torch.Tensor:
    """``mean_{h<h'} ‖W_hᵀW_h'‖_F² / (‖W_hᵀW_h‖_F ‖W_h'ᵀW_h'‖_F)`` (differentiable; 0 for H = 1)."""
    H = W.shape[0]
    if H < 2:
        return W.new_zeros(())
    G = torch.einsum("hdi,gdj->hgij", W, W).square().sum(dim=(-1, -2))  # (H, H)
    n = torch.sqrt(torch.diagonal(G))  # (H,)
    ov = G / (n.unsqueeze(0) * n.unsqueeze(1))
    iu = torch.triu_indices(H, H, 1, device=W.device)
    return ov[iu[0], iu[1]].mean()


def ensemble_loss(
    W: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    alpha: torch.Tensor,
    objective: str = "loo",
    scale: float | None = None,
    kernel: str = "gaussian",
    holdout_fraction: float = 0.5,
) -> torch.Tensor:
    """Mean squared error of the weighted ensemble on the LOO or held-out objective (differentiable)."""
    check_choice("objective", objective, OBJECTIVES)
    sc = resolve_scale(scale, W.shape[-1])
    if objective == "loo":
        P = _soft_predictions(X, X, y, W, sc, kernel, loo=True)  # (H, N)
        return ((alpha @ P) - y).square().mean()
    n_fit = max(1, int(round(X.shape[0] * (1 - holdout_fraction))))
    P = _soft_predictions(X[n_fit:], X[:n_fit], y[:n_fit], W, sc, kernel, loo=False)  # (H, N - n_fit)
    return ((alpha @ P) - y[n_fit:]).square().mean()


def train_projections(
    W0: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    alpha: torch.Tensor | None = None,
    penalty: float = 0.0,
    objective: str = "loo",
    steps: int = 200,
    lr: float = 0.05,
    scale: float | None = None,
    kernel: str = "gaussian",
    X_val: torch.Tensor | None = None,
    y_val: torch.Tensor | None = None,
    patience: int | None = None,
    checkpoint_every: int | None = None,
) -> TrainedProjections:
    """Train the projections by full-batch Adam on the LOO/held-out MSE plus an orthogonality penalty.

    Parameters
    ----------
    W0 : Tensor, shape (H, d, d_k)
        Initial projections (e.g. a random layout).
    X : Tensor, shape (N, d)
    y : Tensor, shape (N,)
    alpha : Tensor, shape (H,), optional
        Fixed head weights (default uniform).
    penalty : float
        Coefficient ``λ >= 0`` of :func:`weight_overlap_penalty`.
    objective : {"loo", "holdout"}
    steps : int
    lr : float
    scale : float, optional
        Inverse temperature (default ``1/√d_k``); the projections' norms are trained, so the
        effective bandwidth is learned too.
    kernel : {"dot", "gaussian"}
    X_val : Tensor, shape (M, d), optional
        Validation inputs for early stopping (never used in the gradient).
    y_val : Tensor, shape (M,), optional
        Validation targets (required with ``X_val``).
    patience : int, optional
        Stop after this many steps without a new lowest validation MSE (default: run all
        ``steps``, still returning the best projections). Needs ``X_val``.
    checkpoint_every : int, optional
        Keep a copy of the projections every this many optimiser steps (step 0, the start, included)
        and after the last step taken, whether or not training stopped early: the trajectory of the
        projections, e.g. for the HDI along training.

    Returns
    -------
    TrainedProjections
    """
    check_tensor("W0", W0, ndim=3)
    check_tensor("X", X, ndim=2)
    check_tensor("y", y, shape=(X.shape[0],))
    check_real("penalty", penalty, min=0.0)
    check_choice("objective", objective, OBJECTIVES)
    check_choice("kernel", kernel, KERNELS)
    steps = check_int("steps", steps, min=1)
    lr = check_real("lr", lr, min=0.0, min_open=True)
    early = X_val is not None
    if early:
        check_tensor("X_val", X_val, ndim=2)
        if y_val is None:
            raise ValueError("y_val: expected validation targets with X_val, got None")
        check_tensor("y_val", y_val, shape=(X_val.shape[0],))
    elif y_val is not None or patience is not None:
        raise ValueError("X_val: expected validation inputs with y_val or patience, got None")
    if patience is not None:
        patience = check_int("patience", patience, min=1)
    if checkpoint_every is not None:
        checkpoint_every = check_int("checkpoint_every", checkpoint_every, min=1)
    H = W0.shape[0]
    if alpha is None:
        alpha = torch.full((H,), 1.0 / H, dtype=W0.dtype, device=W0.device)
    sc = resolve_scale(scale, W0.shape[-1])

    def val_mse(Wc: torch.Tensor) -> float:
        with torch.no_grad():
            P = _soft_predictions(X_val, X, y, Wc, sc, kernel, loo=False)  # (H, M)
            return float(((alpha @ P) - y_val).square().mean())

    W = W0.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([W], lr=lr)
    losses, pens, vals = [], [], []
    best_W, best_step, best_val = W0.detach().clone(), 0, math.inf
    snaps: list[torch.Tensor] = []
    snap_steps: list[int] = []
    for step in range(steps):  # optimisation steps are sequential by nature
        if checkpoint_every is not None and step % checkpoint_every == 0:
            snaps.append(W.detach().clone())
            snap_steps.append(step)
        if early:
            vals.append(val_mse(W))
            if vals[-1] < best_val:
                best_W, best_step, best_val = W.detach().clone(), step, vals[-1]
            elif patience is not None and step - best_step >= patience:
                break
        opt.zero_grad()
        loss = ensemble_loss(W, X, y, alpha, objective, scale, kernel)
        pen = weight_overlap_penalty(W)
        (loss + penalty * pen).backward()
        opt.step()
        losses.append(float(loss.detach()))
        pens.append(float(pen.detach()))
    else:
        if early:
            vals.append(val_mse(W))
            if vals[-1] < best_val:
                best_W, best_step = W.detach().clone(), steps
    taken = len(losses)
    if checkpoint_every is not None and (not snap_steps or snap_steps[-1] != taken):
        snaps.append(W.detach().clone())
        snap_steps.append(taken)
    return TrainedProjections(
        best_W if early else W.detach(),
        torch.tensor(losses, dtype=torch.float64),
        torch.tensor(pens, dtype=torch.float64),
        objective,
        float(penalty),
        torch.tensor(vals, dtype=torch.float64) if early else None,
        best_step if early else None,
        torch.stack(snaps) if snaps else None,
        tuple(snap_steps),
    )


def kept_path_slope(steps: np.ndarray, values: np.ndarray, best_step: int, value_at_best: float) -> float:
    """Least-squares slope, per 100 steps, of a quantity recorded along training (e.g. the HDI at each
    checkpoint of :func:`train_projections`) over the part of training that was kept: the checkpoints
    before the early-stopped step ``best_step`` and that step's own value. nan when no step was kept
    (``best_step == 0``).
    """
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    if s.shape != v.shape or s.ndim != 1:
        raise ValueError(f"values: expected a 1-d array shaped like steps {s.shape}, got {v.shape}")
    best_step = check_int("best_step", best_step, min=0)
    if best_step == 0:
        return math.nan
    keep = s < best_step
    return 100 * linear_slope(np.append(s[keep], best_step), np.append(v[keep], float(value_at_best)))
