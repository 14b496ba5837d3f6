"""Nuclear-norm-penalised ERM over positive semi-definite ``S`` by proximal gradient (docs/highdim.md C2).

Weight decay on the factor ``W`` of ``S = WᵀW/√(pd)`` is the nuclear-norm penalty ``d λ̃ Tr S`` on ``S``
(``λ‖W‖² = d λ̃ Tr S``, ``λ̃ = √κ λ``), so the factorised student's loss has the same values as

    ``F(S) = [Σ_μ ‖y_μ − ŷ_μ(S)‖² + d λ̃ Tr S] / d²``  over symmetric ``S ⪰ 0``

(seq2seq: the data term divided by d). :func:`nuclear_objective` evaluates ``F``; :func:`nuclear_psd_erm`
minimises it directly in ``S`` by accelerated proximal gradient (FISTA with backtracking on the step): a
gradient step on the data term, then the proximal map of ``d λ̃ Tr S + [S ⪰ 0]``, which soft-thresholds the
eigenvalues, ``w ↦ max(w − t d λ̃, 0)``. The data term is not convex in ``S`` (softmax), so the method finds
a stationary point, not a certified minimum; comparing the values ``F`` reached by this method and by Adam
on ``W`` is what it is for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.data import Dataset
from attnlab.highdim.train import predict

__all__ = ["ProximalResult", "nuclear_objective", "nuclear_psd_erm"]


@dataclass(frozen=True)
class ProximalResult:
    """The ``S`` reached, ``objective`` ``F(S)`` (per d², penalty included), the data part per d², the
    number of proximal steps, whether the relative change of ``F`` fell below the tolerance, and the rank."""

    S: torch.Tensor = field(repr=False)
    objective: float
    data_loss: float
    steps: int
    converged: bool
    rank: int


def _data(S: torch.Tensor, train: Dataset, beta: float) -> torch.Tensor:
    yh = predict(train.X, S, beta, train.task)
    e = ((train.y - yh) ** 2).sum()
    return e / train.X.shape[-1] if train.task == "seq2seq" else e


def nuclear_objective(S: torch.Tensor, train: Dataset, lam: float, beta: float = 1.0) -> float:
    """``F(S) = [data loss + d λ̃ Tr S]/d²`` (``lam`` is λ̃), the factorised student's training loss."""
    lam = check_real("lam", lam, min=0.0)
    d = S.shape[0]
    S = S.to(torch.float64)
    with torch.no_grad():
        return float(_data(S, train, beta) + d * lam * torch.trace(S)) / d**2


def _prox(V: torch.Tensor, thr: float) -> torch.Tensor:
    w, U = torch.linalg.eigh((V + V.T) / 2)
    return (U * torch.clamp(w - thr, min=0.0)) @ U.T  # (d, d)


def nuclear_psd_erm(
    train: Dataset,
    *,
    lam: float,
    beta: float = 1.0,
    max_steps: int = 2000,
    rtol: float = 1e-9,
    patience: int = 10,
    rank_tol: float = 1e-3,
) -> ProximalResult:
    """Minimise ``F`` over ``S ⪰ 0`` from ``S = 0`` by FISTA with backtracking (module docstring).

    Stops when the relative change of ``F`` stays below ``rtol`` for ``patience`` steps, or at
    ``max_steps``. Runs in float64 on the device of ``train.X``.
    """
    lam = check_real("lam", lam, min=0.0)
    max_steps = check_int("max_steps", max_steps, min=1)
    rtol = check_real("rtol", rtol, min=0.0)
    patience = check_int("patience", patience, min=1)
    X = train.X.to(torch.float64)
    data = Dataset(X, train.y.to(X), train.y_clean.to(X), train.A.to(X), train.A_clean.to(X), train.task)
    d = X.shape[-1]
    pen = d * lam

    def f_and_grad(S: torch.Tensor) -> tuple[float, torch.Tensor]:
        S = S.detach().requires_grad_(True)
        val = _data(S, data, beta)
        (g,) = torch.autograd.grad(val, S)
        return float(val.detach()), (g + g.T) / 2

    S = torch.zeros(d, d, dtype=torch.float64, device=X.device)
    Y, t_mom, L = S, 1.0, 1.0
    prev, calm, steps, converged = math.inf, 0, 0, False
    for it in range(1, max_steps + 1):
        steps = it
        fY, gY = f_and_grad(Y)
        while True:  # backtracking: the quadratic upper bound must hold at the new point
            S_new = _prox(Y - gY / L, pen / L)
            D = S_new - Y
            with torch.no_grad():
                f_new = float(_data(S_new, data, beta))
            if f_new <= fY + float((gY * D).sum()) + L / 2 * float((D * D).sum()) + 1e-12 * abs(fY):
                break
            L *= 2.0
        t_next = (1 + math.sqrt(1 + 4 * t_mom * t_mom)) / 2
        Y = S_new + (t_mom - 1) / t_next * (S_new - S)
        S, t_mom = S_new, t_next
        L = max(L / 1.5, 1e-12)  # let the step grow again
        obj = f_new + pen * float(torch.trace(S))
        calm = calm + 1 if abs(prev - obj) <= rtol * abs(obj) else 0
        prev = obj
        if calm >= patience:
            converged = True
            break
    with torch.no_grad():
        dl = float(_data(S, data, beta))
        rank = int((torch.linalg.eigvalsh(S) > rank_tol).sum())
    return ProximalResult(S, (dl + pen * float(torch.trace(S))) / d**2, dl / d**2, steps, converged, rank)
