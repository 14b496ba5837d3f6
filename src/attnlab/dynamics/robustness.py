"""How far per-head monotonicity survives approximate orthogonality (docs/flow.md B8, Thm 39).

For each token state, :func:`critical_deltas` measures the margin ``κ`` of per-head monotonicity at
exact orthogonality (``κ = min_h (dE_h/dt)/E_h`` at δ = 0, in units of 1/time with ``‖M_h‖_op = 1``)
and the largest δ on a grid up to which no per-head energy falls, for the family
:meth:`Heads.approx_orthogonal` (``max_{h≠h'} ‖M_h' M_h‖_op = δ`` exactly, same basis for every δ).
Thm 39's quantitative reading is ``δ_crit ≥ c κ`` with a constant ``c > 0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.validation import check_int, check_real, check_tensor
from attnlab.dynamics.field import velocity
from attnlab.dynamics.model import Heads
from attnlab.dynamics.observables import energy_rates

__all__ = ["CriticalDeltas", "critical_deltas"]

#: Relative rate below which a per-head energy counts as falling (rounding slack).
FALL = 1e-12


@dataclass(frozen=True)
class CriticalDeltas:
    """Per state (B,): ``kappa`` the δ = 0 margin; ``delta_ok`` the largest grid δ up to which (inclusive)
    no per-head energy falls (0 when it falls at the first positive δ, or at δ = 0); ``broke`` whether
    some grid δ makes a per-head energy fall; ``deltas`` the grid (D,); ``rate`` (D,) the fraction of
    states with some falling per-head energy at each δ.
    """

    kappa: torch.Tensor
    delta_ok: torch.Tensor
    broke: torch.Tensor
    deltas: np.ndarray
    rate: np.ndarray


def critical_deltas(
    heads: int,
    d: int,
    x: torch.Tensor,
    beta: float,
    space: str,
    deltas: Sequence[float],
    seed: int,
    *,
    value_size: float = 0.0,
) -> CriticalDeltas:
    """Margins at δ = 0 and the largest safe δ of each state ``x`` (B, n, d) (usa kind, strength 1).

    Heads: ``Heads.approx_orthogonal(heads, d, δ)`` from a generator seeded with ``seed`` (the same
    orthonormal blocks for every δ). ``value_size > 0`` breaks the theorem's hypothesis ``V_h = M_h``
    (values perturbed by :meth:`Heads.perturb_values`, the same perturbation for every δ); the margin
    ``κ`` is always that of the aligned heads at δ = 0.
    """
    check_tensor("x", x, ndim=3)
    check_int("heads", heads, min=2)
    grid = np.array(sorted(float(check_real("deltas", v, min=0.0)) for v in deltas))
    if grid.size < 2 or grid[0] != 0.0:
        raise ValueError(f"deltas: expected 0 and at least one positive value, got {list(deltas)}")
    value_size = check_real("value_size", value_size, min=0.0)

    def family(delta: float) -> Heads:
        spec = Heads.approx_orthogonal(heads, d, delta, generator=torch.Generator().manual_seed(seed))
        if value_size > 0:
            spec = spec.perturb_values(value_size, generator=torch.Generator().manual_seed(seed + 1))
        return spec.to(x.device, x.dtype)

    base = Heads.approx_orthogonal(heads, d, 0.0, generator=torch.Generator().manual_seed(seed))
    base = base.to(x.device, x.dtype)
    kappa = energy_rates(base, x, beta, velocity(base, x, beta, space)).rel.min(-1).values  # (B,)
    B = x.shape[0]
    ok = torch.ones(B, dtype=torch.bool, device=x.device)  # no fall at any δ so far
    delta_ok = torch.zeros(B, dtype=x.dtype, device=x.device)
    rate = []
    for delta in grid:
        spec = family(float(delta))
        fell = (energy_rates(spec, x, beta, velocity(spec, x, beta, space)).rel < -FALL).any(-1)  # (B,)
        rate.append(float(fell.double().mean()))
        ok = ok & ~fell
        delta_ok = torch.where(ok, torch.as_tensor(delta, dtype=x.dtype, device=x.device), delta_ok)
    return CriticalDeltas(kappa, delta_ok, ~ok, grid, np.array(rate))
