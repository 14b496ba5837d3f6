"""The training objective of the ERM (docs/highdim.md C2): the empirical risk and its gradient, by hand.

:func:`data_loss_grad` gives the squared-error data loss and its gradient in ``S`` for every task and token
count with two matrix products of size n(T − 1) × d × d per evaluation (the softmax reads only differences
of logits within a row), no autograd graph. :class:`Problem` adds the penalty and the chain rule through
the factor ``W`` (or the Frobenius baseline); :class:`PairProblem` is the factorised seq2lab student at
T = 2 in closed form, what Adam evaluates there. The optimisers live in :mod:`attnlab.highdim.train`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["data_loss_grad", "token_differences", "Problem", "PairProblem"]


def token_differences(X: torch.Tensor) -> torch.Tensor:
    """``U`` (n, T − 1, d): each sequence's tokens ``x_b − x_1`` for ``b = 2..T`` (what the softmax sees)."""
    return X[:, 1:] - X[:, :1]


def _row_products(X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """``(n, T)``: ``Σ_j X[μ, a, j] K[μ, j]``, every sample's tokens against its own row of ``K`` (n, d).

    On the CPU by numpy's ``einsum`` on the same memory (at n = 20000, d = 200, T = 2, one thread: 3–4 ms
    against 9–13 ms for torch's ``bmm`` of such thin matrices; the two-index form ``naj,nj->na`` a further
    10–20% below ``naj,nbj->nab`` with a unit ``b``, the same sums), elsewhere ``bmm``.
    """
    if X.device.type == "cpu":
        return torch.from_numpy(np.einsum("naj,nj->na", X.numpy(), K.numpy()))
    return torch.bmm(X, K.unsqueeze(2)).squeeze(2)


def _matmul(A: torch.Tensor, B: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``A @ B`` (into ``out`` when given): on the CPU by numpy's ``matmul`` on the same memory, elsewhere
    ``torch.mm``.

    Why numpy on the CPU: its OpenBLAS runs the two ``n × d × d`` products of :class:`PairProblem` faster
    than torch's MKL on one thread of the AMD EPYC the project is measured on (n = d²/2, medians of five
    interleaved calls of both products: float32 45.0 against 51.6 ms at d = 200, 3.9 against 3.7 ms at
    d = 100; float64 97.8 against 125.7 ms at d = 200, 7.5 against 10.7 ms at d = 100); a whole Adam step at
    d = 200 in float32 51.2 against 57.0 ms (medians of five interleaved blocks of ten steps). The sums are
    the same up to the order in which the BLAS adds them (last-bit differences).
    """
    if A.device.type == "cpu":
        if out is None:
            return torch.from_numpy(np.matmul(A.numpy(), B.numpy()))
        np.matmul(A.numpy(), B.numpy(), out=out.numpy())
        return out
    return torch.mm(A, B, out=out) if out is not None else torch.mm(A, B)


def _combine_tokens(C: torch.Tensor, X: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out[μ, b] = Σ_a C[μ, a, b] X[μ, a]``: ``C`` (n, T, T − 1), ``X`` (n, T, d), ``out`` (n, T − 1, d).

    On the CPU by numpy's stacked ``matmul`` of ``C[μ]ᵀ`` (T − 1 × T) and ``X[μ]`` (T × d), into ``out``: one
    pass over the tokens, at n = 20000, d = 200, T = 2 on one thread 4.5–5.0 ms against 6.0–6.4 ms for
    ``einsum`` (``nab,naj->nbj``; the same two-term sums, which may round differently in the last bit where
    the product is fused into the addition); elsewhere a loop of ``addcmul`` over the T tokens.
    """
    if X.device.type == "cpu":
        np.matmul(C.numpy().transpose(0, 2, 1), X.numpy(), out=out.numpy())
        return out
    torch.mul(C[:, 0, :, None], X[:, 0, None, :], out=out)
    for a in range(1, X.shape[1]):
        out.addcmul_(C[:, a, :, None], X[:, a, None, :])
    return out


def data_loss_grad(
    S: torch.Tensor,
    X: torch.Tensor,
    y: torch.Tensor,
    beta: float,
    task: str,
    grad: bool = True,
    work: torch.Tensor | None = None,
    diffs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The data loss ``L(S) = Σ_μ ‖y_μ − ŷ_μ(S)‖²`` (seq2seq: divided by d) and its gradient in S, by hand.

    ``S`` (d, d) symmetric, ``X`` (n, T, d) and ``y`` in ``S``'s dtype; ``work``: optional scratch of
    ``X``'s shape and dtype, reused across calls (the (n, T, d) intermediates are written there instead of
    freshly allocated: at n = 20000, d = 200 that spares 64 MB of allocation and page faults per call);
    ``diffs``: optional :func:`token_differences` of ``X``, computed once by a caller that evaluates often.
    Returns ``(L, G)``: ``L`` a float64 scalar tensor (the n terms are summed in float64), ``G`` (d, d)
    symmetric in ``S``'s dtype (None when ``grad`` is False): the derivative along symmetric directions,
    ``dL = ⟨G, dS⟩``.

    Chain rule: ``A = rowsoftmax(β Z)``; ``∂L/∂A = 2 R`` (seq2lab: ``R = A − y``; seq2seq:
    ``R = (AX − y) Xᵀ/d``); through the softmax, ``∂L/∂Z = β A ⊙ (2R − rowsum(2R ⊙ A))``; through the
    logits ``Z = (X S Xᵀ − Tr S · I)/√d``, ``G = Σ_μ [X_μᵀ D_μ X_μ − Tr D_μ · I]/√d`` with ``D`` the
    symmetric part of ``∂L/∂Z``.

    Cost: a row softmax is unchanged by a shift of its row, so only ``Z_ab − Z_a1 = (x_aᵀ S u_b − Tr S ·
    (δ_ab − δ_a1))/√d`` with ``u_b = x_b − x_1`` (``b ≥ 2``) is needed: ``S`` applied to the ``T − 1``
    differences, not to the ``T`` tokens. Likewise every row of ``∂L/∂Z`` sums to zero (the softmax's
    Jacobian), so ``X_μᵀ D_μ X_μ = Σ_{b≥2} (X_μᵀ D_μ[:, b]) u_bᵀ``. The two large products are thus
    ``n(T − 1) × d × d`` instead of ``nT × d × d``: half the work at ``T = 2``.
    """
    n, T, d = X.shape
    if work is None:
        work = torch.empty_like(X)
    U = token_differences(X) if diffs is None else diffs  # (n, T-1, d)
    m = n * (T - 1)
    Uf = U.reshape(m, d)
    flat = work.view(-1)
    scale = beta / math.sqrt(d)
    K = torch.mm(Uf, S, out=flat[: m * d].view(m, d)).view(n, T - 1, d)  # rows (S u_b)ᵀ, S symmetric
    Zt = torch.bmm(X, K.transpose(1, 2))  # (n, T, T-1): x_aᵀ S u_b
    tr = torch.trace(S)
    Zt[:, 0, :] += tr  # a = 1: −Tr S (δ_1b − δ_11) = +Tr S
    Zt[:, 1:, :].diagonal(dim1=1, dim2=2).sub_(tr)  # a = b ≥ 2: −Tr S
    Zt.mul_(scale)  # β (Z_ab − Z_a1), b ≥ 2
    if T == 2:  # the softmax of (0, z) is (σ(−z), σ(z))
        A = torch.cat([torch.sigmoid(-Zt), torch.sigmoid(Zt)], dim=-1)  # (n, 2, 2)
    else:
        A = torch.softmax(torch.cat([torch.zeros_like(Zt[:, :, :1]), Zt], dim=-1), dim=-1)  # (n, T, T)
    if task == "seq2seq":
        R = torch.bmm(A, X, out=work).sub_(y)  # (n, T, d)
        dA = torch.bmm(R, X.transpose(1, 2)).mul_(2.0 / d) if grad else None  # (n, T, T)
        loss = R.square_().sum(dtype=torch.float64) / d
    else:
        R = A - y  # (n, T, T)
        loss = R.square().sum(dtype=torch.float64)
        dA = R.mul_(2.0) if grad else None
    if not grad:
        return loss, None
    D = A * (dA - (dA * A).sum(-1, keepdim=True))  # ∂L/∂(βZ), (n, T, T), rows summing to zero
    trD = D.diagonal(dim1=1, dim2=2).sum()
    # V_μ = (X_μᵀ D_μ[:, 2:])ᵀ (n, T-1, d), summed over the T tokens (T is small; n, d run vectorised);
    # then Σ_μ X_μᵀ D_μ X_μ = Σ_μ V_μᵀ U_μ, one (d × m) by (m × d) product
    V = flat[: m * d].view(n, T - 1, d)
    torch.mul(D[:, 0, 1:, None], X[:, 0, None, :], out=V)
    for a in range(1, T):
        V.addcmul_(D[:, a, 1:, None], X[:, a, None, :])
    M = V.view(m, d).T @ Uf  # (d, d)
    G = (M + M.T).mul_(scale / 2)  # symmetric part, times β/√d
    G.diagonal().sub_(trD * scale)
    return loss, G


class Problem:
    """The objective ``data loss + penalty`` as a function of the float64 parameter (factor W, or B for the
    unfactorised student), with its gradient; data in the compute dtype."""

    def __init__(
        self, X: torch.Tensor, y: torch.Tensor, task: str, beta: float, factorised: bool, p: int, reg: float
    ):
        self.X, self.y, self.task, self.beta = X, y, task, beta
        self.work = torch.empty_like(X)  # scratch of data_loss_grad, reused by every evaluation
        self.diffs = token_differences(X).contiguous()  # the tokens' differences, drawn once
        self.factorised, self.reg = factorised, reg
        d = X.shape[-1]
        self.d = d
        self.c = math.sqrt(p * d) if factorised else 2 * math.sqrt(d)  # S = WᵀW/c or (B + Bᵀ)/c

    def S(self, P: torch.Tensor) -> torch.Tensor:
        return P.T @ P / self.c if self.factorised else (P + P.T) / self.c

    def penalty(self, P: torch.Tensor) -> float:
        if self.factorised:
            return self.reg * float(P.square().sum())  # λ‖W‖²
        return self.d * self.reg * float(self.S(P).square().sum())  # d λ_F ‖S‖²

    def __call__(self, P: torch.Tensor, grad: bool = True) -> tuple[float, torch.Tensor | None]:
        """(data loss + penalty, its gradient in P (float64) or None).

        The factorised student's ``S = WᵀW/c`` and the chain ``2 W G/c`` are formed in the compute dtype
        (in float32: from ``W`` rounded to float32, the same rounding as ``S`` rounded after a float64
        product, to float32 resolution); the penalty and its gradient stay in ``P``'s float64."""
        Pc = P.to(self.X.dtype) if self.factorised else P
        S = self.S(Pc)
        loss, G = data_loss_grad(
            S.to(self.X.dtype), self.X, self.y, self.beta, self.task, grad, self.work, self.diffs
        )
        value = float(loss) + self.penalty(P)
        if not grad:
            return value, None
        if self.factorised:  # dS = (dWᵀ W + Wᵀ dW)/c, G symmetric: ∂/∂W = 2 W G / c; penalty 2λW
            return value, (Pc @ G).to(P.dtype).mul_(2.0 / self.c).add_(P, alpha=2.0 * self.reg)
        G = G.to(P.dtype)
        # dS = (dB + dBᵀ)/c: ∂/∂B = 2G/c; penalty d λ_F ‖S‖²: ∂/∂S = 2 d λ_F S
        return value, (2.0 / self.c) * (G + (2.0 * self.d * self.reg) * S)


class PairProblem(Problem):
    """The factorised seq2lab student at ``T = 2`` in closed form (what Adam evaluates there).

    Per sample ``u = x₂ − x₁``; each row ``r`` of the attention is ``(1 − σ_r, σ_r)`` with
    ``z₁ = s (x₁ᵀ S u + Tr S)``, ``z₂ = s (x₂ᵀ S u − Tr S)``, ``s = β/√d``, ``σ_r = σ(z_r)``. With the label
    row ``(y_r1, y_r2)``, ``w_r = 1 + y_r2 − y_r1`` and ``ε_r = 1 − y_r1 − y_r2`` (zero for softmax labels
    up to rounding), the row's loss ``(1 − σ_r − y_r1)² + (σ_r − y_r2)²`` is ``½ (2σ_r − w_r)² + ½ ε_r²``, so

        ``L = ½ Σ (2σ − w)² + ½ Σ ε²``,  ``∂L/∂z_r = 2 (2σ_r − w_r) σ_r (1 − σ_r) =: g_r``,

    and in symmetric directions ``∂L/∂S = s [sym(Σ_μ (g₁ x₁ + g₂ x₂) uᵀ) + Σ_μ (g₁ − g₂) I]``, chained to
    the factor as ``∂/∂W = 2 W (∂L/∂S)/c``. Per evaluation: the two products ``U S`` and ``Vᵀ U``
    (``n × d × d`` each, ``V`` the rows ``g₁ x₁ + g₂ x₂``), two ``(p × d × d)`` ones for ``S`` and the chain,
    and elementwise work on ``n × 2`` numbers; ``w`` and ``Σ ε²`` are read from the labels once. Held against
    autograd on the same objective in tests/highdim/test_train_fast.py."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, beta: float, p: int, reg: float):
        super().__init__(X, y, "seq2lab", beta, True, p, reg)
        n, _, d = X.shape
        self.X = X.contiguous()
        self.U = self.diffs.view(n, d)
        # Uᵀ stored contiguous: Uᵀ V is the transpose of Vᵀ U, the same sums, and a single-thread product
        # with a contiguous left factor ran 5–10% faster than with the transposed one (MKL, n = 5000,
        # d = 100); with OpenBLAS (_matmul) 19.2 against 20.3 ms at d = 200
        self.Ut = self.U.T.contiguous()
        self.buf = self.work.view(-1)[: n * d].view(n, d)  # U S, then the rows of V
        self.scale = beta / math.sqrt(d)
        self.w = (1.0 + y[:, :, 1] - y[:, :, 0]).contiguous()  # (n, 2): rows r = 1, 2
        eps = 1.0 - y[:, :, 0].to(torch.float64) - y[:, :, 1].to(torch.float64)
        self.const = 0.5 * float(eps.square().sum())
        self.sign = torch.tensor([1.0, -1.0], dtype=X.dtype, device=X.device)

    def __call__(self, P: torch.Tensor, grad: bool = True) -> tuple[float, torch.Tensor | None]:
        n, _, d = self.X.shape
        Pc = P.to(self.X.dtype)
        S = torch.mm(Pc.T, Pc).div_(self.c)
        K = _matmul(self.U, S, out=self.buf)
        z = _row_products(self.X, K)  # x_aᵀ S u, (n, 2)
        z.add_(self.sign, alpha=float(torch.trace(S))).mul_(self.scale)
        sg = z.sigmoid_()
        e = torch.mul(sg, 2.0).sub_(self.w)  # 2σ − w
        value = 0.5 * float(torch.sum(e * e, dtype=torch.float64)) + self.const + self.penalty(P)
        if not grad:
            return value, None
        g = torch.addcmul(sg, sg, sg, value=-1.0).mul_(e).mul_(2.0 * self.scale)  # s ∂L/∂z, (n, 2)
        diag = float(g[:, 0].sum() - g[:, 1].sum())
        V = _combine_tokens(g.view(n, 2, 1), self.X, K.view(n, 1, d)).view(n, d)  # K is spent: V in its place
        M = _matmul(self.Ut, V)  # (Vᵀ U)ᵀ
        G = (M + M.T).mul_(0.5)
        G.diagonal().add_(diag)
        return value, (Pc @ G).to(P.dtype).mul_(2.0 / self.c).add_(P, alpha=2.0 * self.reg)
