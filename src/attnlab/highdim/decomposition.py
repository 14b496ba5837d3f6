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

__all__ = ["ErrorDecomposition", "decompose_error"]


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
