"""The attention-indexed data model (docs/highdim.md C1).

Tokens are i.i.d. ``N(0, I_d)``; logits ``Z_ab(S) = (x_aᵀ S x_b − δ_ab Tr S)/√d``; the label noise ``ξ`` is a
symmetric Gaussian matrix with variance ``Δ`` on the diagonal and ``Δ/2`` off it; ``seq2lab`` labels are
``rowsoftmax(β0 (Z(S0) + ξ))`` (T×T) and ``seq2seq`` labels are that matrix times ``X`` (T×d).

Devices: random numbers are drawn on the generator's device (CPU without a generator) and then moved to
the device of the computation, so a CPU generator gives the same draws whatever that device is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_choice, check_int, check_real, check_tensor

__all__ = [
    "TASKS",
    "Dataset",
    "label_noise",
    "mp_target",
    "power_law_target",
    "logits",
    "attention",
    "sample",
]

TASKS = ("seq2lab", "seq2seq")


def _randn(
    *shape: int, generator: torch.Generator | None, dtype: torch.dtype, device: torch.device | str | None
) -> torch.Tensor:
    """Standard normals drawn on the generator's device, then moved to ``device`` (None: stay)."""
    where = draw_device(generator, torch.device("cpu"))
    x = torch.randn(*shape, generator=generator, dtype=dtype, device=where)
    return x if device is None else x.to(device)


def mp_target(
    d: int,
    kappa0: float,
    generator: torch.Generator | None = None,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``S0 = W0ᵀW0/√(p0 d)`` with ``W0 ∈ R^{p0×d}`` i.i.d. N(0,1), ``p0 = round(κ0 d)`` (≥ 1).

    Returns (d, d) float64 on ``device`` (None: the generator's device, CPU without one).
    """
    d = check_int("d", d, min=1)
    kappa0 = check_real("kappa0", kappa0, min=0.0, min_open=True)
    p0 = max(1, round(kappa0 * d))
    W0 = _randn(p0, d, generator=generator, dtype=torch.float64, device=device)  # (p0, d)
    return W0.T @ W0 / math.sqrt(p0 * d)  # (d, d)


def power_law_target(
    d: int,
    gamma: float,
    generator: torch.Generator | None = None,
    *,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``S0 = O diag(s) Oᵀ`` with ``s_i ∝ i^{−γ}``, ``Tr S0²/d = 1`` and ``O`` Haar-orthogonal.

    Returns (d, d) float64 on ``device`` (None: the generator's device, CPU without one); the QR
    factorisation runs there.
    """
    from attnlab.highdim.spectra import power_law_spectrum

    G = _randn(d, d, generator=generator, dtype=torch.float64, device=device)
    s = torch.as_tensor(power_law_spectrum(d, gamma).eigenvalues[::-1].copy(), dtype=torch.float64)
    s = s.to(G.device)
    Q, R = torch.linalg.qr(G)
    Q = Q * torch.sign(torch.diagonal(R))  # Haar measure
    return (Q * s) @ Q.T  # (d, d)


def label_noise(
    n: int,
    tokens: int,
    noise: float,
    generator: torch.Generator | None = None,
    *,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The symmetric Gaussian label noise ``ξ`` of C1, (n, T, T): variance ``Δ`` on the diagonal, ``Δ/2``
    off it (``(G + Gᵀ)/2 · √Δ``, one (n, T, T) draw of standard normals)."""
    G = _randn(n, tokens, tokens, generator=generator, dtype=dtype, device=device)
    return (G + G.transpose(-1, -2)) / 2 * math.sqrt(noise)


def logits(X: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """``Z(S) = (X S Xᵀ − Tr S · I)/√d`` for a batch ``X`` (n, T, d); returns (n, T, T)."""
    d = X.shape[-1]
    Z = X @ S @ X.transpose(-1, -2)  # (n, T, T)
    eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
    return (Z - torch.trace(S) * eye) / math.sqrt(d)


def attention(X: torch.Tensor, S: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """``rowsoftmax(β Z(S))``, (n, T, T)."""
    return torch.softmax(beta * logits(X, S), dim=-1)


@dataclass(frozen=True)
class Dataset:
    """Samples of the attention-indexed model.

    ``X`` (n, T, d); ``y`` noisy labels ((n, T, T) for seq2lab, (n, T, d) for seq2seq); ``y_clean`` the
    labels without noise; ``A`` and ``A_clean`` the noisy and clean attention matrices (n, T, T).
    """

    X: torch.Tensor
    y: torch.Tensor
    y_clean: torch.Tensor
    A: torch.Tensor
    A_clean: torch.Tensor
    task: str


def sample(
    S0: torch.Tensor,
    n: int,
    tokens: int = 2,
    noise: float = 0.0,
    beta0: float = 1.0,
    task: str = "seq2lab",
    generator: torch.Generator | None = None,
) -> Dataset:
    """Draw ``n`` sequences and their labels from the target ``S0`` (d, d).

    Parameters
    ----------
    S0 : torch.Tensor
        Symmetric target (d, d).
    n, tokens : int
        Number of sequences and their length T.
    noise : float
        Label-noise variance Δ (diagonal; Δ/2 off the diagonal).
    beta0 : float
        Target inverse temperature.
    task : {"seq2lab", "seq2seq"}
    generator : torch.Generator, optional
        Draws are made on its device and moved to ``S0``'s device, where the labels are computed.
    """
    S0 = check_tensor("S0", S0, ndim=2)
    if S0.shape[0] != S0.shape[1]:
        raise ValueError(f"S0: expected a square matrix, got shape {tuple(S0.shape)}")
    n = check_int("n", n, min=1)
    T = check_int("tokens", tokens, min=2)
    noise = check_real("noise", noise, min=0.0)
    beta0 = check_real("beta0", beta0, min=0.0)
    task = check_choice("task", task, TASKS)
    d = S0.shape[0]
    X = _randn(n, T, d, generator=generator, dtype=S0.dtype, device=S0.device)  # (n, T, d)
    Z0 = logits(X, S0)  # (n, T, T)
    xi = label_noise(n, T, noise, generator, dtype=S0.dtype, device=S0.device)
    A_clean = torch.softmax(beta0 * Z0, dim=-1)
    A = torch.softmax(beta0 * (Z0 + xi), dim=-1)
    if task == "seq2seq":
        return Dataset(X, A @ X, A_clean @ X, A, A_clean, task)
    return Dataset(X, A, A_clean, A, A_clean, task)
