"""The raw-form HDI null (independent Haar rotations of each head) against Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from attnlab.core.geometry import diversity
from attnlab.core.raw_null import raw_diversity, raw_null_hdi


def _raw_hdi(W: np.ndarray) -> float:
    H, _, k = W.shape
    vals = [np.sum((W[a].T @ W[b]) ** 2) / k**2 for a in range(H) for b in range(a + 1, H)]
    return 1.0 - float(np.mean(vals))


def test_raw_null_moments_match_monte_carlo_over_haar_rotations():
    rng = np.random.default_rng(0)
    H, d, k = 3, 6, 2
    W = rng.normal(size=(H, d, k)) * np.array([0.5, 1.0, 2.0]).reshape(3, 1, 1)  # unequal scales
    mean, sd = raw_null_hdi(torch.from_numpy(W))
    S = 3000
    Os = ortho_group.rvs(d, size=S * H, random_state=1).reshape(S, H, d, d)
    R = np.einsum("shij,hjk->shik", Os, W)  # (S, H, d, k) rotated heads
    G = np.einsum("sadk,sbdl->sabkl", R, R)  # (S, H, H, k, k) cross Gram blocks
    iu = np.triu_indices(H, 1)
    samples = 1.0 - (G**2).sum(axis=(3, 4))[:, iu[0], iu[1]].mean(axis=1) / k**2
    assert samples[0] == pytest.approx(_raw_hdi(R[0]), rel=1e-12)  # vectorised = plain loop
    # Monte Carlo error of the mean is sd/√S ≈ 1.8% of sd; 5 standard errors. The sd's relative
    # error is about √((κ−1)/(4S)) ≈ 2-4% for these skewed overlaps: 15% is a wide margin.
    assert samples.mean() == pytest.approx(mean, abs=5 * sd / math.sqrt(S))
    assert samples.std(ddof=1) == pytest.approx(sd, rel=0.15)


def test_raw_null_reduces_to_the_subspace_null_for_orthonormal_frames():
    # W_h = U_h with orthonormal columns: ‖G‖² = ‖U_hᵀU_h'‖²/k², so HDI_raw = 1 − (1 − HDI_sub)/k
    # and the null's mean and sd follow from the subspace null (k/d mean overlap per pair).
    g = torch.Generator().manual_seed(3)
    U, _ = torch.linalg.qr(torch.randn(4, 12, 3, generator=g, dtype=torch.float64))
    m, sd = raw_null_hdi(U)
    div = diversity(U)
    assert m == pytest.approx(1 - (1 - div.hdi_null) / 3, rel=1e-12)
    assert sd == pytest.approx(div.hdi_null_sd / 3, rel=1e-12)
    r = raw_diversity(U)
    assert r.hdi == pytest.approx(1 - (1 - div.hdi) / 3, rel=1e-12)
    assert r.z == pytest.approx((r.hdi - m) / sd)


def test_raw_null_rejects_bad_input():
    with pytest.raises(ValueError, match="W"):
        raw_null_hdi(torch.zeros(1, 4, 2))
    with pytest.raises(ValueError, match="W"):
        raw_null_hdi(torch.full((2, 4, 2), float("nan")))
