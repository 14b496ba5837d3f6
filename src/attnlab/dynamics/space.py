"""Geometries for the token dynamics: the unit sphere and flat space (docs/flow.md B1).

A space turns a raw velocity ``v`` into the velocity of the flow (``tangent``) and maps an
integrator's step back onto the manifold (``retract``). The vector field and the integrators
know nothing of the geometry beyond these two maps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Space", "Sphere", "Flat", "get_space"]


@dataclass(frozen=True)
class Space:
    """Base class: flat geometry (identity tangent map and retraction)."""

    name: str = "flat"

    def tangent(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The flow's velocity at ``x`` (..., d) given the raw velocity ``v`` (..., d)."""
        return v

    def retract(self, x: torch.Tensor) -> torch.Tensor:
        """Map a point after a step back to the manifold."""
        return x

    def radial(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The radial part ``<x, v>`` removed by :meth:`tangent` (zero in flat space)."""
        return torch.zeros_like(v[..., 0])


@dataclass(frozen=True)
class Flat(Space):
    """R^d: ``x' = v``."""

    name: str = "flat"


@dataclass(frozen=True)
class Sphere(Space):
    """The unit sphere: ``x' = P⊥_x v = v - <x, v> x``; retraction ``x / ||x||``."""

    name: str = "sphere"

    def tangent(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return v - (x * v).sum(-1, keepdim=True) * x

    def retract(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)

    def radial(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (x * v).sum(-1)


def get_space(space: str | Space) -> Space:
    """``"sphere"`` / ``"flat"`` or a :class:`Space` instance."""
    if isinstance(space, Space):
        return space
    if space == "sphere":
        return Sphere()
    if space == "flat":
        return Flat()
    raise ValueError(f"space: expected 'sphere', 'flat' or a Space, got {space!r}")
