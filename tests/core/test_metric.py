"""Data-metric HDI and Monte Carlo nulls against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.core import geometry
from attnlab.core.metric import batch_hdi as metric_batch
from attnlab.core.metric import covariance, data_metric_diversity, hdi, mc_null, metric_null, metric_root

DT = torch.float64


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_covariance_and_root_match_numpy():
    X = torch.randn(50, 6, generator=_g(0), dtype=DT) @ torch.randn(6, 6, generator=_g(1), dtype=DT)
    S = covariance(X)
    assert np.allclose(S.numpy(), np.cov(X.numpy(), rowvar=False), atol=1e-12)
    R = metric_root(S)
    assert torch.allclose(R, R.T, atol=1e-13) and torch.allclose(R @ R, S, atol=1e-10)
    with pytest.raises(ValueError, match="positive semi-definite"):
        metric_root(-torch.eye(3, dtype=DT))
    with pytest.raises(ValueError, match="symmetric"):
        metric_root(torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=DT))
    with pytest.raises(ValueError, match="rows"):
        covariance(torch.ones(1, 3))


def test_data_metric_hdi_is_the_hdi_of_any_factor_of_sigma():
    """Σ = A Aᵀ: Σ^{1/2} = Q Aᵀ for an orthogonal Q (polar decomposition), so the subspaces of
    Σ^{1/2} W and Aᵀ W differ by one rotation and their overlaps agree: an independent route."""
    H, d, k = 5, 12, 3
    W = torch.randn(H, d, k, generator=_g(2), dtype=DT)
    A = torch.randn(d, d, generator=_g(3), dtype=DT)
    div = data_metric_diversity(W, A @ A.T, samples=16, generator=_g(4))
    assert div.hdi == pytest.approx(geometry.diversity(A.T @ W).hdi, abs=1e-10)
    # identity metric: the plain subspace HDI
    assert data_metric_diversity(W, torch.eye(d, dtype=DT), samples=4).hdi == pytest.approx(
        geometry.diversity(W).hdi, abs=1e-12
    )


def test_mc_null_matches_the_exact_nulls_with_the_identity_metric():
    d, k, H, S = 16, 4, 4, 400
    m, sd = metric_null(d, k, H, None, "subspace", S, _g(5))
    m0, sd0 = geometry.null_hdi(d, k, H)
    # the Monte Carlo mean has standard error sd0/√S ≈ 0.0025: 4 standard errors
    assert abs(m - m0) < 4 * sd0 / S**0.5
    assert sd == pytest.approx(sd0, rel=0.2)  # a sample sd from 400 draws: ~3.5% relative error
    mw, _ = metric_null(d, k, H, None, "weight", S, _g(6))
    mw0, sdw0 = geometry.weight_null_hdi(d, k, H)
    assert abs(mw - mw0) < 4 * sdw0 / S**0.5


def test_anisotropic_metric_lowers_the_null():
    """Heads Σ^{1/2} G lean towards Σ's top directions: more overlap than uniform subspaces."""
    d, k, H = 16, 2, 4
    sigma = torch.diag(torch.tensor([100.0] * 2 + [1.0] * 14, dtype=DT))
    m, _ = metric_null(d, k, H, sigma, "subspace", 200, _g(7))
    assert m < geometry.null_hdi(d, k, H)[0] - 0.2
    # a draw function that ignores its generator gives a zero-spread null
    W = torch.randn(H, d, k, generator=_g(8), dtype=DT)
    mean, sd = mc_null(lambda g, n: W.expand(n, H, d, k), "subspace", 3)
    assert mean == pytest.approx(hdi(W), abs=1e-12) and sd == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("form", ["subspace", "weight"])
def test_batched_hdi_equals_one_stack_at_a_time(form):
    """batch_hdi packs many stacks into one overlap matrix (in chunks): each stack's HDI must be the one
    computed alone (float64 rounding only)."""
    S, H, d, k = 70, 3, 10, 4  # 256 // 12 = 21 stacks per chunk: four chunks
    W = torch.randn(S, H, d, k, generator=_g(9), dtype=DT)
    ref = torch.tensor([hdi(W[s], form) for s in range(S)], dtype=DT)
    assert torch.allclose(metric_batch(W, form), ref, atol=1e-12)
    W = torch.randn(9, 4, 40, 40, generator=_g(10), dtype=DT)  # 160 head columns: one stack per chunk
    ref = torch.tensor([hdi(W[s], form) for s in range(9)], dtype=DT)
    assert torch.allclose(metric_batch(W, form), ref, atol=1e-12)
