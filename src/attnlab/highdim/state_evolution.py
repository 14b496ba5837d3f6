"""State evolution of the ERM fixed point (THEORY.md C3): order parameters, observables, stability.

The regularisation parameter of everything here is ``λ̃`` (``lam``), the coefficient of the nuclear norm in
``d λ̃ Tr S``; the weight-decay coefficient ``λ`` of ``λ‖W‖²`` is ``λ̃/√κ`` (:func:`lam_from_lam_tilde`).

The expectation over the output channel is a deterministic function of ``(q, m, Σ)``: fixed
scrambled-Sobol nodes (mapped to Gaussians) are drawn once per solve and reused by every iteration, so the
damped iteration can converge to tight tolerances. The proximal step
``argmin_h ‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖²`` is solved for all nodes at once by Newton's method
(Gauss–Newton where the Hessian is not positive definite) with a per-node backtracking line search.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.spectra import (
    DiscreteSpectrum,
    J_and_derivatives,
    JValue,
    MarchenkoPastur,
)

__all__ = [
    "Setting",
    "FixedPoint",
    "Stability",
    "OutputChannel",
    "lam_from_lam_tilde",
    "lam_tilde_from_lam",
    "flat_to_matrix",
    "state_evolution",
    "sweep",
    "stability",
    "select_fixed_point",
    "PredictedSpectrum",
    "predicted_spectrum",
]

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


def lam_from_lam_tilde(lam_tilde: float, kappa: float = 1.0) -> float:
    """Weight-decay coefficient ``λ`` (penalty ``λ‖W‖²``) for the nuclear-norm coefficient ``λ̃``.

    ``λ‖W‖_F² = λ √(pd) Tr S = d λ̃ Tr S`` with ``λ̃ = √κ λ`` (THEORY.md C2). This is the one place the
    conversion is done.
    """
    lam_tilde = check_real("lam_tilde", lam_tilde, min=0.0)
    kappa = check_real("kappa", kappa, min=0.0, min_open=True)
    return lam_tilde / math.sqrt(kappa)


def lam_tilde_from_lam(lam: float, kappa: float = 1.0) -> float:
    """Inverse of :func:`lam_from_lam_tilde`: ``λ̃ = √κ λ``."""
    lam = check_real("lam", lam, min=0.0)
    kappa = check_real("kappa", kappa, min=0.0, min_open=True)
    return lam * math.sqrt(kappa)


@dataclass(frozen=True)
class Setting:
    """A problem of THEORY.md C1–C2 at ``d → ∞`` (or finite d through a discrete ``target``).

    Parameters
    ----------
    kappa0 : float
        Target rank ratio ``p0/d`` (used when ``target`` is None: Marchenko–Pastur target).
    noise : float
        Label-noise variance ``Δ``.
    tokens : int
        Sequence length ``T``.
    lam : float
        ``λ̃``, the nuclear-norm coefficient (``λ = λ̃/√κ`` is the weight decay, see
        :func:`lam_from_lam_tilde`).
    beta, beta0 : float
        Inverse temperatures of student and target.
    kappa : float
        Student width ``p/d`` (the theory is independent of κ as long as κ ≥ the rank fraction).
    target : DiscreteSpectrum or None
        A finite-d target spectrum (e.g. :func:`~attnlab.highdim.power_law_spectrum`); None for MP(κ0).
    """

    kappa0: float = 0.5
    noise: float = 0.5
    tokens: int = 2
    lam: float = 0.01
    beta: float = 1.0
    beta0: float = 1.0
    kappa: float = 1.0
    target: DiscreteSpectrum | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_real("kappa0", self.kappa0, min=0.0, min_open=True)
        check_real("noise", self.noise, min=0.0)
        check_int("tokens", self.tokens, min=2)
        check_real("lam", self.lam, min=0.0)
        check_real("beta", self.beta, min=0.0, min_open=True)
        check_real("beta0", self.beta0, min=0.0)
        check_real("kappa", self.kappa, min=0.0, min_open=True)
        if self.target is not None and not isinstance(self.target, DiscreteSpectrum):
            raise ValueError(f"target: expected a DiscreteSpectrum or None, got {type(self.target).__name__}")

    @property
    def spectrum(self) -> MarchenkoPastur | DiscreteSpectrum:
        """The target law μ0."""
        return self.target if self.target is not None else MarchenkoPastur(self.kappa0)

    @property
    def q0(self) -> float:
        """``Q0 = Tr S0²/d``."""
        return self.spectrum.q0

    @property
    def K(self) -> int:
        """Flat dimension ``T(T+1)/2``."""
        return self.tokens * (self.tokens + 1) // 2

    @property
    def weight_decay(self) -> float:
        """``λ`` of the penalty ``λ‖W‖²`` for this ``λ̃`` and ``κ``."""
        return lam_from_lam_tilde(self.lam, self.kappa)

    def to_dict(self) -> dict:
        """Plain JSON-able fields; ``target`` as the list of its eigenvalues (or None)."""
        d = asdict(self)
        d.pop("target")
        d["target"] = None if self.target is None else self.target.eigenvalues.tolist()
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Setting:
        """Inverse of :meth:`to_dict` (missing keys take their defaults; ``target`` is a list of
        eigenvalues, a :class:`DiscreteSpectrum` or None)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"data: expected a mapping of Setting fields, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"data: expected keys among {', '.join(sorted(known))}, got unknown key {unknown[0]!r}"
            )
        kw = dict(data)
        t = kw.get("target")
        if t is not None and not isinstance(t, DiscreteSpectrum):
            arr = np.asarray(t, dtype=float) if isinstance(t, (list, tuple, np.ndarray)) else None
            if arr is None:
                got = type(t).__name__
                raise ValueError(
                    f"target: expected a list of eigenvalues, a DiscreteSpectrum or None, got {got}"
                )
            kw["target"] = DiscreteSpectrum(arr)
        return cls(**kw)


@dataclass(frozen=True)
class FixedPoint:
    """A state-evolution fixed point and its observables (all per THEORY.md C3 conventions).

    ``test_error`` is against noisy labels (includes the irreducible part); ``train_loss`` is
    (data loss + penalty)/d²; ``s_error`` is ``‖Ŝ − S0‖_F²/d``; ``rank_fraction`` is ``μ_δ((ε, ∞))``.
    """

    alpha: float
    q: float
    m: float
    sigma: float
    q_hat: float
    m_hat: float
    sigma_hat: float
    test_error: float
    train_loss: float
    s_error: float
    rank_fraction: float
    delta: float
    eps: float
    eta: float
    iterations: int
    converged: bool
    max_rel_change: float
    #: local stability (:attr:`Stability.attracting`) when checked (multi-start solves), else None
    stable: bool | None = None
    #: the distinct fixed points a multi-start solve found (this one among them); empty for one start
    candidates: tuple[FixedPoint, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "candidates"}
        d["candidates"] = [{k: v for k, v in asdict(c).items() if k != "candidates"} for c in self.candidates]
        return d

    @property
    def params(self) -> tuple[float, float, float, float, float, float]:
        return (self.q, self.m, self.sigma, self.q_hat, self.m_hat, self.sigma_hat)


@dataclass(frozen=True)
class Stability:
    """Local stability of a fixed point of the state-evolution map (not the paper's replicon condition).

    ``radius_undamped``: spectral radius of the Jacobian of the undamped map ``(q, m, Σ) -> (q, m, Σ)``
    (finite differences, same nodes); ``radius_damped``: the same for the damped map used by the solver.
    ``stable`` means the damped iteration is locally attracting (``radius_damped < 1``); see also
    :attr:`attracting` (damping-independent).
    """

    radius_undamped: float
    radius_damped: float
    eigenvalues: tuple[complex, ...]
    stable: bool

    @property
    def attracting(self) -> bool:
        """True when some damping makes the iteration locally attracting: every eigenvalue ``λ`` of the
        undamped Jacobian has ``Re λ < 1`` (then ``|d + (1 − d) λ| < 1`` for ``d`` close enough to 1).
        This is the criterion used to choose among several fixed points; it does not depend on the
        damping a solve happened to use."""
        return all(ev.real < 1 for ev in self.eigenvalues)


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


def _prior(setting: Setting, qh: float, mh: float, sh: float) -> tuple[float, float, float, JValue, float]:
    """Matrix-denoising (prior) equations: ``(q, m, Σ)`` from the hats; returns also J and (δ, ε, η)."""
    delta = math.sqrt(max(qh, 1e-300)) / mh
    eps = 2 * setting.lam / mh
    eta = mh / sh
    jv = J_and_derivatives(setting.spectrum, delta, eps)
    q = eta**2 * jv.J
    m = eta * (jv.J - delta / 2 * jv.dJ_ddelta - eps / 2 * jv.dJ_deps)
    sigma = jv.dJ_ddelta / (2 * delta * sh)
    return q, m, sigma, jv, eta


def _train_loss(alpha, q, m, sigma, qh, mh, sh, EM, jv: JValue) -> float:
    return (qh * sigma - sh * q) / 4 + mh * m / 2 + alpha * EM - mh**2 / (4 * sh) * jv.J


def state_evolution(
    setting: Setting,
    alpha: float,
    *,
    init: FixedPoint | Sequence[float] | None = None,
    starts: str | Sequence[FixedPoint | Sequence[float]] | None = None,
    damping: float = 0.3,
    tol: float = 1e-6,
    max_iter: int = 500,
    nodes: int = 4096,
    seed: int = 0,
    channel: OutputChannel | None = None,
) -> FixedPoint:
    """Solve the state-evolution equations of THEORY.md C3 at sample ratio ``α = n/d²``.

    Parameters
    ----------
    setting : Setting
        The problem (``setting.lam`` is λ̃).
    alpha : float
        ``n/d²``, > 0.
    init : FixedPoint or (q, m, Σ) or None
        Warm start (e.g. the neighbouring point of a sweep).
    starts : "auto", a sequence of starts, or None
        Several fixed points (THEORY.md C3: "take the one with the lowest training loss that is
        stable"). None (the default): one solve from ``init`` (or the default start), no stability check
        — the cost of one point. ``"auto"``: solve from well-spread starts — the warm start ``init`` when
        given, the default start ``(Q0/2, 0.4 Q0, 1)``, an uninformed one (small ``q`` and ``m``) and one
        near perfect recovery (``q ≈ m ≈ Q0``, small ``Σ``) — about four times the cost of one solve
        plus one stability check (six map evaluations) per distinct fixed point. A sequence: solve from
        each of those starts (FixedPoint or (q, m, Σ); ``init`` is added first when given). In both
        cases every converged solution is checked for local stability (:func:`stability`, criterion
        :attr:`Stability.attracting`), solutions within relative 1e-3 of each other in ``(q, m, Σ)`` are
        merged, and the stable one with the lowest training loss is returned (:func:`select_fixed_point`),
        with ``stable`` set and the distinct candidates in ``candidates``.
    damping : float
        Weight of the old value in each update, in [0, 1); a run that does not converge is retried with
        the damping raised by 0.3 (up to 0.9).
    tol : float
        Stop when the largest relative change of the six order parameters is below ``tol``.
    max_iter : int
        Iteration cap (``converged`` is False when reached).
    nodes : int
        Number of fixed quasi-random nodes of the output expectation.
    seed : int
        Scrambling seed of the nodes.
    channel : OutputChannel, optional
        Precomputed nodes for ``setting`` (sweeps share one).

    Returns
    -------
    FixedPoint
    """
    alpha = check_real("alpha", alpha, min=0.0, min_open=True)
    damping = check_real("damping", damping, min=0.0, max=1.0, max_open=True)
    tol = check_real("tol", tol, min=0.0, min_open=True)
    max_iter = check_int("max_iter", max_iter, min=1)
    start_list = _starts(setting, init, starts)
    with _one_thread():
        if start_list is None:
            return _solve_retry(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
        ch = channel if channel is not None else OutputChannel(setting, nodes, seed)
        found: list[FixedPoint] = []
        for st in start_list:
            fp = _solve_retry(setting, alpha, st, damping, tol, max_iter, nodes, seed, ch)
            if fp.converged and not any(_same_point(fp, o) for o in found):
                found.append(fp)
        if not found:  # nothing converged: report the first start's attempt, unchecked
            return _solve_retry(setting, alpha, start_list[0], damping, tol, max_iter, nodes, seed, ch)
        checked = [replace(f, stable=stability(setting, f, channel=ch).attracting) for f in found]
        best = checked[select_fixed_point(checked)]
        return replace(best, candidates=tuple(checked))


def _starts(setting: Setting, init, starts) -> list | None:
    """The list of starts of a multi-start solve (None for a single solve)."""
    if starts is None:
        return None
    q0 = setting.q0
    out: list = [] if init is None else [init]
    if isinstance(starts, str):
        if starts != "auto":
            raise ValueError(f"starts: expected 'auto', a sequence of starts or None, got {starts!r}")
        out += [(0.5 * q0, 0.4 * q0, 1.0), (0.05 * q0, 0.02 * q0, 1.0), (0.98 * q0, 0.97 * q0, 0.05)]
        return out
    try:
        items = list(starts)
    except TypeError:
        raise ValueError(
            f"starts: expected 'auto', a sequence of starts or None, got {type(starts).__name__}"
        ) from None
    for i, st in enumerate(items):
        if isinstance(st, FixedPoint):
            out.append(st)
            continue
        v = np.asarray(st, dtype=float).ravel()
        if v.size != 3 or not np.all(np.isfinite(v)) or v[0] <= 0 or v[2] <= 0 or v[1] ** 2 >= q0 * v[0]:
            raise ValueError(
                f"starts[{i}]: expected a FixedPoint or (q, m, Σ) with q > 0, Σ > 0 and m² < Q0 q, got {st!r}"
            )
        out.append(tuple(float(x) for x in v))
    if not out:
        raise ValueError("starts: expected at least one start, got an empty sequence")
    return out


def _same_point(a: FixedPoint, b: FixedPoint, rtol: float = 1e-3) -> bool:
    x, y = np.array([a.q, a.m, a.sigma]), np.array([b.q, b.m, b.sigma])
    return bool(np.all(np.abs(x - y) <= rtol * np.maximum(np.abs(x), np.abs(y))))


def select_fixed_point(candidates: Sequence[FixedPoint]) -> int:
    """Index of the fixed point to report among ``candidates`` (THEORY.md C3).

    The rule: among converged candidates whose ``stable`` is True, the lowest ``train_loss``; when none
    is known to be stable, the lowest training loss among the converged ones whose stability is
    unknown (``stable`` None); then among all converged ones; then among all.
    """
    if not candidates:
        raise ValueError("candidates: expected at least one FixedPoint, got none")
    idx = list(range(len(candidates)))
    tiers = (
        [i for i in idx if candidates[i].converged and candidates[i].stable is True],
        [i for i in idx if candidates[i].converged and candidates[i].stable is None],
        [i for i in idx if candidates[i].converged],
        idx,
    )
    pool = next(t for t in tiers if t)
    return min(pool, key=lambda i: candidates[i].train_loss)


def _solve_retry(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel) -> FixedPoint:
    fp = _solve(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
    # an iteration that left the valid region (or stalled) is retried with stronger damping
    while not fp.converged and damping < 0.85:
        damping = min(0.9, damping + 0.3)
        fp = _solve(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
    return fp


def _solve(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel) -> FixedPoint:
    ch = channel if channel is not None else OutputChannel(setting, nodes, seed)
    q0 = setting.q0
    if init is None:
        q, m, sigma = 0.5 * q0, 0.4 * q0, 1.0
    elif isinstance(init, FixedPoint):
        q, m, sigma = init.q, init.m, init.sigma
    else:
        q, m, sigma = (float(v) for v in init)
    qh = mh = sh = None
    converged, change, it = False, math.inf, 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported after the loop)
        nqh, nmh, nsh, EM = ch.hats(q, m, sigma, alpha)
        if qh is None:
            qh, mh, sh = nqh, nmh, nsh
        else:
            qh = damping * qh + (1 - damping) * nqh
            mh = damping * mh + (1 - damping) * nmh
            sh = damping * sh + (1 - damping) * nsh
        nq, nm, ns, jv, eta = _prior(setting, qh, mh, sh)
        old = np.array([q, m, sigma])
        q = damping * q + (1 - damping) * nq
        m = damping * m + (1 - damping) * nm
        sigma = damping * sigma + (1 - damping) * ns
        # keep the covariance [[Q0, m], [m, q]] positive definite
        m = max(min(m, math.sqrt(q0 * q) * (1 - 1e-12)), -math.sqrt(q0 * q) * (1 - 1e-12))
        new = np.array([q, m, sigma])
        hats_new, hats_old = np.array([nqh, nmh, nsh]), np.array([qh, mh, sh])
        change = float(
            max(
                np.max(np.abs(new - old) / np.maximum(np.abs(new), 1e-300)),
                np.max(np.abs(hats_new - hats_old) / np.maximum(np.abs(hats_new), 1e-300)),
            )
        )
        if not all(math.isfinite(v) for v in (q, m, sigma, qh, mh, sh)) or sigma <= 0 or sh <= 0:
            break
        if change < tol:
            converged = True
            break
    return _finish(setting, ch, alpha, q, m, sigma, qh, mh, sh, it, converged, change)


def _finish(setting, ch, alpha, q, m, sigma, qh, mh, sh, it, converged, change) -> FixedPoint:
    _, _, _, EM = ch.hats(q, m, sigma, alpha)
    delta = math.sqrt(max(qh, 1e-300)) / mh
    eps = 2 * setting.lam / mh
    jv = J_and_derivatives(setting.spectrum, delta, eps)
    return FixedPoint(
        alpha=alpha,
        q=q,
        m=m,
        sigma=sigma,
        q_hat=qh,
        m_hat=mh,
        sigma_hat=sh,
        test_error=ch.test_error(q, m),
        train_loss=_train_loss(alpha, q, m, sigma, qh, mh, sh, EM, jv),
        s_error=setting.q0 + q - 2 * m,
        rank_fraction=jv.mass,
        delta=delta,
        eps=eps,
        eta=mh / sh,
        iterations=it,
        converged=converged,
        max_rel_change=change,
    )


def sweep(
    setting: Setting,
    alphas: Sequence[float],
    *,
    lams: Sequence[float] | None = None,
    **kwargs,
) -> list[FixedPoint]:
    """Fixed points along a sweep of ``α`` (or of ``λ̃`` when ``lams`` is given, at ``alphas[0]``),
    each warm-started from its neighbour's fixed point and sharing one set of nodes per setting."""
    out: list[FixedPoint] = []
    prev: FixedPoint | None = None
    if lams is None:
        ch = OutputChannel(setting, kwargs.get("nodes", 4096), kwargs.get("seed", 0))
        for a in alphas:
            prev = state_evolution(setting, a, init=prev, channel=ch, **kwargs)
            out.append(prev)
        return out
    for lam in lams:
        s = replace(setting, lam=lam)
        ch = OutputChannel(s, kwargs.get("nodes", 4096), kwargs.get("seed", 0))
        prev = state_evolution(s, alphas[0], init=prev, channel=ch, **kwargs)
        out.append(prev)
    return out


def stability(
    setting: Setting,
    fp: FixedPoint,
    *,
    damping: float = 0.5,
    nodes: int = 4096,
    seed: int = 0,
    step: float = 1e-5,
    channel: OutputChannel | None = None,
) -> Stability:
    """Local stability of the fixed point ``fp`` under the state-evolution map.

    The map is ``F(q, m, Σ)``: output equations then prior equations, undamped. Its Jacobian is taken by
    central finite differences (relative step ``step``) on the same quasi-random nodes (``channel``, or
    ``nodes`` nodes with scrambling ``seed``). ``damping`` only sets ``radius_damped`` and ``stable``.
    """
    damping = check_real("damping", damping, min=0.0, max=1.0, max_open=True)
    step = check_real("step", step, min=0.0, min_open=True)
    ch = channel if channel is not None else OutputChannel(setting, nodes, seed)

    def F(x: np.ndarray) -> np.ndarray:
        qh, mh, sh, _ = ch.hats(x[0], x[1], x[2], fp.alpha)
        q, m, s, _, _ = _prior(setting, qh, mh, sh)
        return np.array([q, m, s])

    x0 = np.array([fp.q, fp.m, fp.sigma])
    Jm = np.zeros((3, 3))
    for j in range(3):
        h = step * max(abs(x0[j]), 1e-8)
        e = np.zeros(3)
        e[j] = h
        Jm[:, j] = (F(x0 + e) - F(x0 - e)) / (2 * h)
    ev = np.linalg.eigvals(Jm)
    evd = damping + (1 - damping) * ev
    r_u = float(np.max(np.abs(ev)))
    r_d = float(np.max(np.abs(evd)))
    return Stability(r_u, r_d, tuple(complex(v) for v in ev), r_d < 1)


@dataclass(frozen=True)
class PredictedSpectrum:
    """Law of the eigenvalues of the learned ``Ŝ`` (THEORY.md C4): ``η · ReLU(S0 + δZ − ε)``.

    ``atom``: mass at zero ``μ_δ((−∞, ε])``; ``rank_fraction = 1 − atom``; ``x`` and ``density`` (per unit
    eigenvalue, normalised over the non-zero part) tabulate ``μ_δ'(ε + x/η)/(η r)``; ``outlier_edge`` is
    ``η (b − ε)`` with ``b`` the upper edge of the support component holding the most mass (the bulk).
    """

    atom: float
    rank_fraction: float
    x: np.ndarray = field(repr=False)
    density: np.ndarray = field(repr=False)
    delta: float
    eps: float
    eta: float
    outlier_edge: float

    def cdf_nonzero(self, x: np.ndarray) -> np.ndarray:
        """CDF of the non-zero part at ``x`` (trapezoid on the tabulated density)."""
        c = np.concatenate([[0.0], np.cumsum(np.diff(self.x) * (self.density[1:] + self.density[:-1]) / 2)])
        c = c / c[-1] if c[-1] > 0 else c
        return np.interp(np.asarray(x, dtype=float), self.x, c, left=0.0, right=1.0)


def predicted_spectrum(setting: Setting, fp: FixedPoint, points: int = 400) -> PredictedSpectrum:
    """The predicted spectrum of ``Ŝ`` at the fixed point ``fp`` (THEORY.md C4)."""
    from attnlab.highdim.spectra import semicircle_convolution

    law = semicircle_convolution(setting.spectrum, fp.delta)
    r = law.mass_above(fp.eps)
    xs = []
    for a, b in law.intervals:
        lo = max(a, fp.eps)
        if lo < b:
            th = np.linspace(0, math.pi, points)
            xs.append(lo + (b - lo) * (1 - np.cos(th)) / 2)
    xg = np.unique(np.concatenate(xs)) if xs else np.array([fp.eps, fp.eps + 1e-9])
    dens = law.density(xg) / (fp.eta * max(r, 1e-300))
    masses = [law.mass_above(a) - law.mass_above(b) for a, b in law.intervals]
    bulk_b = law.intervals[int(np.argmax(masses))][1]
    return PredictedSpectrum(
        atom=1 - r,
        rank_fraction=r,
        x=fp.eta * (xg - fp.eps),
        density=dens,
        delta=fp.delta,
        eps=fp.eps,
        eta=fp.eta,
        outlier_edge=fp.eta * (bulk_b - fp.eps),
    )
