"""The weight-form HDI null (nulls.weight_null_hdi) against Monte Carlo of Gaussian heads."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.core.geometry import diversity
from attnlab.core.nulls import null_hdi, shape_moments, weight_null_hdi

DT = torch.float64


def _weight_hdis(W: torch.Tensor) -> torch.Tensor:
    """Weight-form HDI of each stack in ``W`` ``(R, H, d, k)``, straight from the definition."""
    R, H, d, k = W.shape
    flat = W.permute(0, 2, 1, 3).reshape(R, d, H * k)  # (R, d, H·k)
    gram = flat.transpose(1, 2) @ flat  # (R, H·k, H·k)
    sq = gram.square().reshape(R, H, k, H, k).sum(dim=(2, 4))  # (R, H, H)
    n = sq.diagonal(dim1=1, dim2=2).sqrt()  # (R, H)
    ov = sq / (n[:, :, None] * n[:, None, :])
    iu = torch.triu_indices(H, H, 1)
    return 1 - ov[:, iu[0], iu[1]].mean(-1)  # (R,)


@pytest.mark.parametrize("d, k, H", [(48, 12, 4), (20, 8, 3), (16, 16, 5)])
def test_gaussian_weight_null_matches_monte_carlo(d: int, k: int, H: int) -> None:
    R = 4000
    W = torch.randn(R, H, d, k, generator=torch.Generator().manual_seed(d + k + H), dtype=DT)
    hdi = _weight_hdis(W)
    mean, sd = weight_null_hdi(d, k, H)
    # the Monte Carlo mean has standard error sd/√R: 4.5 standard errors is a 1e-5 false-alarm rate
    assert abs(float(hdi.mean()) - mean) < 4.5 * sd / math.sqrt(R)
    # the sample sd of R draws has relative standard error ≈ 1/√(2R) ≈ 1.1%; 6% is > 5 of them
    assert float(hdi.std()) == pytest.approx(sd, rel=0.06)
    # and it is NOT the subspace null 1 − k/d (the miscalibration it replaces), unless k = d
    if k < d:
        assert abs(mean - null_hdi(d, k, H)[0]) > 20 * sd / math.sqrt(R)


def test_product_weight_null_matches_monte_carlo() -> None:
    """OV factors F = W_Oᵀ L (L Lᵀ = W_VᵀW_V) of Gaussian W_V, W_O."""
    d, k, H, R = 40, 10, 4, 3000
    g = torch.Generator().manual_seed(7)
    WV = torch.randn(R, H, d, k, generator=g, dtype=DT)
    WO = torch.randn(R, H, k, d, generator=g, dtype=DT)
    L = torch.linalg.cholesky(WV.transpose(-1, -2) @ WV)  # (R, H, k, k)
    hdi = _weight_hdis(WO.transpose(-1, -2) @ L)
    mean, sd = weight_null_hdi(d, k, H, kind="product")
    assert abs(float(hdi.mean()) - mean) < 4.5 * sd / math.sqrt(R)
    assert float(hdi.std()) == pytest.approx(sd, rel=0.07)
    assert mean > weight_null_hdi(d, k, H)[0]  # products spread the spectrum further: less overlap


def test_gaussian_heads_give_z_near_zero() -> None:
    """diversity(form="weight") uses the weight null: i.i.d. Gaussian heads give z ~ N(0, 1)."""
    g = torch.Generator().manual_seed(3)
    z = torch.tensor(
        [diversity(torch.randn(6, 64, 8, generator=g, dtype=DT), form="weight").z for _ in range(300)]
    )
    # mean of 300 standard normals: se 0.058, so |mean| < 0.3 is > 5 se; sd within 15% (se ~4%)
    assert abs(float(z.mean())) < 0.3
    assert float(z.std()) == pytest.approx(1.0, rel=0.15)


def test_shape_moments_closed_form_and_frames() -> None:
    g = torch.Generator().manual_seed(11)
    for d, k in ((24, 6), (16, 16)):
        W = torch.randn(20000, d, k, generator=g, dtype=DT)
        G = W.transpose(1, 2) @ W  # (R, k, k)
        rho = G.diagonal(dim1=1, dim2=2).sum(-1) / torch.linalg.matrix_norm(G)
        # the documented exact identity E[1/ρ²] = (d + k + 1)/(kd + 2); se of the mean < 1e-3 relative
        assert float(rho.square().reciprocal().mean()) == pytest.approx((d + k + 1) / (k * d + 2), rel=3e-3)
        m1, m2 = shape_moments(d, k)
        # against the plain sample moments of 20000 Gaussian heads (relative se ~1e-3)
        assert m1 == pytest.approx(float(rho.mean()), rel=3e-3)
        assert m2 == pytest.approx(float(rho.square().mean()), rel=5e-3)
        assert m1**2 <= m2 + 1e-12  # Jensen
    # k = d = 1: ρ = 1 always, the weight null equals the subspace null
    mean, sd = weight_null_hdi(2, 1, 3)
    assert mean == pytest.approx(null_hdi(2, 1, 3)[0], abs=1e-12)
    assert sd == pytest.approx(null_hdi(2, 1, 3)[1], abs=1e-12)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="k: expected"):
        weight_null_hdi(8, 9, 3)
    with pytest.raises(ValueError, match="H: expected"):
        weight_null_hdi(8, 2, 1)
    with pytest.raises(ValueError, match="kind: expected"):
        shape_moments(8, 2, "uniform")


def test_diversity_with_weight_matches_the_two_direct_forms() -> None:
    from attnlab.core.geometry import diversity_with_weight, overlap_matrix

    W = torch.randn(9, 40, 5, generator=torch.Generator().manual_seed(2), dtype=DT)
    W[3] = W[1] @ torch.randn(5, 5, generator=torch.Generator().manual_seed(4), dtype=DT)  # a shared subspace
    div, wov = diversity_with_weight(W)
    ref = diversity(W)
    assert div.hdi == pytest.approx(ref.hdi, abs=1e-14) and div.z == pytest.approx(ref.z, rel=1e-12)
    # the weight form from SVD factors vs its definition ‖WᵀW'‖²/(‖WᵀW‖‖W'ᵀW'‖): rounding only
    torch.testing.assert_close(wov, overlap_matrix(W, form="weight"), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(div.angles_deg, ref.angles_deg, rtol=0, atol=1e-9, equal_nan=True)
