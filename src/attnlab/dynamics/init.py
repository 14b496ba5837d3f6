"""Initial token configurations, batched over independent draws: (B, n, d)."""

from __future__ import annotations

import torch

from attnlab.core.seeding import generator as make_generator
from attnlab.core.validation import check_int, check_real

__all__ = ["clusters", "equiangular", "jittered", "orthogonal", "uniform"]


def _gen(seed: int | None, generator: torch.Generator | None, device) -> torch.Generator | None:
    if generator is not None:
        return generator
    if seed is not None:
        return make_generator(check_int("seed", seed, min=0), "cpu")
    return None


def _haar(batch: int, d: int, g, dtype, device) -> torch.Tensor:
    """Haar-random orthogonal matrices (batch, d, d) (QR with sign correction)."""
    A = torch.randn(batch, d, d, generator=g, dtype=dtype).to(device)  # (B, d, d)
    Q, R = torch.linalg.qr(A)
    return Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[:, None, :]


def uniform(
    *,
    batch: int,
    n: int,
    d: int,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Tokens i.i.d. uniform on the sphere S^{d-1}: normalised Gaussians, shape (batch, n, d)."""
    batch, n, d = check_int("batch", batch, min=1), check_int("n", n, min=1), check_int("d", d, min=1)
    g = _gen(seed, generator, device)
    z = torch.randn(batch, n, d, generator=g, dtype=dtype).to(device)  # (B, n, d)
    return z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)


def equiangular(
    *,
    batch: int,
    n: int,
    d: int,
    gamma: float,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Unit tokens with all ``<x_i, x_j> = gamma`` (i ≠ j), randomly rotated; needs d >= n.

    The Gram matrix ``(1-γ) I + γ 11^T`` is positive semi-definite for γ in [-1/(n-1), 1]; its
    symmetric square root gives n vectors in R^n, embedded in R^d and rotated by a Haar matrix.
    """
    batch, n, d = check_int("batch", batch, min=1), check_int("n", n, min=1), check_int("d", d, min=1)
    lo = -1.0 / (n - 1) if n > 1 else -1.0
    gamma = check_real("gamma", gamma, min=lo, max=1.0)
    if d < n:
        raise ValueError(f"d: expected d >= n = {n} for an equiangular configuration, got {d}")
    G = (1 - gamma) * torch.eye(n, dtype=torch.float64) + gamma * torch.ones(n, n, dtype=torch.float64)
    w, U = torch.linalg.eigh(G)
    root = (U * w.clamp_min(0).sqrt()) @ U.T  # (n, n): rows are the tokens in R^n
    X = torch.zeros(n, d, dtype=torch.float64)
    X[:, :n] = root
    g = _gen(seed, generator, device)
    Q = _haar(batch, d, g, torch.float64, "cpu")  # (B, d, d)
    x = X[None] @ Q.transpose(1, 2)  # (B, n, d)
    x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x.to(device=device, dtype=dtype)


def orthogonal(
    *,
    batch: int,
    n: int,
    d: int,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Pairwise orthogonal unit tokens (random orthonormal frames), shape (batch, n, d); needs d >= n."""
    batch, n, d = check_int("batch", batch, min=1), check_int("n", n, min=1), check_int("d", d, min=1)
    if d < n:
        raise ValueError(f"d: expected d >= n = {n} for pairwise orthogonal tokens, got {d}")
    g = _gen(seed, generator, device)
    Q = _haar(batch, d, g, torch.float64, "cpu")  # (B, d, d)
    return Q[:, :, :n].transpose(1, 2).contiguous().to(device=device, dtype=dtype)  # (B, n, d)


def clusters(
    *,
    batch: int,
    n: int,
    d: int,
    k: int = 2,
    spread: float = 0.1,
    antipodal: bool = True,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Tokens in ``k`` tight clusters: token i near centre ``i mod k``, shape (batch, n, d).

    Centres are uniform random unit vectors (with ``antipodal`` and k = 2: ``±c``); each token is
    ``centre + spread·z`` (Gaussian z), normalised to the sphere.
    """
    batch, n, d = check_int("batch", batch, min=1), check_int("n", n, min=1), check_int("d", d, min=1)
    k = check_int("k", k, min=1, max=n)
    spread = check_real("spread", spread, min=0.0)
    g = _gen(seed, generator, device)
    c = torch.randn(batch, k, d, generator=g, dtype=dtype)  # (B, k, d)
    c = c / torch.linalg.vector_norm(c, dim=-1, keepdim=True)
    if antipodal and k == 2:
        c = torch.stack([c[:, 0], -c[:, 0]], dim=1)
    idx = torch.arange(n) % k
    z = c[:, idx] + spread * torch.randn(batch, n, d, generator=g, dtype=dtype)  # (B, n, d)
    return (z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)).to(device)


def jittered(x: torch.Tensor, spread: float, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Tokens ``x`` (B, n, d) moved by ``spread·z`` (Gaussian z, drawn on CPU), renormalised to the sphere."""
    spread = check_real("spread", spread, min=0.0)
    z = torch.randn(x.shape, generator=generator, dtype=x.dtype).to(x.device)  # (B, n, d)
    y = x + spread * z
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)
