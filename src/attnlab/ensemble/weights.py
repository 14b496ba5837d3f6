"""Head weights on the simplex (docs/ensemble.md A2, A6): uniform, geometric, Fibonacci, optimal, given.

Heads are assumed sorted by quality, best first. ``geometric``: ``α_h ∝ ρ^{h−1}``;
``fibonacci``: ``α_h ∝ F_{H−h+1}`` (front-greater, ``F_1 = F_2 = 1``); ``optimal``: the minimiser of
``αᵀ M α`` over the simplex for ``M_hh' = E[(f_h − f)(f_h' − f)]`` (a small QP);
``given``: any non-negative vector, normalised.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from attnlab.core.validation import check_choice, check_int, check_real

__all__ = ["SCHEMES", "fibonacci_numbers", "head_weights", "optimal_weights"]

SCHEMES = ("uniform", "geometric", "fibonacci", "optimal", "given")


def fibonacci_numbers(n: int) -> list[int]:
    """``[F_1, …, F_n]`` with ``F_1 = F_2 = 1``."""
    n = check_int("n", n, min=1)
    out = [1, 1]
    while len(out) < n:
        out.append(out[-1] + out[-2])
    return out[:n]


def _kkt_solve(M: np.ndarray, support: list[int]) -> np.ndarray | None:
    """Minimiser of αᵀMα on {Σα = 1, α_i = 0 off support} if it is interior; else None."""
    S = np.asarray(support)
    k = len(S)
    A = np.zeros((k + 1, k + 1))
    A[:k, :k] = 2 * M[np.ix_(S, S)]
    A[:k, k] = -1.0
    A[k, :k] = 1.0
    rhs = np.zeros(k + 1)
    rhs[k] = 1.0
    try:
        sol = np.linalg.solve(A, rhs)
    except np.linalg.LinAlgError:
        sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
    a = np.zeros(M.shape[0])
    a[S] = sol[:k]
    if (a < -1e-12).any():
        return None
    return np.clip(a, 0.0, None) / np.clip(a, 0.0, None).sum()


def optimal_weights(M: torch.Tensor | np.ndarray) -> torch.Tensor:
    """``argmin_α αᵀ M α`` subject to ``α >= 0, Σ α = 1``.

    Parameters
    ----------
    M : array, shape (H, H)
        Symmetric positive semi-definite (e.g. the heads' error cross-moments).

    Returns
    -------
    Tensor, shape (H,), float64

    Notes
    -----
    Solved by SLSQP from uniform weights, then polished: on the support found, the equality-
    constrained KKT system ``2 M_SS α_S = λ 1, Σ α_S = 1`` is solved exactly and kept when its
    solution is feasible and no worse. For ``H <= 10`` every support is also tried (exact).
    Optimality: ``(Mα)_h >= αᵀMα`` for every h, with equality on the support.
    """
    from scipy.optimize import minimize

    Mn = (M.detach().cpu().numpy() if isinstance(M, torch.Tensor) else np.asarray(M)).astype(np.float64)
    if Mn.ndim != 2 or Mn.shape[0] != Mn.shape[1] or Mn.shape[0] == 0:
        raise ValueError(f"M: expected a square (H, H) matrix, got shape {Mn.shape}")
    if not np.isfinite(Mn).all():
        raise ValueError("M: expected finite values, got nan or inf")
    Mn = 0.5 * (Mn + Mn.T)
    H = Mn.shape[0]
    sc = max(float(np.abs(Mn).max()), 1e-300)
    Ms = Mn / sc  # scale-free problem, same minimiser
    res = minimize(
        lambda a: a @ Ms @ a,
        np.full(H, 1.0 / H),
        jac=lambda a: 2 * Ms @ a,
        bounds=[(0.0, 1.0)] * H,
        constraints=[{"type": "eq", "fun": lambda a: a.sum() - 1.0, "jac": lambda a: np.ones(H)}],
        method="SLSQP",
        options={"ftol": 1e-16, "maxiter": 500},
    )
    best = np.clip(res.x, 0.0, None)
    best /= best.sum()
    best_val = best @ Ms @ best
    candidates = [[i for i in range(H) if best[i] > 1e-9]]
    if H <= 10:
        candidates += [list(S) for r in range(1, H + 1) for S in itertools.combinations(range(H), r)]
    for S in candidates:
        b = _kkt_solve(Ms, S)
        if b is not None and b @ Ms @ b <= best_val + 1e-15:
            best, best_val = b, b @ Ms @ b
    return torch.from_numpy(best)


def head_weights(
    scheme: str,
    H: int,
    rho: float = 0.5,
    given: torch.Tensor | np.ndarray | list[float] | None = None,
    M: torch.Tensor | np.ndarray | None = None,
) -> torch.Tensor:
    """Weights ``α`` on the simplex for ``H`` heads sorted best first.

    Parameters
    ----------
    scheme : {"uniform", "geometric", "fibonacci", "optimal", "given"}
    H : int
    rho : float
        Ratio of the geometric scheme, in (0, 1].
    given : array of shape (H,), optional
        Non-negative weights for ``"given"`` (normalised to sum one).
    M : array of shape (H, H), optional
        Error cross-moments for ``"optimal"``.

    Returns
    -------
    Tensor, shape (H,), float64, non-negative, summing to one.
    """
    check_choice("scheme", scheme, SCHEMES)
    H = check_int("H", H, min=1)
    if scheme == "uniform":
        a = torch.ones(H, dtype=torch.float64)
    elif scheme == "geometric":
        rho = check_real("rho", rho, min=0.0, max=1.0, min_open=True)
        a = torch.tensor([rho**h for h in range(H)], dtype=torch.float64)
    elif scheme == "fibonacci":
        a = torch.tensor(fibonacci_numbers(H)[::-1], dtype=torch.float64)
    elif scheme == "optimal":
        if M is None:
            raise ValueError("M: expected the (H, H) error cross-moment matrix for optimal weights, got None")
        a = optimal_weights(M)
        if a.shape[0] != H:
            raise ValueError(f"M: expected shape ({H}, {H}), got {tuple(a.shape) * 2}")
    else:
        if given is None:
            raise ValueError("given: expected H non-negative weights, got None")
        a = torch.as_tensor(np.asarray(given, dtype=np.float64))
        if a.shape != (H,) or bool((a < 0).any()) or not bool(torch.isfinite(a).all()) or float(a.sum()) <= 0:
            raise ValueError(
                f"given: expected {H} finite non-negative weights with a positive sum, got {given!r}"
            )
    return a / a.sum()
