"""``diversity(form="raw")`` carries the rotation null of ``core.raw_null``: checked by Monte Carlo."""

from __future__ import annotations

import math

import torch

from attnlab.core.geometry import diversity
from attnlab.core.raw_null import raw_diversity

DT = torch.float64


def _haar(n: int, d: int, g: torch.Generator) -> torch.Tensor:
    """``n`` Haar-distributed orthogonal ``d × d`` matrices (QR of Gaussians with the sign fix)."""
    Q, R = torch.linalg.qr(torch.randn(n, d, d, generator=g, dtype=DT))
    return Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)  # (n, d, d)


def _raw_hdi(W: torch.Tensor) -> torch.Tensor:
    """Literal ``1 − mean_{h<h'} ‖W_hᵀ W_h'‖_F² / k²`` for a batch ``(n, H, d, k)`` -> ``(n,)``."""
    n, H, _, k = W.shape
    cross = torch.einsum("nadk,nbdl->nabkl", W, W).square().sum(dim=(-1, -2))  # (n, H, H)
    i, j = torch.triu_indices(H, H, 1)
    return 1.0 - cross[:, i, j].mean(-1) / k**2


def test_raw_form_null_and_z_match_monte_carlo_rotations() -> None:
    g = torch.Generator().manual_seed(11)
    H, d, k, n = 4, 10, 3, 6000
    # heads of unequal scale and anisotropic singular values: the null depends on both
    W = torch.randn(H, d, k, generator=g, dtype=DT) * torch.tensor([0.5, 1.0, 2.0], dtype=DT)
    W = W * torch.tensor([1.0, 0.7, 1.5, 1.1], dtype=DT)[:, None, None]
    div = diversity(W, form="raw")
    ref = raw_diversity(W)
    assert (div.hdi_null, div.hdi_null_sd) == (ref.hdi_null, ref.hdi_null_sd)
    assert math.isclose(div.z, (div.hdi - div.hdi_null) / div.hdi_null_sd, rel_tol=1e-12)
    assert math.isclose(div.hdi, ref.hdi, rel_tol=0, abs_tol=1e-12)
    O = _haar(n * H, d, g).reshape(n, H, d, d)  # an independent rotation per head and draw
    sample = _raw_hdi(O @ W)  # (n,)
    mc_mean, mc_sd = float(sample.mean()), float(sample.std())
    # mean: within 4 standard errors of the Monte Carlo mean (sd/√n ≈ 1.3% of sd)
    assert abs(div.hdi_null - mc_mean) < 4 * mc_sd / math.sqrt(n)
    # sd: the sample sd of n = 6000 draws has relative error ≈ √((κ−1)/(4n)) ≲ 2% for these tails; 8% bound
    assert abs(div.hdi_null_sd / mc_sd - 1) < 0.08
    # the z-score of a rotated copy is a draw from the null: its Monte Carlo z has mean 0 and sd 1
    z_mc = (sample - div.hdi_null) / div.hdi_null_sd
    assert abs(float(z_mc.mean())) < 4 / math.sqrt(n) and abs(float(z_mc.std()) - 1) < 0.08
