"""The split of ‖Ŝ − S0‖²/d along recovered and hidden target directions, against explicit block sums in
a hand-built eigenbasis, and the matrix denoiser η·ReLU(S0 + δZ − ε) against its closed-form limits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.highdim import decompose_by_recovered, denoiser_sample
from attnlab.highdim.decomposition import recovered_blocks


def _basis(d, seed=0):
    q, _ = torch.linalg.qr(
        torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    )
    return q


def test_parts_are_the_blocks_of_the_error_in_the_target_basis():
    d, k = 8, 3
    U = _basis(d)
    s = torch.tensor([5.0, 4.0, 3.0, 1.0, 0.5, 0.2, 0.1, 0.0], dtype=torch.float64)  # distinct
    S0 = (U * s) @ U.T
    M = torch.randn(d, d, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    M = (M + M.T) / 2  # the error written in the target basis, chosen by hand
    S_hat = S0 + U @ M @ U.T
    split = decompose_by_recovered(S_hat, S0, k)
    Mn = M.numpy()
    # the three largest eigenvalues are the first three basis vectors (s sorted descending)
    assert split.approx == pytest.approx(np.sum(Mn[:k, :k] ** 2) / d, rel=1e-12)
    assert split.rotation == pytest.approx(2 * np.sum(Mn[:k, k:] ** 2) / d, rel=1e-12)
    assert split.under == pytest.approx(np.sum(np.diag(Mn)[k:] ** 2) / d, rel=1e-12)
    off = Mn[k:, k:] - np.diag(np.diag(Mn)[k:])
    assert split.over == pytest.approx(np.sum(off**2) / d, rel=1e-12)
    assert split.total == pytest.approx(np.sum(Mn**2) / d, rel=1e-12)
    assert split.parts_sum == pytest.approx(split.total, rel=1e-12)
    with pytest.raises(ValueError, match="n_recovered"):
        decompose_by_recovered(S_hat, S0, d + 1)


def test_denoiser_limits():
    d = 300
    U = _basis(d, 2)
    s = torch.linspace(-1.0, 3.0, d, dtype=torch.float64)
    S0 = (U * s) @ U.T
    # δ = 0: η·ReLU(S0 − ε) exactly, in S0's eigenbasis
    out = denoiser_sample(S0, 0.0, 0.5, 2.0, torch.Generator().manual_seed(0))
    ref = (U * (2.0 * torch.clamp(s - 0.5, min=0.0))) @ U.T
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    # S0 = 0, ε = −10 (no clipping), η = 1: δZ + 10 I, whose off-diagonal second moment is δ²/d per entry
    # and whose spectrum has variance δ² (semicircle); at d = 300 the sample variance is within a few %
    Z = denoiser_sample(
        torch.zeros(d, d, dtype=torch.float64), 0.7, -10.0, 1.0, torch.Generator().manual_seed(1)
    )
    ev = torch.linalg.eigvalsh(Z - 10 * torch.eye(d, dtype=torch.float64)).numpy()
    assert np.var(ev) == pytest.approx(0.49, rel=0.03)
    assert ev.max() == pytest.approx(2 * 0.7, rel=0.05)  # the semicircle's edge 2δ


def test_blocks_sum_to_the_error_and_carry_the_parts():
    # the four block matrices sum to Ŝ − S0, are symmetric, and their squared norms per d are the parts
    # computed by decompose_by_recovered through its own projections (float64 round trips: 1e-12)
    d, k = 9, 3
    U = _basis(d, 4)
    s = torch.tensor([6.0, 4.0, 3.0, 1.5, 1.0, 0.6, 0.3, 0.1, 0.05], dtype=torch.float64)
    S0 = (U * s) @ U.T
    M = torch.randn(d, d, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    S_hat = S0 + (M + M.T) / 2
    blocks = recovered_blocks(S_hat, S0, k)
    torch.testing.assert_close(sum(blocks.values()), S_hat - S0, rtol=0, atol=1e-12)
    split = decompose_by_recovered(S_hat, S0, k)
    for name, B in blocks.items():
        torch.testing.assert_close(B, B.T, rtol=0, atol=1e-12)
        assert float((B**2).sum()) / d == pytest.approx(getattr(split, name), rel=1e-12)
    with pytest.raises(ValueError, match="n_recovered"):
        recovered_blocks(S_hat, S0, -1)
