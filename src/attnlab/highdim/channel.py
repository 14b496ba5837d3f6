"""The output channel of the state evolution (docs/highdim.md C3): its expectations on fixed nodes.

The expectation over the output channel is a deterministic function of ``(q, m, Σ)``: fixed
scrambled-Sobol nodes (mapped to Gaussians) are drawn once per solve and reused by every iteration, so the
iteration can converge to tight tolerances. The proximal step ``argmin_h ‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖²`` is
solved for all nodes at once by Newton's method (Gauss–Newton where the Hessian is not positive definite)
with a per-node backtracking line search.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch

from attnlab.core.validation import check_int
from attnlab.highdim.channel_nodes import check_grid, hermite, label_nodes, layout
from attnlab.highdim.channel_rows import combine_two, rowdot, terms_two
from attnlab.highdim.prox_two import newton_two, one_minimum
from attnlab.highdim.setting import Setting

__all__ = [
    "OutputChannel",
    "flat_to_matrix",
    "flat_to_matrix_map",
    "one_thread",
]

_DTYPE = torch.float64


@contextlib.contextmanager
def one_thread():
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


def mirror_basis(basis: torch.Tensor) -> torch.Tensor:
    """An orthonormal basis (K, 2) of the row space of the logit differences at T = 2 along the mirror lines
    of the output channel's symmetries: its first column is antisymmetric under the exchange of the two
    tokens (flat coordinates ``(S00, S01, S11) → (S11, S01, S00)``), its second symmetric. The exchange
    maps row 0's logit difference to minus row 1's, so it maps the row space to itself; there it is the
    reflection that flips the first coordinate, and ``−1`` (every logit difference's sign) flips both."""
    P = basis @ basis.T  # (K, K) projector onto the row space
    a = P @ torch.tensor([1.0, 0.0, -1.0], dtype=basis.dtype)  # the token exchange's −1 eigenvector
    a = a / a.norm()
    b = basis[:, 0] - (basis[:, 0] @ a) * a  # the rest of the row space
    if b.norm() < 0.5:
        b = basis[:, 1] - (basis[:, 1] @ a) * a
    return torch.stack([a, b / b.norm()], 1)


def _half_normal(u: torch.Tensor) -> torch.Tensor:
    """The half-normal quantile ``Φ⁻¹((1 + u)/2)`` of uniforms ``u`` (monotone, so a scrambled Sobol set of
    the unit square stays one of the quadrant)."""
    return math.sqrt(2.0) * torch.erfinv(u)


class OutputChannel:
    """The output part of the state evolution with fixed nodes (reused across iterations).

    Parameters
    ----------
    setting : Setting
    nodes : int
        Number of nodes (a power of 2 is best for Sobol; the product rule uses the largest power of 2 of label
        nodes, at least 2, whose ``n²`` nodes each fit in ``nodes``, ``n`` = ``grid``).
    seed : int
        Scrambling seed of the Sobol sequence.
    rule : "auto", "sobol" or "product"
        ``"sobol"``: every Gaussian coordinate on scrambled Sobol nodes, equal weights. ``"product"`` (T = 2
        only): the label coordinates ``v`` on scrambled Sobol nodes and the coordinates ``w`` of ``z``
        independent of the labels on an ``n × n`` Gauss–Hermite grid for each of them, the nodes weighted
        (``weights``). The integrand is rough in ``v`` and smooth in ``w`` (docs/se-accuracy.md),
        so the product rule's error is about a third to a quarter of Sobol's at the same number of nodes.
        ``"auto"`` (default): the product rule at T = 2 from 9216 nodes and 256 label nodes on (9216
        nodes at λ̃ ≥ 1e-3, 36864 below), Sobol otherwise.
    grid : int or None
        The product rule's ``n`` (2 to 64; None: :func:`~attnlab.highdim.channel_nodes.w_nodes`), e.g.
        :func:`~attnlab.highdim.channel_nodes.target_grid`'s finer grid. ``"auto"`` takes the product rule
        from 256 label nodes of it on.
    fold : bool
        T = 2 only. Draw the label coordinates ``v`` in one quadrant of the output channel's symmetries and
        weight them as the whole plane (docs/se-accuracy.md, "Folded label nodes"): the integrand is
        invariant under ``(v, w) → (−v, −w)`` (every logit difference's sign) and under the exchange of the
        two tokens, a reflection of the row space, so its expectation over ``w`` is the same at the four
        images of ``v``. The label nodes are then scrambled Sobol points of that quadrant (half-normal
        coordinates on a basis along the two mirror lines, the grid in ``w`` on the same basis so that it is
        itself symmetric): the same expectation, about a third of the variance at 2048 label nodes.
        False (the default): the whole plane.
    """

    def __init__(
        self,
        setting: Setting,
        nodes: int = 4096,
        seed: int = 0,
        rule: str = "auto",
        grid: int | None = None,
        fold: bool = False,
    ):
        self.s = setting
        nodes = check_int("nodes", nodes, min=16)
        if rule not in ("auto", "sobol", "product"):
            raise ValueError(f"rule: expected 'auto', 'sobol' or 'product', got {rule!r}")
        if rule == "product" and setting.tokens != 2:
            raise ValueError(f"rule: 'product' needs tokens = 2, got tokens = {setting.tokens}")
        if not isinstance(fold, bool):
            raise ValueError(f"fold: expected True or False, got {fold!r}")
        if fold and setting.tokens != 2:
            raise ValueError(f"fold: True needs tokens = 2, got tokens = {setting.tokens}")
        self.fold = fold
        nw = check_grid(grid, setting)
        self.rule = rule = layout(setting, nodes, rule, nw)[0]
        self.grid = nw if rule == "product" else None  # the grid in w of the product rule
        T, K = setting.tokens, setting.K
        self.L = flat_to_matrix_map(T)  # (T², K)
        self._Lrows = self.L.reshape(T, T, K)  # (T, T, K) [row a, column c, k]
        self._eye = torch.eye(K, dtype=_DTYPE)
        self.T, self.K, self.N = T, K, nodes
        # Logit differences within a row fix the softmax: C h (T(T−1) rows: column c minus column 0 of each
        # row) are the logit differences of h. Everything the output equations average depends on z, the
        # noisy teacher logits ζ and z* only through their components in the row space of C (module
        # docstring), so the nodes live there: an orthonormal basis B (K, r) of it.
        Lr = self._Lrows
        C = torch.cat([Lr[a, 1:] - Lr[a, :1] for a in range(T)])  # (T(T−1), K)
        _, sv, Vh = torch.linalg.svd(C, full_matrices=False)
        basis = Vh[sv > 1e-10 * sv[0]].T  # (K, r)
        self.rank = r = basis.shape[1]
        self.basis = basis
        self._proj = basis @ basis.T  # (K, K) projector onto the row space of C
        # the basis the label nodes (and the product rule's grid in w) are laid on: folded, the two mirror
        # lines of the channel's symmetries (:func:`mirror_basis`), else the basis of the row space
        vb = mirror_basis(basis) if fold else basis
        # v: ζ/σ_ζ; w: the part of z independent of ζ, per unit; u: the part of z* independent of (ζ, z),
        # used only by :meth:`clean_test_error` (the output equations take its conditional mean, 0)
        self.weights: torch.Tensor | None = None  # (N,) summing to 1; None: equal weights
        if rule == "sobol":
            eng = torch.quasirandom.SobolEngine(3 * r, scramble=True, seed=seed)
            u = eng.draw(nodes, dtype=_DTYPE).clamp(1e-12, 1 - 1e-12)  # (N, 3r)
            g = math.sqrt(2.0) * torch.erfinv(2 * u - 1)  # (N, 3r) standard normals
            self.v, self.w, self.u = (g[:, i * r : (i + 1) * r] @ basis.T for i in range(3))  # (N, K) each
            if fold:
                self.v = _half_normal(u[:, :r]) @ vb.T
        else:
            nv = label_nodes(nodes // nw**2)
            eng = torch.quasirandom.SobolEngine(2 * r, scramble=True, seed=seed)
            u = eng.draw(nv, dtype=_DTYPE).clamp(1e-12, 1 - 1e-12)  # (nv, 2r): v and u
            g = math.sqrt(2.0) * torch.erfinv(2 * u - 1)
            if fold:
                g[:, :r] = _half_normal(u[:, :r])
            x, wx = hermite(nw)
            gw = torch.stack(torch.meshgrid(x, x, indexing="ij"), -1).reshape(-1, 2)  # (n², 2)
            ww = (wx[:, None] * wx[None, :]).reshape(-1)  # (n²,)
            k = gw.shape[0]
            # node i·n² + j: label node i, Gauss–Hermite node j (label-major, so a prefix is a rule)
            self.v = (g[:, :r] @ vb.T).repeat_interleave(k, 0)  # (N, K)
            self.u = (g[:, r:] @ basis.T).repeat_interleave(k, 0)
            self.w = (gw @ vb.T).repeat(nv, 1)
            self._wgh = ww
            self.weights = ww.repeat(nv) / nv
            nodes = nv * k
            self.N = nodes
        q0 = setting.q0
        self._c2 = setting.noise / 2  # variance of the label noise on each teacher logit
        self._sn = math.sqrt(q0 + self._c2)  # standard deviation of a noisy teacher logit
        noisy = self._sn * self.v  # (N, K)
        self.y = self._softmax(noisy, setting.beta0)  # (N, T²)
        # the labels' logit differences are (β0/β) C ζ: the projection of z onto {C h = (β0/β) C ζ} (least
        # squares when T(T−1) > K) interpolates the label wherever it can: the second start of the proximal
        # step (see :meth:`prox_best`)
        self._target = (setting.beta0 / setting.beta) * noisy  # (N, K)
        if T == 2:
            # two rows, one logit difference each: e = P h (P: (2, K), row a's column 1 minus column 0).
            # On h − z in the row space, h − z = B t with PB (2, 2) invertible, so
            # ‖h − z‖² = (e − Pz)ᵀ G (e − Pz) with G = (PB PBᵀ)⁻¹ = (P Pᵀ)⁻¹ (B Bᵀ projects onto the
            # row space of P): :meth:`_prox_two`
            P = C  # (2, K): C's rows are exactly the two rows' logit differences at T = 2
            self._P = P
            self._PBinv = torch.linalg.inv(P @ basis)  # (2, 2): t = PB⁻¹ (e − Pz)
            G = torch.linalg.inv(P @ P.T)
            self._G = (float(G[0, 0]), float(G[0, 1]), float(G[1, 1]))

    def _coefficients(self, q: float, m: float) -> tuple[float, float, float, float]:
        """``z = a_v v + s w`` and ``E[z* | ζ, z] = b_v v + b_w w`` at ``(q, m)``: (a_v, s, b_v, b_w).

        Per flat coordinate ``(z*, z, ζ)`` is Gaussian with ``Var z* = Q0``, ``Var z = q``,
        ``Cov(z*, z) = m``, ``ζ = z* + c ξ`` (``c² = Δ/2``): with ``z = a g1 + b g2``, ``a = m/√Q0``,
        ``b² = q − m²/Q0`` and
        ``σ_ζ² = Q0 + c²``, ``z = (a √Q0/σ_ζ) v + s w`` with ``s² = a² c²/σ_ζ² + b²`` and
        ``E[z* | v, w] = (Q0/σ_ζ) v + (a √Q0 c²/(σ_ζ² s)) w``."""
        q0, c2, sn = self.s.q0, self._c2, self._sn
        a = m / math.sqrt(q0)
        b2 = max(q - m * m / q0, 0.0)
        s = math.sqrt(a * a * c2 / sn**2 + b2)
        bw = a * math.sqrt(q0) * c2 / (sn**2 * s) if s > 0 else 0.0
        return a * math.sqrt(q0) / sn, s, q0 / sn, bw

    def z_of(self, q: float, m: float) -> torch.Tensor:
        """The student's logits ``z`` at every node for the overlaps ``(q, m)``, (N, K)."""
        av, s, _, _ = self._coefficients(q, m)
        if self.T != 2:
            return av * self.v + s * self.w  # (N, K)
        return combine_two(av, self.v, s, self.w)  # the same sum, on cache-sized row blocks

    def zstar_mean(self, q: float, m: float, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``E[z* | ζ, z]`` at every node (or ``rows``) for the overlaps ``(q, m)``, (n, K)."""
        _, _, bv, bw = self._coefficients(q, m)
        v, w = (self.v, self.w) if rows is None else (self.v[rows], self.w[rows])
        return bv * v + bw * w

    def head(self, n: int) -> OutputChannel:
        """The channel on the first ``n`` nodes (a prefix of a scrambled Sobol sequence, itself a balanced
        quasi-random set when ``n`` is a power of 2): the same as ``OutputChannel(setting, n, seed)``."""
        n = check_int("n", n, min=16, max=self.N)
        out = object.__new__(OutputChannel)
        out.__dict__.update(self.__dict__)
        if self.weights is not None:  # whole label nodes (n² nodes each), at least 2
            k = self._wgh.shape[0]
            nv = label_nodes(n // k)
            n = nv * k
            out.weights = self._wgh.repeat(nv) / nv
        for key in ("v", "w", "u", "y", "_target"):
            setattr(out, key, getattr(self, key)[:n])
        out.N = n
        return out

    def average(self, t: torch.Tensor) -> torch.Tensor:
        """The rule's estimate of the expectation of per-node values ``t`` (N, ...): their weighted mean."""
        if self.weights is None:
            return t.mean(0)
        return torch.tensordot(self.weights, t, dims=([0], [0]))

    def _softmax(self, v: torch.Tensor, beta: float) -> torch.Tensor:
        A = (v @ self.L.T).reshape(-1, self.T, self.T)  # (N, T, T)
        E = torch.exp(beta * (A - A.amax(-1, keepdim=True)))  # (N, T, T)
        return (E / E.sum(-1, keepdim=True)).reshape(-1, self.T * self.T)  # (N, T²)

    def _loss_grad(self, h, z, sigma: float, need_jac: bool = True, y: torch.Tensor | None = None):
        beta, T = self.s.beta, self.T
        y = self.y if y is None else y
        P = self._softmax(h, beta).reshape(-1, T, T)  # (N, T, T)
        r = y.reshape(-1, T, T) - P  # (N, T, T)
        val = ((h - z) ** 2).sum(-1) / (2 * sigma) + (r**2).sum((-1, -2))  # (N,)
        if not need_jac:
            return val, None, None
        # Per row a of the logits, with p = P_a, r = r_a and r̄ = p·r: the softmax Jacobian is
        # J = β (diag p − p pᵀ) (symmetric), the gradient of ‖r‖² is −2 J r = −2β p ⊙ (r − r̄), and the
        # Hessian of p·r at fixed r is β² (diag u − u pᵀ − p uᵀ) with u = p ⊙ (r − r̄); so the Hessian of
        # ‖y − p‖² in the logits of row a is 2 J² − 2 β² (diag u − u pᵀ − p uᵀ). The logits are A = L h,
        # block-diagonal over rows: gradient Lᵀ ∇_A and Hessian Lᵀ blockdiag(·) L.
        u = P * (r - (r * P).sum(-1, keepdim=True))  # (N, T, T)
        grad = (h - z) / sigma - 2 * beta * u.reshape(-1, T * T) @ self.L  # (N, K)
        JA = beta * (torch.diag_embed(P) - P.unsqueeze(-1) * P.unsqueeze(-2))  # (N, T, T, T) [a, b, c]
        up = u.unsqueeze(-1) * P.unsqueeze(-2)  # (N, T, T, T) u_b p_c
        Hf = beta**2 * (torch.diag_embed(u) - up - up.transpose(-1, -2))  # (N, T, T, T)
        Lr = self._Lrows  # (T, T, K) [a, c, k]
        GN = torch.einsum("nabc,ack->nabk", 2 * JA @ JA, Lr)  # (N, T, T, K)
        Hgn = self._eye / sigma + torch.einsum("abk,nabj->nkj", Lr, GN)  # (N, K, K)
        H = Hgn - 2 * torch.einsum("abk,nabj->nkj", Lr, torch.einsum("nabc,ack->nabk", Hf, Lr))
        # fall back to Gauss–Newton where the exact Hessian is not positive definite
        _, info = torch.linalg.cholesky_ex(H)
        H = torch.where((info == 0).view(-1, 1, 1), H, Hgn)
        return val, grad, H

    def prox(
        self,
        z: torch.Tensor,
        sigma: float,
        tol: float = 1e-11,
        max_iter: int = 100,
        *,
        h0: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
    ):
        """``h = argmin ‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖²`` for every node; returns (h, value at h).

        Newton's method from ``h0`` (default ``z``, the cold start) on the nodes whose scale-free gradient
        ``Σ·max|∇|`` is still above ``tol``: converged nodes leave the batch, so the late iterations cost
        only what the slow nodes cost. ``h0`` warm-starts from a nearby solution (a neighbouring ``(q, m, Σ)``
        of a fixed-point iteration); the objective need not be convex, so a warm start can end in another
        local minimum than the cold start: callers check against the cold start (see
        :func:`attnlab.highdim.fixed_point.solve_anderson`). ``rows`` (indices into the nodes): ``z`` and
        ``h0`` hold only those nodes.
        """
        ys = self.y if rows is None else self.y[rows]  # (n, T²) the labels of these nodes
        if self.T == 2:
            return self._prox_two(z, sigma, tol, max_iter, h0, ys)
        return self._prox_generic(z, sigma, tol, max_iter, h0, ys)

    def _prox_generic(self, z, sigma, tol, max_iter, h0, ys):
        """:meth:`prox` for any T: Newton's method in the K flat coordinates."""
        h = (z if h0 is None else h0).clone()  # (N, K)
        idx = torch.arange(h.shape[0])
        for _ in range(max_iter):
            zi, yi = z[idx], ys[idx]
            hi = h[idx]
            val, grad, H = self._loss_grad(hi, zi, sigma, y=yi)
            gnorm = grad.abs().amax(-1) * sigma  # (n,) scale-free
            active = gnorm >= tol
            if not bool(active.any()):
                break
            if not bool(active.all()):
                idx, zi, yi, hi = idx[active], zi[active], yi[active], hi[active]
                val, grad, H = val[active], grad[active], H[active]
            step, info = torch.linalg.solve_ex(H, grad.unsqueeze(-1))  # (n, K, 1)
            step = torch.where((info == 0).view(-1, 1), -step.squeeze(-1), -sigma * grad)  # (n, K)
            t = torch.ones(hi.shape[0], 1, dtype=_DTYPE)
            slope = (grad * step).sum(-1)  # (n,) predicted decrease (negative)
            # a full step whose predicted decrease is below rounding is taken (quadratic regime)
            tiny = -slope < 1e-13 * (1 + val.abs())
            pend = torch.arange(hi.shape[0])  # nodes whose step is not accepted yet
            for _ in range(30):
                tp = t[pend]  # (k, 1)
                cval, _, _ = self._loss_grad(
                    hi[pend] + tp * step[pend], zi[pend], sigma, need_jac=False, y=yi[pend]
                )
                # Armijo, or the full step in the quadratic regime
                tp = tp.squeeze(-1)
                ok = (cval <= val[pend] + 1e-4 * tp * slope[pend]) | (tiny[pend] & (tp == 1))
                t[pend[~ok]] = t[pend[~ok]] / 2
                pend = pend[~ok]
                if pend.numel() == 0:
                    break
            h[idx] = hi + t * step
        val, _, _ = self._loss_grad(h, z, sigma, need_jac=False, y=ys)
        return h, val

    def _prox_two(self, z, sigma, tol, max_iter, h0, ys):
        """:meth:`prox` at T = 2 in the two logit differences ``e = P h`` (same minimiser, same stopping
        rule): :func:`attnlab.highdim.prox_two.newton_two`. Its gradient in the row-space coordinates ``t``
        of ``h − z = B t`` is ``PBᵀ ∇_e``, which sets the same scale-free stopping rule ``Σ·max|∇_t| < tol``
        as the flat solver."""
        beta = self.s.beta
        g00, g01, g11 = (v / sigma for v in self._G)  # G/Σ
        P, PBinv = self._P, self._PBinv
        PB = torch.linalg.inv(PBinv)
        p00, p01, p10, p11 = (float(v) * sigma for v in PB.reshape(-1))  # Σ·PB: the scale-free gradient
        yl = ys.reshape(-1, 2, 2)[:, :, 1]  # (n, 2)
        e0 = z @ P.T  # (n, 2)
        e = e0.clone() if h0 is None else (z + (h0 - z) @ self._proj.T) @ P.T  # h0's row-space part
        en = e.numpy()  # (n, 2), written in place
        # the objective at the minimisers: the value the iteration carries, the same bits as objective() there
        vals = newton_two(
            en, e0.numpy(), yl.numpy(), (g00, g01, g11), (p00, p01, p10, p11), beta, tol, max_iter
        )
        h = z + ((e - e0) @ PBinv.T) @ self.basis.T  # (n, K)
        return h, torch.from_numpy(vals)

    def hats(self, q: float, m: float, sigma: float, alpha: float) -> tuple[float, float, float, float]:
        """``(q̂, m̂, Σ̂, E[M])`` from the output equations of docs/highdim.md C3 (cold-started proximal
        step)."""
        return self.hats_and_prox(q, m, sigma, alpha)[:4]

    def interpolating_start(self, z: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The point nearest ``z`` whose softmax equals the label (least squares for T ≥ 4), (N, K);
        ``z`` holds the nodes ``rows`` only when they are given. The second start of :meth:`prox_best`
        (a subclass may replace it: another reading of the proximal step)."""
        target = self._target if rows is None else self._target[rows]
        return z + (target - z) @ self._proj.T

    def prox_best(self, z: torch.Tensor, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The proximal step from two starts per node, keeping the lower objective: ``z`` (the cold start)
        and :meth:`interpolating_start`. For large ``Σ`` the objective is not convex and Newton's method
        from ``z`` can stop in a local minimum far above the one near the interpolating point (where the
        label term vanishes); the second start finds it. It runs only where :meth:`prox_two_starts` does not
        certify the first minimum as the only one."""
        h1, v1, h2, v2 = self.prox_two_starts(z, sigma)
        better = v2 < v1  # (N,)
        return torch.where(better.unsqueeze(-1), h2, h1), torch.where(better, v2, v1)

    def prox_two_starts(self, z: torch.Tensor, sigma: float):
        """The proximal step from ``z`` and from :meth:`interpolating_start`: (h1, v1, h2, v2). At T = 2 the
        second start runs only on the nodes where the first minimum is not certified to be the only one below
        its value (:func:`~attnlab.highdim.prox_two.one_minimum`: 72%, 28% and 12% of the nodes at λ̃ = 1e-2,
        1e-3 and 1e-4 near the curves' peaks); there it is the first start's solution."""
        h1, v1 = self.prox(z, sigma)
        if self.T != 2:
            h2, v2 = self.prox(z, sigma, h0=self.interpolating_start(z))
            return h1, v1, h2, v2
        g = tuple(v / sigma for v in self._G)
        yl = self.y.reshape(-1, 2, 2)[:, :, 1].numpy()
        sure = one_minimum((z @ self._P.T).numpy(), v1.numpy(), yl, g, self.s.beta)
        rows = torch.from_numpy(np.flatnonzero(~sure))
        h2, v2 = h1.clone(), v1.clone()
        if rows.numel():
            zr = z[rows]
            h2[rows], v2[rows] = self.prox(zr, sigma, h0=self.interpolating_start(zr, rows), rows=rows)
        return h1, v1, h2, v2

    def hats_and_prox(
        self, q: float, m: float, sigma: float, alpha: float, h0: torch.Tensor | None = None
    ) -> tuple[float, float, float, float, torch.Tensor]:
        """As :meth:`hats`, the proximal step started from ``h0`` (default: the better of the two starts of
        :meth:`prox_best`), and the solution ``h`` (N, K) itself (to warm-start the next evaluation)."""
        z = self.z_of(q, m)
        h, M = self.prox_best(z, sigma) if h0 is None else self.prox(z, sigma, h0=h0)
        t = self.node_terms(q, m, sigma, alpha, z, h, M)  # (N, 4)
        qh, mh, sh, EM = (float(v) for v in self.average(t))
        return qh, mh, sh, EM, h

    def node_terms(
        self,
        q: float,
        m: float,
        sigma: float,
        alpha: float,
        z: torch.Tensor,
        h: torch.Tensor,
        M: torch.Tensor,
        rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-node terms ``(q̂, m̂, Σ̂, M)`` of the output equations, (n, 4): their means over the nodes are
        the hats and ``E[M]``. ``z``, ``h`` (n, K) and ``M`` (n,) at the nodes ``rows`` (default all)."""
        q0 = self.s.q0
        # the terms are linear in z*, so they take its conditional mean E[z* | ζ, z] = b_v v + b_w w; with
        # z = a_v v + s w, the products with q z* − m z and q0 z − m z* are combinations of dz·v and dz·w
        av, sw, bv, bw = self._coefficients(q, m)
        v, w = (self.v, self.w) if rows is None else (self.v[rows], self.w[rows])
        C = q0 * q - m * m
        cm = 2 * alpha / (sigma * C)
        if self.T == 2:
            return terms_two(
                h, z, v, w, M, 2 * alpha / sigma**2, cm, (q * bv - m * av, q * bw - m * sw),
                -cm, (q0 * av - m * bv, q0 * sw - m * bw),
            )  # fmt: skip
        dz = h - z  # (n, K)
        dd, dv, dw = (rowdot(dz, x) for x in (dz, v, w))
        return torch.stack(
            [
                (2 * alpha / sigma**2) * dd,
                cm * ((q * bv - m * av) * dv + (q * bw - m * sw) * dw),
                -cm * ((q0 * av - m * bv) * dv + (q0 * sw - m * bw) * dw),
                M,
            ],
            -1,
        )

    def test_error(self, q: float, m: float) -> float:
        """``E‖σ_β0(z0) − σ_β(z)‖²`` with noisy ``z0`` (same nodes)."""
        z = self.z_of(q, m)
        return float(self.average(((self.y - self._softmax(z, self.s.beta)) ** 2).sum(-1)))

    def clean_test_error(self, q: float, m: float) -> float:
        """As :meth:`test_error` against noiseless labels ``σ_β0(z*)``."""
        z = self.z_of(q, m)
        _, _, bv, bw = self._coefficients(q, m)
        # z* given (ζ, z): the conditional mean plus the independent part, of variance
        # Q0 c²/σ_ζ² − b_w² per coordinate of the row space (the null space of C leaves the softmax alone)
        tau2 = max(self.s.q0 * self._c2 / self._sn**2 - bw * bw, 0.0)
        zstar = self.zstar_mean(q, m) + math.sqrt(tau2) * self.u
        y0 = self._softmax(zstar, self.s.beta0)
        return float(self.average(((y0 - self._softmax(z, self.s.beta)) ** 2).sum(-1)))
