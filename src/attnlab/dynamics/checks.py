"""Derivative identities of docs/flow.md B2 and B7 checked at a state, and energy monotonicity of a record.

The identities are checked with an independent derivative at the state: the forward-mode
directional derivative (``torch.func.jvp``) of the quantity along the flow's velocity, never
differences of stored trajectory steps (whose O(dt²) error would swamp the identity).

- :func:`energy_identity`: ``dE_multi/dt`` by forward mode against ``c Σ_i ‖ẋ_i‖²`` (Thm 11, usa kind,
  symmetric ``M_h``, ``V_h = M_h``; ``c`` = :meth:`Heads.energy_identity_factor`, ``1/n`` by default);
- :func:`entropy_identity`: ``dH_i/dt`` by forward mode against ``−β² Cov_{p_i}(s, ṡ)`` (Thm 27);
- :func:`trajectory_states`: tokens at evenly spaced times along an RK4 trajectory;
- :func:`energy_monotone`: is a recorded ``log E(t)`` non-decreasing (to a relative slack)?
"""

from __future__ import annotations

import numpy as np
import torch
from torch.func import jvp

from attnlab.core.validation import check_int, check_real, check_tensor
from attnlab.dynamics.field import velocity
from attnlab.dynamics.integrate import Record, simulate
from attnlab.dynamics.model import Heads
from attnlab.dynamics.observables import entropy, entropy_rate, log_energy
from attnlab.dynamics.space import Space

__all__ = ["energy_identity", "energy_monotone", "entropy_identity", "trajectory_states"]


def trajectory_states(
    spec: Heads,
    x0: torch.Tensor,
    beta: float,
    t1: float,
    n_states: int,
    space: str | Space = "sphere",
    dt: float = 0.05,
) -> tuple[np.ndarray, torch.Tensor]:
    """Times (S,) and tokens (S, B, n, d) at ``n_states`` evenly spaced times of RK4 on [0, t1]."""
    check_int("n_states", n_states, min=2)
    t1 = check_real("t1", t1, min=0.0, min_open=True)
    sol = simulate(
        spec,
        x0,
        beta=beta,
        t1=t1,
        dt=dt,
        space=space,
        record=Record(every=t1 / (n_states - 1), observables=(), trajectory=True),
    )
    return sol.t.numpy(), sol.trajectory


def energy_identity(
    spec: Heads, x: torch.Tensor, beta: float, space: str | Space = "sphere"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Relative error of Thm 11's identity at the state ``x`` (B, n, d), and its right side.

    Returns ``(rel_err, rate)``, both (B,): ``rate = c Σ_i ‖ẋ_i‖²`` with ``c`` the heads' energy-identity
    factor, ``rel_err = |dE_multi/dt − rate| / |rate|`` where ``dE_multi/dt`` is the forward-mode
    derivative of ``E_multi`` along the velocity at ``x``. The identity is a theorem for the usa kind
    with symmetric ``M_h`` and ``V_h = M_h``; for other heads the error measures how far it fails.
    """
    check_tensor("x", x, ndim=3)
    n = x.shape[1]

    def total_energy(y: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(log_energy(spec, y, beta), -1).exp()  # (B,)

    c = spec.energy_identity_factor(n)
    v = velocity(spec, x, beta, space)  # (B, n, d)
    lhs = jvp(total_energy, (x,), (v,))[1]  # (B,) directional derivative at the state
    rhs = c * (v * v).sum((-2, -1))  # (B,)
    return (lhs - rhs).abs() / rhs.abs().clamp_min(1e-300), rhs


def entropy_identity(
    spec: Heads, x: torch.Tensor, beta: float, space: str | Space = "sphere"
) -> torch.Tensor:
    """Error of Thm 27's identity at ``x`` (B, n, d), relative to each row's largest rate: (B, H, n).

    ``|entropy_rate − dH/dt| / max_i |dH_i^h/dt|`` with ``dH/dt`` the forward-mode derivative of the
    attention entropies along the velocity (any kind of head: the identity needs only softmax weights).
    """
    check_tensor("x", x, ndim=3)
    v = velocity(spec, x, beta, space)  # (B, n, d)
    ref = jvp(lambda y: entropy(spec, y, beta), (x,), (v,))[1]  # (B, H, n)
    got = entropy_rate(spec, x, beta, v)
    scale = ref.abs().amax(-1, keepdim=True).clamp_min(1e-300)  # per (B, H): the row's largest rate
    return (got - ref).abs() / scale


def energy_monotone(log_energy_series: torch.Tensor | np.ndarray, rtol: float = 1e-12) -> bool:
    """True when a recorded ``log E`` (time first: (T,) or (T, B)) never falls by more than ``rtol``.

    ``log E_{k+1} ≥ log E_k − rtol`` is ``E_{k+1} ≥ E_k (1 − rtol)`` to first order: non-decreasing to
    relative ``rtol``.
    """
    le = torch.as_tensor(log_energy_series).double()
    if le.ndim not in (1, 2) or le.shape[0] < 1:
        raise ValueError(f"log_energy_series: expected shape (T,) or (T, B), got {tuple(le.shape)}")
    rtol = check_real("rtol", rtol, min=0.0)
    return bool(((le[1:] - le[:-1]) >= -rtol).all())
