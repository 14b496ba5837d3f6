"""Spectral decomposition of the learned matrix's error (docs/highdim.md C6, a documented reconstruction).

In the target eigenbasis ``S0 = U diag(s) Uᵀ`` write ``M = Uᵀ (Ŝ − S0) U`` and split the indices into
``N`` (null directions of the target, ``|s_i| ≤ null_tol · max|s|``), ``R`` (recovered target directions:
``u_iᵀ Ŝ u_i ≥ recover_frac · s_i``) and ``H`` (target directions still hidden). Per ``d``:

* ``over``     = ``‖M_NN‖²/d``: what the student learned where the target is empty (the noise bulk);
* ``under``    = ``‖M_HH‖²/d``: target directions not recovered (mostly the missing ``s_i²``);
* ``approx``   = ``‖M_RR‖²/d``: residual error along recovered directions (shrinkage of the outliers);
* ``mismatch`` = ``2(‖M_RH‖² + ‖M_RN‖² + ‖M_HN‖²)/d``: learned directions rotated away from the target
  eigenbasis (the off-diagonal blocks).

Each part is computed by its own projection; ``total = ‖Ŝ − S0‖_F²/d`` is computed directly, so that
"the parts sum to the total" checks the split (it holds by orthogonality of the blocks). Through
``Q0 + q − 2m = ‖Ŝ − S0‖²/d`` this is the error that, with ``q``, fixes the test error of C3.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from attnlab.core.validation import check_real, check_tensor

__all__ = [
    "ErrorDecomposition",
    "RecoveredSplit",
    "decompose_by_recovered",
    "decompose_error",
    "denoiser_sample",
    "recovered_blocks",
]


@dataclass(frozen=True)
class ErrorDecomposition:
    """Parts of ``‖Ŝ − S0‖²/d`` (module docstring) and the directly computed total."""

    over: float
    under: float
    approx: float
    mismatch: float
    total: float
    n_recovered: int
    n_hidden: int
    n_null: int

    @property
    def parts_sum(self) -> float:
        return self.over + self.under + self.approx + self.mismatch

    def to_dict(self) -> dict:
        return asdict(self) | {"parts_sum": self.parts_sum}


def decompose_error(
    S_hat: torch.Tensor, S0: torch.Tensor, *, recover_frac: float = 0.5, null_tol: float = 1e-8
) -> ErrorDecomposition:
    """Decompose ``‖Ŝ − S0‖_F²/d`` into over-, under-fitting, approximation and mismatch parts.

    Parameters
    ----------
    S_hat, S0 : torch.Tensor
        Learned and target symmetric matrices (d, d); computed on ``S_hat``'s device.
    recover_frac : float
        A target direction counts as recovered when ``u_iᵀ Ŝ u_i ≥ recover_frac · s_i``.
    null_tol : float
        Relative size below which a target eigenvalue counts as zero.
    """
    S0 = check_tensor("S0", S0, ndim=2).to(torch.float64)
    S_hat = check_tensor("S_hat", S_hat, shape=tuple(S0.shape)).to(torch.float64)
    S0 = S0.to(S_hat.device)  # the eigen-decomposition and projections run on Ŝ's device
    recover_frac = check_real("recover_frac", recover_frac, min=0.0)
    null_tol = check_real("null_tol", null_tol, min=0.0)
    d = S0.shape[0]
    s, U = torch.linalg.eigh(S0)  # (d,), (d, d)
    rq = torch.einsum("di,de,ei->i", U, S_hat, U)  # (d,) Rayleigh quotients u_iᵀ Ŝ u_i
    null = s.abs() <= null_tol * s.abs().max()
    rec = ~null & (rq >= recover_frac * s)
    hid = ~null & ~rec

    def block(a: torch.Tensor, b: torch.Tensor) -> float:
        Pa, Pb = U[:, a], U[:, b]  # (d, |a|), (d, |b|)
        return float(((Pa.T @ (S_hat - S0) @ Pb) ** 2).sum()) / d

    return ErrorDecomposition(
        over=block(null, null),
        under=block(hid, hid),
        approx=block(rec, rec),
        mismatch=2 * (block(rec, hid) + block(rec, null) + block(hid, null)),
        total=float(((S_hat - S0) ** 2).sum()) / d,
        n_recovered=int(rec.sum()),
        n_hidden=int(hid.sum()),
        n_null=int(null.sum()),
    )


@dataclass(frozen=True)
class RecoveredSplit:
    """Parts of ``‖Ŝ − S0‖²/d`` for a split of the target eigenbasis into the ``n_recovered`` strongest
    directions ``R`` and the rest ``H`` (see :func:`decompose_by_recovered`)."""

    over: float
    under: float
    approx: float
    rotation: float
    total: float
    n_recovered: int

    @property
    def parts_sum(self) -> float:
        return self.over + self.under + self.approx + self.rotation

    def to_dict(self) -> dict:
        return asdict(self) | {"parts_sum": self.parts_sum}


def decompose_by_recovered(S_hat: torch.Tensor, S0: torch.Tensor, n_recovered: int) -> RecoveredSplit:
    """Split ``‖Ŝ − S0‖_F²/d`` along the ``n_recovered`` largest target eigenvalues (``R``, the outliers the
    theory says are recovered) and the other target directions (``H``: hidden directions and the null
    space). With ``M = Uᵀ(Ŝ − S0)U`` in the target eigenbasis, per ``d``:

    * ``under``    = ``Σ_{i∈H} (M_ii)²``: the error along each hidden target direction (target eigenvalues
      not recovered: mostly the missing ``s_i``);
    * ``over``     = ``Σ_{i≠j∈H} M_ij²``: structure the student put in the hidden block that is not along
      any target direction (the fitted noise bulk);
    * ``approx``   = ``‖M_RR‖²``: residual error along the recovered outliers (their shrinkage);
    * ``rotation`` = ``2‖M_RH‖²``: recovered directions rotated into the hidden block. The paper's
      "mismatch" (a saturation value that misses the optimum of the generalisation error) is not defined
      from the matrices alone; this off-diagonal part takes its place under its own name.

    The hidden directions are the target's eigenvectors, so ``under`` and ``over`` need distinct target
    eigenvalues there (a power law has them; a degenerate eigenspace, such as a null space, has no
    preferred basis and ``torch.linalg.eigh`` picks one). ``under + over = ‖M_HH‖²/d``, so the four parts
    sum to the total by orthogonality of the blocks; each is computed on its own, and the total directly.
    """
    S0 = check_tensor("S0", S0, ndim=2).to(torch.float64)
    S_hat = check_tensor("S_hat", S_hat, shape=tuple(S0.shape)).to(torch.float64)
    S0 = S0.to(S_hat.device)
    d = S0.shape[0]
    if not isinstance(n_recovered, int) or isinstance(n_recovered, bool) or not 0 <= n_recovered <= d:
        raise ValueError(f"n_recovered: expected an integer in [0, {d}], got {n_recovered!r}")
    s, U = torch.linalg.eigh(S0)  # ascending
    order = torch.argsort(s, descending=True)
    s, U = s[order], U[:, order]
    R, H = U[:, :n_recovered], U[:, n_recovered:]  # (d, k), (d, d − k)
    D = S_hat - S0
    M_HH = H.T @ D @ H  # (d − k, d − k)
    diag = torch.diagonal(M_HH)
    under = float((diag**2).sum()) / d
    over = float((M_HH**2).sum() - (diag**2).sum()) / d
    approx = float(((R.T @ D @ R) ** 2).sum()) / d
    rotation = 2 * float(((R.T @ D @ H) ** 2).sum()) / d
    return RecoveredSplit(over, under, approx, rotation, float((D**2).sum()) / d, n_recovered)


def recovered_blocks(S_hat: torch.Tensor, S0: torch.Tensor, n_recovered: int) -> dict[str, torch.Tensor]:
    """The error ``Ŝ − S0`` as four symmetric matrices, one per part of :func:`decompose_by_recovered`,
    that sum to it: with ``R``/``H`` the ``n_recovered`` strongest target eigenvectors and the rest and
    ``M = Uᵀ(Ŝ − S0)U``, ``approx = R M_RR Rᵀ``, ``rotation = R M_RH Hᵀ + H M_HR Rᵀ``,
    ``under = H diag(M_HH) Hᵀ`` and ``over = H (M_HH − diag M_HH) Hᵀ``. ``‖part‖_F²/d`` is the part's value
    in :func:`decompose_by_recovered`; ``S0 + part`` is a matrix whose test error is the part's share of the
    excess error.
    """
    S0 = check_tensor("S0", S0, ndim=2).to(torch.float64)
    S_hat = check_tensor("S_hat", S_hat, shape=tuple(S0.shape)).to(torch.float64)
    S0 = S0.to(S_hat.device)
    d = S0.shape[0]
    if not isinstance(n_recovered, int) or isinstance(n_recovered, bool) or not 0 <= n_recovered <= d:
        raise ValueError(f"n_recovered: expected an integer in [0, {d}], got {n_recovered!r}")
    s, U = torch.linalg.eigh(S0)
    U = U[:, torch.argsort(s, descending=True)]
    R, H = U[:, :n_recovered], U[:, n_recovered:]  # (d, k), (d, d − k)
    D = S_hat - S0
    M_RH = R.T @ D @ H  # (k, d − k)
    M_HH = H.T @ D @ H  # (d − k, d − k)
    dg = torch.diag(torch.diagonal(M_HH))
    return {
        "over": H @ (M_HH - dg) @ H.T,
        "under": H @ dg @ H.T,
        "approx": R @ (R.T @ D @ R) @ R.T,
        "rotation": R @ M_RH @ H.T + H @ M_RH.T @ R.T,
    }


def denoiser_sample(
    S0: torch.Tensor, delta: float, eps: float, eta: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One draw of ``η · ReLU(S0 + δZ − εI)`` (eigenvalue-wise), ``Z`` from the GOE with semicircle on
    ``[−2, 2]``: the matrix the learned ``Ŝ`` equals in law at the state-evolution fixed point
    (docs/highdim.md C4).
    ``Z`` is drawn on the generator's device (CPU without one) and moved to ``S0``'s."""
    S0 = check_tensor("S0", S0, ndim=2).to(torch.float64)
    delta = check_real("delta", delta, min=0.0)
    eps = check_real("eps", eps)
    eta = check_real("eta", eta, min=0.0)
    d = S0.shape[0]
    dev = generator.device if generator is not None else "cpu"
    G = torch.randn(d, d, generator=generator, dtype=torch.float64, device=dev).to(S0.device)
    Z = (G + G.T) / (2 * d) ** 0.5  # (d, d): off-diagonal variance 1/d, diagonal 2/d
    w, V = torch.linalg.eigh(S0 + delta * Z - eps * torch.eye(d, dtype=torch.float64, device=S0.device))
    return eta * (V * torch.clamp(w, min=0.0)) @ V.T  # (d, d)
