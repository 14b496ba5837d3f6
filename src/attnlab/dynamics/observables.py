"""Analytic observables of the dynamics (docs/flow.md B2, B3, B7): energies and their rates, radial
shadows and radial dominance, attention entropy and its rate, cluster statistics.

Rates are computed in closed form at a state from the velocity there (never by differencing
stored steps). Energies are returned in the log domain: ``log E_h = logsumexp_{ij}(β s_ij) -
log(2 β n^2)``, finite for every β > 0 at which the scores are finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab.core.validation import check_real, check_tensor
from attnlab.dynamics.field import auto_chunk, head_outputs, projections, velocity
from attnlab.dynamics.model import Heads
from attnlab.dynamics.space import Space, get_space

__all__ = [
    "RADIAL_RTOL",
    "EnergyRates",
    "RadialDominance",
    "log_energy",
    "energy",
    "energy_rates",
    "radial_shadows",
    "radial_dominance",
    "PerturbationSplit",
    "perturbation_split",
    "entropy",
    "entropy_rate",
    "gram",
    "mean_gamma",
    "cluster_fraction",
    "n_clusters",
]


def _check(spec: Heads, x: torch.Tensor, beta: float, positive: bool = True) -> float:
    check_tensor("x", x, ndim=3)
    if x.shape[-1] != spec.d:
        raise ValueError(f"x: expected last dimension d = {spec.d}, got {x.shape[-1]}")
    return check_real("beta", beta, min=0.0, min_open=positive)


def log_energy(spec: Heads, x: torch.Tensor, beta: float, *, chunk: int | None = None) -> torch.Tensor:
    """Per-head ``log E_h`` of shape (B, H), ``E_h = (1/(2βn^2)) sum_{ij} exp(β <x_i, M_h x_j>)``.

    Differentiable (autograd and forward mode), chunked over queries.
    """
    beta = _check(spec, x, beta)
    B, n, _ = x.shape
    q, _ = projections(spec, x)  # (B, H, n, d)
    c = chunk or auto_chunk(B, spec.H, n, x.element_size())
    xt = x.transpose(1, 2)[:, None]  # (B, 1, d, n)
    parts = [
        torch.logsumexp((beta * (q[:, :, i0 : i0 + c] @ xt)).flatten(2), dim=-1)  # (B, H)
        for i0 in range(0, n, c)
    ]
    lse = torch.logsumexp(torch.stack(parts, dim=-1), dim=-1)  # (B, H)
    return lse - math.log(2.0 * beta * n * n)


def energy(spec: Heads, x: torch.Tensor, beta: float) -> torch.Tensor:
    """Total energy ``E_multi = sum_h E_h`` (B,); ``ValueError`` when it exceeds the dtype's range."""
    le = torch.logsumexp(log_energy(spec, x, beta), dim=-1)  # (B,)
    if float(le.max()) >= math.log(torch.finfo(x.dtype).max):
        raise ValueError(
            f"beta: expected an energy within {x.dtype} range, got log E = {float(le.max()):.4g}; "
            "use log_energy"
        )
    return torch.exp(le)


@dataclass(frozen=True)
class EnergyRates:
    """Energies and their time derivatives at a state.

    ``log_E`` (B, H); ``rel`` (B, H) = ``(dE_h/dt) / E_h``; ``rate`` (B, H) = ``dE_h/dt`` (may
    overflow at huge β; the sign is that of ``rel``); totals over heads in ``*_total`` (B,).
    """

    log_E: torch.Tensor
    rel: torch.Tensor
    log_E_total: torch.Tensor
    rel_total: torch.Tensor

    @property
    def rate(self) -> torch.Tensor:
        return torch.exp(self.log_E) * self.rel

    @property
    def rate_total(self) -> torch.Tensor:
        return torch.exp(self.log_E_total) * self.rel_total


def energy_rates(
    spec: Heads, x: torch.Tensor, beta: float, xdot: torch.Tensor, *, chunk: int | None = None
) -> EnergyRates:
    """``dE_h/dt`` along the velocity ``xdot`` (B, n, d), in closed form.

    ``dE_h/dt = (1/(2n^2)) sum_ij exp(β s_ij) ṡ_ij`` with ``ṡ_ij = <ẋ_i, M_h x_j> + <x_i, M_h ẋ_j>``,
    i.e. ``(dE_h/dt)/E_h = β E_w[ṡ]`` with pair weights ``w ∝ exp(β s_ij)`` (valid for any M_h).
    """
    beta = _check(spec, x, beta)
    if xdot.shape != x.shape:
        raise ValueError(f"xdot: expected shape {tuple(x.shape)}, got {tuple(xdot.shape)}")
    B, n, _ = x.shape
    q, _ = projections(spec, x)  # (B, H, n, d): M_h^T x_i
    qd, _ = projections(spec, xdot)  # (B, H, n, d): M_h^T ẋ_i
    c = chunk or auto_chunk(B, spec.H, n, x.element_size())
    xt = x.transpose(1, 2)[:, None]  # (B, 1, d, n)
    xdt = xdot.transpose(1, 2)[:, None]  # (B, 1, d, n)
    m_all, z_all, w_all = [], [], []
    for i0 in range(0, n, c):
        sl = slice(i0, i0 + c)
        s = beta * (q[:, :, sl] @ xt)  # (B, H, c, n)
        sdot = qd[:, :, sl] @ xt + q[:, :, sl] @ xdt  # (B, H, c, n): <ẋ_i, M x_j> + <x_i, M ẋ_j>
        m = s.amax(dim=(-2, -1))  # (B, H)
        e = torch.exp(s - m[..., None, None])
        m_all.append(m)
        z_all.append(e.sum(dim=(-2, -1)))
        w_all.append((e * sdot).sum(dim=(-2, -1)))
    m = torch.stack(m_all, -1)  # (B, H, chunks)
    mm = m.amax(-1, keepdim=True)
    sc = torch.exp(m - mm)
    Z = (torch.stack(z_all, -1) * sc).sum(-1)  # (B, H)
    W = (torch.stack(w_all, -1) * sc).sum(-1)  # (B, H)
    rel = beta * W / Z
    log_E = mm[..., 0] + torch.log(Z) - math.log(2.0 * beta * n * n)
    log_tot = torch.logsumexp(log_E, dim=-1)
    rel_tot = (torch.softmax(log_E, dim=-1) * rel).sum(-1)
    return EnergyRates(log_E, rel, log_tot, rel_tot)


@dataclass(frozen=True)
class PerturbationSplit:
    """``dE_multi/dt`` split into dissipation and perturbation terms (usa kind, symmetric ``M_h``).

    With ``p_i = sum_h f_i^h(V_h - M_h)`` (the head outputs with values ``V_h - M_h``) and ``k`` the
    velocity factor (head combination times velocity scale), ``ẋ_i = k P⊥(G_i + p_i)`` where
    ``G_i = sum_h f_i^h(M_h) = n grad_{x_i} E_multi``, hence

    ``dE/dt = dissipation - cross``, ``dissipation = (1/(n k)) sum_i ||ẋ_i||^2``,
    ``cross = (1/n) sum_i <P⊥ p_i, ẋ_i>``, and completing the square
    ``dE/dt >= -floor``, ``floor = (k/(4n)) sum_i ||P⊥ p_i||^2`` (quadratic in the perturbation).
    All (B,); ``rate`` = ``dissipation - cross``.
    """

    rate: torch.Tensor
    dissipation: torch.Tensor
    cross: torch.Tensor
    floor: torch.Tensor


def perturbation_split(
    spec: Heads, x: torch.Tensor, beta: float, space: str | Space = "sphere"
) -> PerturbationSplit:
    """Split ``dE_multi/dt`` at ``x`` (B, n, d) for perturbed values ``V_h != M_h`` (docs/flow.md B2, Thm 12).

    Requires the ``usa`` kind and symmetric ``M_h`` (where ``grad E_multi = sum_h f^h(M_h)/n``).
    """
    beta = _check(spec, x, beta)
    if spec.kind != "usa" or not spec.symmetric:
        raise ValueError(
            f"spec: expected the usa kind with symmetric M_h, got kind {spec.kind!r}, "
            f"symmetric={spec.symmetric}"
        )
    sp = get_space(space)
    n = x.shape[1]
    k = spec.head_factor() * spec.velocity_factor(n)
    f = head_outputs(spec, x, beta, fused=False)  # (B, H, n, d)
    xdot = velocity(spec, x, beta, sp, f=f)  # (B, n, d)
    pert = head_outputs(spec.replace(V=spec.V - spec.M), x, beta, fused=False).sum(1)  # (B, n, d)
    pt = sp.tangent(x, pert)  # (B, n, d): P⊥ p_i (identity in flat space)
    diss = (xdot * xdot).sum((-2, -1)) / (n * k)
    cross = (pt * xdot).sum((-2, -1)) / n
    floor = k * (pt * pt).sum((-2, -1)) / (4 * n)
    return PerturbationSplit(diss - cross, diss, cross, floor)


def radial_shadows(f: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``a_i^h = <f_i^h, x_i>`` of shape (..., H, n) from ``f`` (..., H, n, d) at ``x`` (..., n, d)."""
    return (f * x.unsqueeze(-3)).sum(-1)


@dataclass(frozen=True)
class RadialDominance:
    """The three nested forms of radial dominance (docs/flow.md B3), per head: shapes (..., H).

    ``margin1`` = ``sum_i ||P⊥f_i^h||^2 - sum_i sum_{h'≠h} a_i^h a_i^h'`` (form 1 holds iff >= 0; under
    orthogonal subspaces, usa kind, ``V = M``, it equals ``n dE_h/dt``); ``form1``/``form2``/``form3``
    booleans; form 3 implies form 2 implies form 1. Per token: ``form2_tokens``/``form3_tokens`` the
    fraction of tokens where the pointwise inequality holds; ``perp_sq`` (..., H, n) ``||P⊥f_i^h||^2``
    and ``radial`` (..., H, n) the shadows ``a_i^h``.
    """

    margin1: torch.Tensor
    form1: torch.Tensor
    form2: torch.Tensor
    form3: torch.Tensor
    form2_tokens: torch.Tensor
    form3_tokens: torch.Tensor
    perp_sq: torch.Tensor
    radial: torch.Tensor


#: Relative slack of the radial-dominance inequalities (ties within rounding count as holding).
RADIAL_RTOL = 1e-12


def radial_dominance(f: torch.Tensor, x: torch.Tensor, *, rtol: float = RADIAL_RTOL) -> RadialDominance:
    """The three forms of radial dominance from head outputs ``f`` (..., H, n, d) at ``x`` (..., n, d).

    ``rtol`` gives each inequality a relative slack for rounding (ties count as holding).
    """
    if f.ndim < 3 or x.ndim < 2 or f.shape[-2:] != x.shape[-2:]:
        raise ValueError(
            f"f: expected head outputs (..., H, n, d) matching x (..., n, d) = {tuple(x.shape)}, "
            f"got {tuple(f.shape)}"
        )
    a = radial_shadows(f, x)  # (..., H, n)
    # ||P⊥ f||^2 from the projected vector itself: ||f||^2 − a^2 cancels catastrophically when f is
    # nearly parallel to x (clustered tokens) and can come out below zero by ~1e-16 ||f||^2
    perp = f - a.unsqueeze(-1) * x.unsqueeze(-3)  # (..., H, n, d)
    tang2 = (perp * perp).sum(-1)  # (..., H, n): ||P⊥ f||^2 >= 0
    fn = torch.linalg.vector_norm(f, dim=-1)  # (..., H, n)
    A = a.sum(-2, keepdim=True)  # (..., 1, n)
    absA = a.abs().sum(-2, keepdim=True)
    cross = a * (A - a)  # (..., H, n): sum_{h'≠h} a^h a^h'
    others = absA - a.abs()  # (..., H, n): sum_{h'≠h} |a^h'|
    margin1 = tang2.sum(-1) - cross.sum(-1)
    scale1 = tang2.sum(-1).abs() + cross.abs().sum(-1)
    form1 = margin1 >= -rtol * scale1
    rhs2 = a.abs() * others
    ok2 = tang2 >= rhs2 - rtol * (tang2.abs() + rhs2)  # (..., H, n)
    rhs3 = fn * others
    ok3 = tang2 >= rhs3 - rtol * (tang2.abs() + rhs3)  # (..., H, n)
    return RadialDominance(
        margin1,
        form1,
        ok2.all(-1),
        ok3.all(-1),
        ok2.to(f.dtype).mean(-1),
        ok3.to(f.dtype).mean(-1),
        tang2.clamp_min(0.0),
        a,
    )


def _log_probs(spec: Heads, x: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    q, _ = projections(spec, x)  # (B, H, n, d)
    s = q @ x.transpose(1, 2)[:, None]  # (B, H, n, n): s_ij = <x_i, M_h x_j>
    return s, torch.log_softmax(beta * s, dim=-1)


def entropy(spec: Heads, x: torch.Tensor, beta: float) -> torch.Tensor:
    """Attention entropies ``H_i^h = -sum_j p_ij log p_ij`` of shape (B, H, n), ``p = softmax_j(β s_ij)``."""
    beta = _check(spec, x, beta, positive=False)
    _, lp = _log_probs(spec, x, beta)
    return -(lp.exp() * lp).sum(-1)


def entropy_rate(spec: Heads, x: torch.Tensor, beta: float, xdot: torch.Tensor) -> torch.Tensor:
    """``dH_i^h/dt = -β^2 Cov_{p_i}(s_i·, ṡ_i·)`` of shape (B, H, n) (docs/flow.md B7), in closed form."""
    beta = _check(spec, x, beta, positive=False)
    if xdot.shape != x.shape:
        raise ValueError(f"xdot: expected shape {tuple(x.shape)}, got {tuple(xdot.shape)}")
    s, lp = _log_probs(spec, x, beta)
    p = lp.exp()  # (B, H, n, n)
    q, _ = projections(spec, x)
    qd, _ = projections(spec, xdot)
    sdot = qd @ x.transpose(1, 2)[:, None] + q @ xdot.transpose(1, 2)[:, None]  # (B, H, n, n)
    s_c = s - (p * s).sum(-1, keepdim=True)
    sd_c = sdot - (p * sdot).sum(-1, keepdim=True)
    return -(beta**2) * (p * s_c * sd_c).sum(-1)


def gram(x: torch.Tensor) -> torch.Tensor:
    """Inner products ``<x_i, x_j>`` (B, n, n)."""
    return x @ x.transpose(1, 2)


def _offdiag_mask(n: int, device) -> torch.Tensor:
    return ~torch.eye(n, dtype=torch.bool, device=device)


def mean_gamma(x: torch.Tensor) -> torch.Tensor:
    """Mean off-diagonal inner product ``(1/(n(n-1))) sum_{i≠j} <x_i, x_j>`` (B,)."""
    n = x.shape[1]
    s = x.sum(1)  # (B, d)
    tot = (s * s).sum(-1) - (x * x).sum((-2, -1))
    return tot / (n * (n - 1))


def cluster_fraction(x: torch.Tensor, threshold: float = 0.999) -> torch.Tensor:
    """Fraction of pairs i < j with ``<x_i, x_j> > threshold`` (B,) (published clustering statistic)."""
    n = x.shape[1]
    G = gram(x)
    iu = torch.triu_indices(n, n, offset=1, device=x.device)
    return (G[:, iu[0], iu[1]] > threshold).to(x.dtype).mean(-1)


def n_clusters(x: torch.Tensor, threshold: float = 0.999) -> torch.Tensor:
    """Number of connected components of the graph ``<x_i, x_j> > threshold`` (B,), by label propagation."""
    B, n, _ = x.shape
    A = gram(x) > threshold  # (B, n, n)
    A = A | torch.eye(n, dtype=torch.bool, device=x.device)
    big = n + 1
    labels = torch.arange(n, device=x.device).expand(B, n).clone()  # (B, n)
    for _ in range(n):
        cand = torch.where(A, labels[:, None, :], torch.full_like(labels[:, None, :], big))  # (B, n, n)
        new = cand.amin(-1)
        if torch.equal(new, labels):
            break
        labels = new
    return (labels == torch.arange(n, device=x.device)).sum(-1)


def state_velocity(
    spec: Heads, x: torch.Tensor, beta: float, space: str | Space = "sphere"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Head outputs (B, H, n, d) and the flow's velocity (B, n, d) at ``x`` (one evaluation)."""
    sp = get_space(space)
    f = head_outputs(spec, x, beta, fused=False)
    return f, velocity(spec, x, beta, sp, f=f)
