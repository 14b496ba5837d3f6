"""Projection layouts: how the heads' subspaces sit relative to each other (docs/ensemble.md A1, A4).

Every layout returns ``W`` of shape ``(H, d, d_k)`` with ``W_h = c · U_h``: ``c`` is the projection
scale (default 1) and ``U_h`` a frame — orthonormal columns when ``d_k <= d``; when ``d_k > d`` the
columns cannot be orthonormal and ``U_h`` has orthonormal rows instead (``U_h U_hᵀ = I_d``, a tight
frame), so every such head sees all of ``R^d``.

Layouts
-------
``random``      independent uniformly random subspaces (QR of Gaussian matrices).
``orthogonal``  mutually orthogonal subspaces (needs ``H · d_k <= d``).
``shared``      one random subspace (the same frame) for every head: identical heads.
``controlled``  all pairwise principal angles equal to ``angle_deg`` by construction:
                ``U_h = cos θ · U_0 + sin θ · V_h`` with ``U_0, V_1, …, V_H`` mutually orthogonal frames
                and ``cos² θ = cos φ``, so ``U_hᵀ U_h' = cos φ · I`` for ``h ≠ h'`` and the subspace
                HDI is ``sin² φ`` exactly. ``φ = 0`` is ``shared``, ``φ = 90°`` is ``orthogonal``.
                Needs ``(H + 1) · d_k <= d``.
"""

from __future__ import annotations

import math

import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_choice, check_int, check_real

__all__ = ["LAYOUTS", "projection_layout", "controlled_hdi"]

LAYOUTS = ("random", "orthogonal", "shared", "controlled")


def _frames(n: int, d: int, k: int, generator, dtype, device) -> torch.Tensor:
    """n independent uniformly random frames (n, d, k): orthonormal columns, or rows if k > d.

    The Gaussian draws happen on the generator's device (``device`` without one) and are moved to
    ``device``, where the QR runs.
    """
    draw = draw_device(generator, device)
    if k <= d:
        G = torch.randn(n, d, k, generator=generator, dtype=dtype, device=draw).to(device)  # (n, d, k)
        Q, _ = torch.linalg.qr(G)
        return Q
    G = torch.randn(n, k, d, generator=generator, dtype=dtype, device=draw).to(device)  # (n, k, d)
    Q, _ = torch.linalg.qr(G)  # (n, k, d) orthonormal columns
    return Q.transpose(-1, -2)  # (n, d, k) orthonormal rows


def controlled_hdi(angle_deg: float) -> float:
    """Subspace HDI of the ``controlled`` layout: ``sin²(angle)``."""
    a = check_real("angle_deg", angle_deg, min=0.0, max=90.0)
    return math.sin(math.radians(a)) ** 2


def projection_layout(
    layout: str,
    H: int,
    d: int,
    d_k: int,
    c: float = 1.0,
    angle_deg: float | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Per-head projections ``W_h = c · U_h`` in a named layout.

    Parameters
    ----------
    layout : {"random", "orthogonal", "shared", "controlled"}
    H, d, d_k : int
        Heads, input dimension, per-head dimension.
    c : float
        Projection scale (> 0); the kernel's inverse temperature is ``c² · scale``.
    angle_deg : float, optional
        Pairwise principal angle in degrees, ``[0, 90]`` (``controlled`` only).
    generator : torch.Generator, optional
    dtype, device
        Of the result (random draws happen on the generator's device, then move to ``device``).

    Returns
    -------
    Tensor, shape (H, d, d_k)
    """
    check_choice("layout", layout, LAYOUTS)
    H = check_int("H", H, min=1)
    d = check_int("d", d, min=1)
    d_k = check_int("d_k", d_k, min=1)
    c = check_real("c", c, min=0.0, min_open=True)
    if layout == "controlled":
        if angle_deg is None:
            raise ValueError(
                "angle_deg: expected an angle in [0, 90] degrees for the controlled layout, got None"
            )
        phi = math.radians(check_real("angle_deg", angle_deg, min=0.0, max=90.0))
        if (H + 1) * d_k > d:
            raise ValueError(
                f"d: expected (H + 1)·d_k <= d for the controlled layout, got d = {d} < {(H + 1) * d_k}"
            )
        F = _frames(1, d, (H + 1) * d_k, generator, dtype, device)[0]  # (d, (H+1)·d_k) orthonormal
        U0 = F[:, :d_k]  # (d, d_k) shared part
        V = F[:, d_k:].reshape(d, H, d_k).permute(1, 0, 2)  # (H, d, d_k) private parts
        cos_t = math.sqrt(math.cos(phi))
        sin_t = math.sqrt(max(0.0, 1.0 - cos_t**2))
        return c * (cos_t * U0.unsqueeze(0) + sin_t * V)
    if angle_deg is not None:
        raise ValueError(f"angle_deg: expected None for the {layout} layout, got {angle_deg!r}")
    if layout == "random":
        return c * _frames(H, d, d_k, generator, dtype, device)
    if layout == "shared":
        return c * _frames(1, d, d_k, generator, dtype, device).expand(H, d, d_k).clone()
    if H * d_k > d:
        raise ValueError(f"d: expected H·d_k <= d for mutually orthogonal heads, got d = {d} < {H * d_k}")
    F = _frames(1, d, H * d_k, generator, dtype, device)[0]  # (d, H·d_k)
    return c * F.reshape(d, H, d_k).permute(1, 0, 2).contiguous()  # (H, d, d_k)
