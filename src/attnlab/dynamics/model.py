"""Head specifications for the multi-head self-attention dynamics (docs/flow.md B1).

A :class:`Heads` holds the score matrices ``M`` (H, d, d) and values ``V`` (H, d, d) in the column
convention of docs/flow.md B (a head scores ``<x_i, M_h x_j>`` and moves along ``V_h x_j``), the kind of
head output (``usa``, ``softmax``, ``relu``), how heads combine (``sum`` or ``mean``) and the velocity
scale (``1`` or ``1/n``, a rescaling of time). The inverse temperature β is not part of the spec: it is
passed to the vector field and to :func:`attnlab.dynamics.simulate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_choice, check_int, check_real, check_tensor

__all__ = ["KINDS", "COMBINES", "SCALES", "Heads"]

KINDS = ("usa", "softmax", "relu")
COMBINES = ("sum", "mean")
SCALES = ("1", "1/n")


@dataclass(frozen=True)
class Heads:
    """H attention heads acting on tokens in R^d.

    Parameters
    ----------
    M : torch.Tensor, shape (H, d, d)
        Score matrices: head h scores the pair (i, j) by ``<x_i, M_h x_j>``.
    V : torch.Tensor, shape (H, d, d)
        Value matrices: head h aggregates ``V_h x_j``.
    kind : {"usa", "softmax", "relu"}
        Head output (docs/flow.md B1): unnormalised exponential weights divided by n, per-head softmax,
        or ReLU weights divided by n.
    combine : {"sum", "mean"}
        ``v_i = sum_h f_i^h`` or its mean over heads.
    scale : {"1", "1/n"}
        Velocity multiplied by 1 or by 1/n (the latter only rescales time).
    """

    M: torch.Tensor  # (H, d, d)
    V: torch.Tensor  # (H, d, d)
    kind: str = "softmax"
    combine: str = "sum"
    scale: str = "1"
    label: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        check_tensor("M", self.M, ndim=3)
        check_tensor("V", self.V, ndim=3)
        if self.M.shape[1] != self.M.shape[2]:
            raise ValueError(f"M: expected shape (H, d, d), got {tuple(self.M.shape)}")
        if self.V.shape != self.M.shape:
            raise ValueError(
                f"V: expected shape {tuple(self.M.shape)} (that of M), got {tuple(self.V.shape)}"
            )
        check_choice("kind", self.kind, KINDS)
        check_choice("combine", self.combine, COMBINES)
        check_choice("scale", self.scale, SCALES)

    # ------------------------------------------------------------------ properties
    @property
    def H(self) -> int:
        """Number of heads."""
        return int(self.M.shape[0])

    @property
    def d(self) -> int:
        """Token dimension."""
        return int(self.M.shape[1])

    @property
    def symmetric(self) -> bool:
        """Whether every ``M_h`` is symmetric (to 1e-12 relative)."""
        tol = 1e-12 * max(1.0, float(self.M.abs().max()))
        return bool((self.M - self.M.transpose(1, 2)).abs().max() <= tol)

    @property
    def aligned(self) -> bool:
        """Whether ``V_h = M_h`` for every head (value alignment)."""
        return bool(torch.equal(self.M, self.V))

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> Heads:
        """A copy on ``device`` and/or with ``dtype``."""
        return Heads(
            self.M.to(device=device, dtype=dtype),
            self.V.to(device=device, dtype=dtype),
            self.kind,
            self.combine,
            self.scale,
            self.label,
        )

    def replace(self, **changes: object) -> Heads:
        """A copy with some fields changed (``kind``, ``combine``, ``scale``, ``M``, ``V``)."""
        kw = dict(
            M=self.M, V=self.V, kind=self.kind, combine=self.combine, scale=self.scale, label=self.label
        )
        kw.update(changes)
        return Heads(**kw)  # type: ignore[arg-type]

    def head_factor(self) -> float:
        """The factor applied to the sum over heads (1 for ``sum``, 1/H for ``mean``)."""
        return 1.0 if self.combine == "sum" else 1.0 / self.H

    def velocity_factor(self, n: int) -> float:
        """The overall velocity factor (1, or 1/n for ``scale='1/n'``)."""
        return 1.0 if self.scale == "1" else 1.0 / n

    def energy_identity_factor(self, n: int) -> float:
        """c with ``dE_multi/dt = c * sum_i ||x_i'||^2`` (usa kind, symmetric, ``V = M``).

        ``grad_{x_i} E_multi = sum_h f_i^h / n = v_i / (n * head_factor * velocity_factor)``, so
        ``c = 1 / (n * head_factor * velocity_factor)``: ``1/n`` by default, 1 with ``scale='1/n'``,
        ``H/n`` with ``combine='mean'``.
        """
        return 1.0 / (n * self.head_factor() * self.velocity_factor(n))

    # ------------------------------------------------------------------ constructors
    @staticmethod
    def _opts(kind: str, combine: str, scale: str) -> dict[str, str]:
        return dict(kind=kind, combine=combine, scale=scale)

    @classmethod
    def from_matrices(
        cls,
        M: torch.Tensor,
        V: torch.Tensor | None = None,
        *,
        kind: str = "softmax",
        combine: str = "sum",
        scale: str = "1",
    ) -> Heads:
        """Heads from score matrices ``M`` (H, d, d) and values ``V`` (default: ``V = M``)."""
        check_tensor("M", M, ndim=3)
        return cls(M, M.clone() if V is None else V, label="custom", **cls._opts(kind, combine, scale))

    @classmethod
    def scalar(
        cls,
        strengths: Sequence[float],
        *,
        d: int = 3,
        kind: str = "softmax",
        combine: str = "sum",
        scale: str = "1",
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> Heads:
        """Scalar heads ``M_h = V_h = λ_h I_d`` (docs/flow.md B4, B5)."""
        if len(strengths) < 1:
            raise ValueError("strengths: expected at least one head strength, got an empty sequence")
        lam = torch.tensor(
            [check_real("strengths", s) for s in strengths], dtype=dtype, device=device
        )  # (H,)
        d = check_int("d", d, min=1)
        M = lam[:, None, None] * torch.eye(d, dtype=dtype, device=device)  # (H, d, d)
        return cls(M, M.clone(), label="scalar", **cls._opts(kind, combine, scale))

    @classmethod
    def random_symmetric(
        cls,
        heads: int,
        d: int,
        *,
        generator: torch.Generator | None = None,
        scale_norm: float = 1.0,
        kind: str = "usa",
        combine: str = "sum",
        scale: str = "1",
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> Heads:
        """Random symmetric ``M_h = (G + G^T)/2`` normalised to operator norm ``scale_norm``;
        ``V_h = M_h``."""
        H = check_int("heads", heads, min=1)
        d = check_int("d", d, min=1)
        s = check_real("scale_norm", scale_norm, min=0.0)
        G = torch.randn(H, d, d, generator=generator, dtype=dtype, device=draw_device(generator, device))
        G = G.to(device)  # (H, d, d) drawn where the generator lives
        M = 0.5 * (G + G.transpose(1, 2))
        M = M / torch.linalg.matrix_norm(M, ord=2)[:, None, None] * s
        return cls(M, M.clone(), label="random-symmetric", **cls._opts(kind, combine, scale))

    @classmethod
    def orthogonal_subspaces(
        cls,
        heads: int,
        d: int,
        *,
        strength: float | Sequence[float] = 1.0,
        generator: torch.Generator | None = None,
        rank: int | None = None,
        random_within: bool = False,
        kind: str = "usa",
        combine: str = "sum",
        scale: str = "1",
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> Heads:
        """Heads on mutually orthogonal subspaces: ``M_h = V_h = λ_h P_h`` (``M_h' M_h = 0`` for h ≠ h').

        ``P_h`` projects onto a block of ``rank`` (default ``d // heads``) directions of a random
        orthonormal basis (the standard basis if ``generator`` is None). With ``random_within`` the
        head is a random symmetric matrix supported on its block (operator norm λ_h) instead of λ_h P_h.
        """
        H = check_int("heads", heads, min=1)
        d = check_int("d", d, min=1)
        r = d // H if rank is None else check_int("rank", rank, min=1)
        if r < 1 or r * H > d:
            raise ValueError(
                f"rank: expected heads*rank <= d = {d} and rank >= 1, got rank {r} with {H} heads"
            )
        lam = _strengths("strength", strength, H, dtype, device)  # (H,)
        if generator is None:
            Q = torch.eye(d, dtype=dtype, device=device)
        else:
            G = torch.randn(d, d, generator=generator, dtype=dtype, device=draw_device(generator, device))
            Q, _ = torch.linalg.qr(G.to(device))  # (d, d)
        U = Q[:, : H * r].reshape(d, H, r).permute(1, 0, 2)  # (H, d, r) orthonormal blocks
        if random_within:
            G = torch.randn(H, r, r, generator=generator, dtype=dtype, device=draw_device(generator, device))
            G = G.to(device)  # (H, r, r)
            S = 0.5 * (G + G.transpose(1, 2))
            S = S / torch.linalg.matrix_norm(S, ord=2)[:, None, None]  # (H, r, r)
        else:
            S = torch.eye(r, dtype=dtype, device=device).expand(H, r, r)
        M = lam[:, None, None] * (U @ S @ U.transpose(1, 2))  # (H, d, d)
        return cls(M, M.clone(), label="orthogonal", **cls._opts(kind, combine, scale))

    @classmethod
    def approx_orthogonal(
        cls,
        heads: int,
        d: int,
        delta: float,
        *,
        strength: float = 1.0,
        generator: torch.Generator | None = None,
        kind: str = "usa",
        combine: str = "sum",
        scale: str = "1",
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> Heads:
        """Approximately orthogonal heads with ``max_{h≠h'} ||M_h' M_h||_op = delta`` exactly.

        Starts from λ P_h on orthogonal blocks and adds to each head a symmetric coupling
        ``ε (u_h w_h^T + w_h u_h^T)`` between a unit vector ``u_h`` of its own block and a unit vector
        ``w_h`` of the next head's block; ε is found by bisection so that the largest cross product
        norm equals ``delta`` (0 gives exact orthogonality). ``V_h = M_h``.
        """
        H = check_int("heads", heads, min=2)
        delta = check_real("delta", delta, min=0.0)
        base = cls.orthogonal_subspaces(
            H, d, strength=strength, generator=generator, dtype=dtype, device=device
        )
        if delta == 0.0:
            return base.replace(kind=kind, combine=combine, scale=scale, label="approx-orthogonal")
        P = base.M / strength  # (H, d, d) projectors
        # a unit vector in each head's block: the projector's column at its largest diagonal entry
        idx = torch.argmax(P.diagonal(dim1=1, dim2=2), dim=1)  # a basis direction inside each block
        U = P[torch.arange(H), :, idx]  # (H, d)
        U = U / U.norm(dim=1, keepdim=True)
        W = U.roll(-1, dims=0)  # (H, d) the next head's direction

        def build(eps: float) -> torch.Tensor:
            C = U[:, :, None] * W[:, None, :] + W[:, :, None] * U[:, None, :]  # (H, d, d)
            return base.M + eps * C

        def cross(Mt: torch.Tensor) -> float:
            prod = Mt[:, None] @ Mt[None, :]  # (H, H, d, d): M_h' M_h
            nrm = torch.linalg.matrix_norm(prod, ord=2)  # (H, H)
            nrm = nrm.masked_fill(torch.eye(H, dtype=torch.bool, device=nrm.device), 0.0)
            return float(nrm.max())

        lo, hi = 0.0, 1.0
        while cross(build(hi)) < delta:
            hi *= 2.0
            if hi > 1e6:
                raise ValueError(f"delta: expected a reachable cross-product norm, got {delta}")
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if cross(build(mid)) < delta:
                lo = mid
            else:
                hi = mid
        M = build(0.5 * (lo + hi))
        return cls(M, M.clone(), label="approx-orthogonal", **cls._opts(kind, combine, scale))

    def cross_norm(self) -> float:
        """``max_{h≠h'} ||M_h' M_h||_op`` (0 for mutually orthogonal subspaces)."""
        if self.H < 2:
            return 0.0
        prod = self.M[:, None] @ self.M[None, :]  # (H, H, d, d)
        nrm = torch.linalg.matrix_norm(prod, ord=2)
        nrm = nrm.masked_fill(torch.eye(self.H, dtype=torch.bool, device=nrm.device), 0.0)
        return float(nrm.max())

    def perturb_values(self, size: float, generator: torch.Generator | None = None) -> Heads:
        """``V_h = M_h + size * ||M_h||_op * G_h / ||G_h||_op`` with Gaussian ``G_h`` (Thm 12 probes)."""
        size = check_real("size", size, min=0.0)
        draw = draw_device(generator, self.M.device)
        G = torch.randn(self.M.shape, generator=generator, dtype=self.M.dtype, device=draw).to(self.M.device)
        G = G / torch.linalg.matrix_norm(G, ord=2)[:, None, None]
        s = torch.linalg.matrix_norm(self.M, ord=2)[:, None, None]  # (H, 1, 1)
        return self.replace(V=self.M + size * s * G, label=self.label + "+perturbed")


def _strengths(name: str, value: float | Sequence[float], H: int, dtype, device) -> torch.Tensor:
    if isinstance(value, (int, float)):
        vals = [check_real(name, value)] * H
    else:
        vals = [check_real(name, v) for v in value]
        if len(vals) != H:
            raise ValueError(f"{name}: expected {H} strengths, got {len(vals)}")
    return torch.tensor(vals, dtype=dtype, device=device)
