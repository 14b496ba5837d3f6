"""The output channel of the state evolution (THEORY.md C3): its expectations on fixed nodes.

The expectation over the output channel is a deterministic function of ``(q, m, Σ)``: fixed
scrambled-Sobol nodes (mapped to Gaussians) are drawn once per solve and reused by every iteration, so the
iteration can converge to tight tolerances. The proximal step ``argmin_h ‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖²`` is
solved for all nodes at once by Newton's method (Gauss–Newton where the Hessian is not positive definite)
with a per-node backtracking line search.
"""

from __future__ import annotations

import contextlib
import math

import torch

from attnlab.core.validation import check_int
from attnlab.highdim.setting import Setting

__all__ = ["OutputChannel", "flat_to_matrix", "flat_to_matrix_map"]

_DTYPE = torch.float64


@contextlib.contextmanager
def _one_thread():
    """Run small batched linear algebra on one thread (restored afterwards): thread start-up and
    contention dominate tensors of a few thousand 3×3 blocks."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def flat_to_matrix_map(T: int) -> torch.Tensor:
    """The linear map ``L`` (T², K) from flat coordinates to a symmetric matrix with diagonal × √2."""
    K = T * (T + 1) // 2
    L = torch.zeros(T * T, K, dtype=_DTYPE)
    k = 0
    for a in range(T):
        for b in range(a, T):
            if a == b:
                L[a * T + a, k] = math.sqrt(2.0)
            else:
                L[a * T + b, k] = 1.0
                L[b * T + a, k] = 1.0
            k += 1
    return L


def flat_to_matrix(v: torch.Tensor, T: int) -> torch.Tensor:
    """Flat coordinates ``(..., K)`` -> symmetric ``(..., T, T)`` matrices (diagonal multiplied by √2)."""
    L = flat_to_matrix_map(T).to(v)
    return (v @ L.T).reshape(*v.shape[:-1], T, T)


class OutputChannel:
    """The output part of the state evolution with fixed nodes (reused across iterations).

    Parameters
    ----------
    setting : Setting
    nodes : int
        Number of quasi-random nodes (a power of 2 is best for Sobol).
    seed : int
        Scrambling seed of the Sobol sequence.
    """

    def __init__(self, setting: Setting, nodes: int = 4096, seed: int = 0):
        self.s = setting
        nodes = check_int("nodes", nodes, min=16)
        T, K = setting.tokens, setting.K
        eng = torch.quasirandom.SobolEngine(3 * K, scramble=True, seed=seed)
        u = eng.draw(nodes, dtype=_DTYPE).clamp(1e-12, 1 - 1e-12)  # (N, 3K)
        g = math.sqrt(2.0) * torch.erfinv(2 * u - 1)  # (N, 3K) standard normals
        self.g1, self.g2, self.xi = g[:, :K], g[:, K : 2 * K], g[:, 2 * K :]  # (N, K) each
        self.L = flat_to_matrix_map(T)  # (T², K)
        self.T, self.K, self.N = T, K, nodes
        q0 = setting.q0
        self.zstar = math.sqrt(q0) * self.g1  # (N, K)
        noisy = self.zstar + math.sqrt(setting.noise / 2) * self.xi
        self.y = self._softmax(noisy, setting.beta0)  # (N, T²)
        self._h_prev: torch.Tensor | None = None

    def _softmax(self, v: torch.Tensor, beta: float) -> torch.Tensor:
        A = (v @ self.L.T).reshape(-1, self.T, self.T)  # (N, T, T)
        return torch.softmax(beta * A, dim=-1).reshape(-1, self.T * self.T)  # (N, T²)

    def z_of(self, q: float, m: float) -> torch.Tensor:
        q0 = self.s.q0
        resid = max(q - m * m / q0, 0.0)
        return (m / math.sqrt(q0)) * self.g1 + math.sqrt(resid) * self.g2  # (N, K)

    def _loss_grad(self, h, z, sigma: float, need_jac: bool = True, y: torch.Tensor | None = None):
        beta, T = self.s.beta, self.T
        y = self.y if y is None else y
        P = self._softmax(h, beta).reshape(-1, T, T)  # (N, T, T)
        r = y.reshape(-1, T, T) - P  # (N, T, T)
        val = ((h - z) ** 2).sum(-1) / (2 * sigma) + (r**2).sum((-1, -2))  # (N,)
        if not need_jac:
            return val, None, None
        # dP_ab/dA_ac = β P_ab (δ_bc − P_ac): per row a, a T×T block
        eye = torch.eye(T, dtype=_DTYPE)
        JA = beta * (P.unsqueeze(-1) * eye - P.unsqueeze(-1) * P.unsqueeze(-2))  # (N, T, T, T) [a, b, c]
        # flat Jacobian: dP_ab/dh_k = Σ_c JA[a,b,c] L[(a,c), k]
        Lr = self.L.reshape(T, T, self.K)  # (T, T, K) [a, c, k]
        Jh = torch.einsum("nabc,ack->nabk", JA, Lr).reshape(-1, T * T, self.K)  # (N, T², K)
        rf = r.reshape(-1, T * T)  # (N, T²)
        grad = (h - z) / sigma - 2 * torch.einsum("npk,np->nk", Jh, rf)  # (N, K)
        # exact Hessian: 2 JᵀJ − 2 Σ r_ab ∂²P_ab, with, per row a,
        # ∂²P_b/∂A_c∂A_e = β² [P_b (δ_be − P_e)(δ_bc − P_c) − P_b P_c (δ_ce − P_e)]
        D = eye - P.unsqueeze(-2)  # (N, a, b, c) = δ_bc − P_ac
        D = D.expand(-1, T, T, T)
        Pb = P.unsqueeze(-1).unsqueeze(-1)  # (N, a, b, 1, 1)
        t1 = Pb * D.unsqueeze(-1) * D.unsqueeze(-2)  # (N, a, b, c, e)
        Pc = P.unsqueeze(-2).unsqueeze(-1)  # (N, a, 1, c, 1)
        De = eye.unsqueeze(0).unsqueeze(0) - P.unsqueeze(-2).unsqueeze(-2)  # (N, a, 1, c, e) δ_ce − P_ae
        t2 = Pb * Pc * De  # (N, a, b, c, e)
        HA = beta**2 * torch.einsum("nab,nabce->nace", r, t1 - t2)  # (N, a, c, e)
        Hh = torch.einsum("nace,ack,aej->nkj", HA, Lr, Lr)  # (N, K, K)
        Hgn = torch.eye(self.K, dtype=_DTYPE) / sigma + 2 * Jh.transpose(1, 2) @ Jh  # (N, K, K)
        H = Hgn - 2 * Hh
        # fall back to Gauss–Newton where the exact Hessian is not positive definite
        _, info = torch.linalg.cholesky_ex(H)
        H = torch.where((info == 0).view(-1, 1, 1), H, Hgn)
        return val, grad, H

    def prox(self, z: torch.Tensor, sigma: float, tol: float = 1e-11, max_iter: int = 100):
        """``h = argmin ‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖²`` for every node; returns (h, value at h)."""
        h = z.clone()
        for _ in range(max_iter):
            val, grad, H = self._loss_grad(h, z, sigma)
            gnorm = grad.abs().amax(-1) * sigma  # (N,) scale-free
            if float(gnorm.max()) < tol:
                break
            step = -torch.linalg.solve(H, grad.unsqueeze(-1)).squeeze(-1)  # (N, K)
            t = torch.ones(h.shape[0], 1, dtype=_DTYPE)
            active = gnorm >= tol
            for _ in range(30):
                cand = h + t * step
                cval, _, _ = self._loss_grad(cand, z, sigma, need_jac=False)
                slope = (grad * step).sum(-1)  # (N,) predicted decrease (negative)
                # Armijo, or a full step whose predicted decrease is below rounding (quadratic regime)
                tiny = (-slope < 1e-13 * (1 + val.abs())) & (t.squeeze(-1) == 1)
                ok = (cval <= val + 1e-4 * t.squeeze(-1) * slope) | tiny | ~active
                if bool(ok.all()):
                    break
                t = torch.where(ok.unsqueeze(-1), t, t / 2)
            h = torch.where(active.unsqueeze(-1), h + t * step, h)
        val, _, _ = self._loss_grad(h, z, sigma, need_jac=False)
        return h, val

    def hats(self, q: float, m: float, sigma: float, alpha: float) -> tuple[float, float, float, float]:
        """``(q̂, m̂, Σ̂, E[M])`` from the output equations of THEORY.md C3."""
        q0 = self.s.q0
        z = self.z_of(q, m)
        h, M = self.prox(z, sigma)
        dz = h - z  # (N, K)
        C = q0 * q - m * m
        qh = 2 * alpha * float((dz**2).sum(-1).mean()) / sigma**2
        mh = 2 * alpha * float((dz * (q * self.zstar - m * z)).sum(-1).mean()) / (sigma * C)
        sh = -2 * alpha * float((dz * (q0 * z - m * self.zstar)).sum(-1).mean()) / (sigma * C)
        return qh, mh, sh, float(M.mean())

    def test_error(self, q: float, m: float) -> float:
        """``E‖σ_β0(z0) − σ_β(z)‖²`` with noisy ``z0`` (same nodes)."""
        z = self.z_of(q, m)
        return float(((self.y - self._softmax(z, self.s.beta)) ** 2).sum(-1).mean())

    def clean_test_error(self, q: float, m: float) -> float:
        """As :meth:`test_error` against noiseless labels ``σ_β0(z*)``."""
        z = self.z_of(q, m)
        y0 = self._softmax(self.zstar, self.s.beta0)
        return float(((y0 - self._softmax(z, self.s.beta)) ** 2).sum(-1).mean())
