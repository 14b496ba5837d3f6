"""Subspace geometry (docs/ensemble.md A3): principal angles, overlap forms, HDI, null model, ceiling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.core.geometry import (
    diversity,
    hdi_ceiling,
    null_hdi,
    null_principal_angles,
    orthonormal_basis,
    overlap_matrix,
    principal_angles,
)

DT = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _orthogonal_heads(H: int, d: int, k: int, seed: int = 0) -> torch.Tensor:
    Q, _ = torch.linalg.qr(torch.randn(d, H * k, generator=_gen(seed), dtype=DT))  # (d, H·k)
    return Q.reshape(d, H, k).permute(1, 0, 2).contiguous()  # (H, d, k)


def _random_null_hdis(d: int, k: int, H: int, reps: int, seed: int, chunk: int = 100) -> np.ndarray:
    """Independent Monte Carlo of the random-subspace HDI (QR of Gaussians, plain Frobenius sums)."""
    g = _gen(seed)
    out = []
    iu = torch.triu_indices(H, H, 1)
    for s in range(0, reps, chunk):
        r = min(chunk, reps - s)
        Q, _ = torch.linalg.qr(torch.randn(r, H, d, k, generator=g, dtype=DT))  # (r, H, d, k)
        flat = Q.permute(0, 2, 1, 3).reshape(r, d, H * k)  # (r, d, H·k)
        G = flat.transpose(1, 2) @ flat  # (r, H·k, H·k), blocks U_hᵀ U_g
        sq = G.square().reshape(r, H, k, H, k).sum(dim=(2, 4))  # (r, H, H)
        s_pair = sq[:, iu[0], iu[1]] / k  # (r, P)
        out.append((1 - s_pair.mean(dim=1)).numpy())
    return np.concatenate(out)


# ---------------------------------------------------------------------------------- reference points


def test_identical_heads_hdi_zero_in_subspace_and_weight_forms():
    W = torch.randn(1, 20, 4, generator=_gen(1), dtype=DT).repeat(5, 1, 1)
    # different scales and invertible right factors do not change the subspace
    W = W * torch.tensor([1.0, 2.0, 0.5, 3.0, 7.0], dtype=DT).view(5, 1, 1)
    W[2] = W[2] @ torch.randn(4, 4, generator=_gen(2), dtype=DT)
    div = diversity(W)
    # rounding of ~1e-15 per entry; 1e-12 leaves three orders of margin
    assert div.hdi == pytest.approx(0.0, abs=1e-12)
    assert float(div.angles_deg.abs().max()) < 1e-5  # sine-based small angles: accurate far below 1e-5°
    # the weight form ignores scale but not the right factor; unscaled identical heads give 0
    Wi = torch.randn(1, 20, 4, generator=_gen(3), dtype=DT).repeat(3, 1, 1) * 5.0
    assert diversity(Wi, form="weight").hdi == pytest.approx(0.0, abs=1e-12)


def test_orthogonal_heads_hdi_one():
    W = _orthogonal_heads(8, 64, 8) * 2.5
    for form in ("subspace", "weight"):
        div = diversity(W, form=form)
        assert div.hdi == pytest.approx(1.0, abs=1e-12)  # overlaps are ~1e-30 (squares of 1e-15)
    div = diversity(W)
    assert div.mean_angle_deg == pytest.approx(90.0, abs=1e-9)
    assert div.ceiling == 1.0


def test_raw_form_is_the_literal_formula_and_not_zero_for_identical_unit_heads():
    W = _orthogonal_heads(1, 30, 5).repeat(3, 1, 1)  # identical orthonormal frames
    # literal G = WᵀW/d_k = I/k, ‖G‖² = 1/k: HDI_raw = 1 − 1/k, not 0 (the reason for the default form)
    assert diversity(W, form="raw").hdi == pytest.approx(1 - 1 / 5, abs=1e-14)
    W2 = torch.randn(4, 12, 3, generator=_gen(4), dtype=DT)
    ov = overlap_matrix(W2, form="raw")
    direct = torch.stack([torch.stack([((a.T @ b) / 3).square().sum() for b in W2]) for a in W2])
    torch.testing.assert_close(ov, direct, rtol=1e-13, atol=0)
    assert math.isfinite(diversity(W2, form="raw").hdi_null)  # the rotation null (test_geometry_raw_null.py)


def test_weight_form_matches_its_definition():
    W = torch.randn(5, 9, 3, generator=_gen(5), dtype=DT)
    ov = overlap_matrix(W, form="weight")
    for a in range(5):
        for b in range(5):
            num = (W[a].T @ W[b]).square().sum()
            den = torch.linalg.norm(W[a].T @ W[a]) * torch.linalg.norm(W[b].T @ W[b])
            assert float(ov[a, b]) == pytest.approx(float(num / den), rel=1e-12)


def test_null_reference_values():
    m, sd = null_hdi(384, 32, 12)
    assert m == pytest.approx(1 - 32 / 384, abs=1e-15)
    assert round(m, 6) == 0.916667
    assert sd == pytest.approx(4.15e-4, rel=2e-3)  # docs/ensemble.md quotes three digits
    # standard MHA: H·d_k = d gives 1 − 1/H
    assert null_hdi(768, 64, 12)[0] == pytest.approx(1 - 1 / 12, abs=1e-15)


def test_null_mean_and_sd_confirmed_by_monte_carlo_small():
    d, k, H, reps = 20, 3, 5, 6000
    h = _random_null_hdis(d, k, H, reps, seed=11, chunk=2000)
    m, sd = null_hdi(d, k, H)
    # mean: standard error sd/√reps; 4 SE. sd: relative SE 1/√(2 reps) = 0.9%; 4 SE = 3.7%
    assert abs(h.mean() - m) < 4 * sd / math.sqrt(reps)
    assert h.std() == pytest.approx(sd, rel=0.037)


def test_null_reference_confirmed_by_monte_carlo_d384():
    # one pair's overlap s = ‖UᵀU'‖²/k by Monte Carlo (one subspace fixed to the axes: rotation
    # invariance); the pairwise-uncorrelated step to sd(HDI) is checked in full at small d above
    d, k, H, reps = 384, 32, 12, 3000
    Q, _ = torch.linalg.qr(torch.randn(reps, d, k, generator=_gen(12), dtype=DT))  # (reps, d, k)
    s = Q[:, :k, :].square().sum(dim=(1, 2)).numpy() / k  # (reps,)
    m, sd = null_hdi(d, k, H)
    P = H * (H - 1) // 2
    var_s = 2 * (d - k) ** 2 / (d * d * (d - 1) * (d + 2))
    assert abs(1 - s.mean() - m) < 4 * math.sqrt(var_s / reps)  # 4 standard errors
    # sample variance: relative SE √(2/reps) = 2.6% (near-Gaussian s); 4 SE = 10%
    assert s.var() == pytest.approx(var_s, rel=0.10)
    assert math.sqrt(s.var() / P) == pytest.approx(sd, rel=0.05)
    W = torch.randn(H, d, k, generator=_gen(13), dtype=DT)
    assert abs(diversity(W).z) < 5  # one random draw sits within a few null sd


def test_null_principal_angles_median_near_76_degrees():
    a = null_principal_angles(768, 64, 40, _gen(7))
    assert a.shape == (40, 64)
    assert bool((a.diff(dim=1) >= -1e-12).all())  # ascending
    # docs/ensemble.md A3: median ≈ 76°; 2560 angles give a median to a fraction of a degree
    assert float(a.median()) == pytest.approx(76.0, abs=1.0)


def test_null_angles_agree_with_diversity_of_random_heads():
    W = torch.randn(6, 40, 5, generator=_gen(8), dtype=DT)
    a_div = diversity(W).angles_deg.flatten()
    a_null = null_principal_angles(40, 5, 400, _gen(9)).flatten()
    # same distribution: medians agree within a few degrees at these sample sizes (75 vs 2000 angles)
    assert float(a_div.median()) == pytest.approx(float(a_null.median()), abs=5.0)


# ---------------------------------------------------------------------------------- angles


def test_principal_angles_match_scipy():
    g = _gen(10)
    for k1, k2 in [(3, 5), (5, 3), (4, 4), (1, 6)]:
        A = torch.randn(11, k1, generator=g, dtype=DT)
        B = torch.randn(11, k2, generator=g, dtype=DT)
        ref = np.sort(scipy.linalg.subspace_angles(A.numpy(), B.numpy()))
        got = principal_angles(A, B).numpy()
        np.testing.assert_allclose(got, ref, atol=1e-12)


def test_principal_angles_of_constructed_subspaces_including_tiny_ones():
    theta = torch.tensor([1e-10, 1e-6, 0.3, 1.2, math.pi / 2], dtype=DT)
    k, d = 5, 12
    A = torch.zeros(d, k, dtype=DT)
    B = torch.zeros(d, k, dtype=DT)
    for i in range(k):
        A[i, i] = 1.0
        B[i, i] = math.cos(theta[i])
        B[k + i, i] = math.sin(theta[i])
    R = torch.linalg.qr(torch.randn(d, d, generator=_gen(11), dtype=DT))[0]  # random rotation
    got = principal_angles(R @ A, R @ B)
    # the sine branch resolves 1e-10 rad to relative ~1e-5 (eps/θ); arccos alone could not (≈1e-8 floor)
    torch.testing.assert_close(got, theta, rtol=1e-5, atol=1e-14)


def test_pairwise_angles_of_mixed_ranks_match_scipy():
    W = torch.randn(3, 10, 4, generator=_gen(12), dtype=DT)
    W[1, :, 3] = 2 * W[1, :, 0]  # rank 3
    div = diversity(W)
    assert div.ranks == (4, 3, 4)
    iu = torch.triu_indices(3, 3, 1)
    for p in range(3):
        a, b = int(iu[0, p]), int(iu[1, p])
        ref = np.rad2deg(np.sort(scipy.linalg.subspace_angles(W[a].numpy(), W[b].numpy())))
        got = div.angles_deg[p].numpy()
        np.testing.assert_allclose(got[~np.isnan(got)], ref, atol=1e-9)


# ---------------------------------------------------------------------------------- ceiling, edge cases


def test_ceiling_is_attained_by_a_tight_frame():
    # three lines in R² at 120°: a tight frame, overlaps cos²60° = 1/4, HDI = 3/4 = ceiling
    ang = torch.tensor([0.0, 2 * math.pi / 3, 4 * math.pi / 3], dtype=DT)
    W = torch.stack([torch.cos(ang), torch.sin(ang)], dim=1).unsqueeze(-1)  # (3, 2, 1)
    div = diversity(W)
    assert hdi_ceiling(3, 1, 2) == pytest.approx(0.75, abs=1e-15)
    assert div.hdi == pytest.approx(0.75, abs=1e-12)
    assert div.ceiling == pytest.approx(0.75, abs=1e-15)


def test_random_hdi_never_exceeds_ceiling():
    for seed in range(5):
        W = torch.randn(6, 8, 3, generator=_gen(seed), dtype=DT)  # H·k = 18 > 8
        div = diversity(W)
        assert div.hdi <= div.ceiling + 1e-12
    assert hdi_ceiling(12, 32, 384) == 1.0
    assert hdi_ceiling(4, 8, 8) == pytest.approx(0.0, abs=1e-15)


def test_edge_cases():
    W = torch.randn(1, 5, 2, dtype=DT)
    with pytest.raises(ValueError, match="W: expected at least 2 heads"):
        diversity(W)
    Z = torch.randn(3, 5, 2, dtype=DT)
    Z[1] = 0
    with pytest.raises(ValueError, match="all-zero head 1"):
        diversity(Z)
    with pytest.raises(ValueError, match="form"):
        diversity(torch.randn(2, 5, 2, dtype=DT), form="literal")
    with pytest.raises(ValueError, match="W: expected a 3-d tensor"):
        diversity(torch.randn(5, 2, dtype=DT))
    with pytest.raises(ValueError, match="k: expected an integer in"):
        null_hdi(4, 5, 2)
    with pytest.raises(ValueError, match="H: expected an integer >= 2"):
        null_hdi(10, 2, 1)
    with pytest.raises(ValueError, match="rank >= 1"):
        orthonormal_basis(torch.zeros(4, 2, dtype=DT))
    # d_k > d: every head spans R^d, HDI = 0 = ceiling
    div = diversity(torch.randn(3, 4, 6, generator=_gen(3), dtype=DT))
    assert div.ranks == (4, 4, 4)
    assert div.hdi == pytest.approx(0.0, abs=1e-12)
    assert div.ceiling == pytest.approx(0.0, abs=1e-15)


def test_numerical_rank_tolerance_documented_default():
    W = torch.randn(10, 4, generator=_gen(4), dtype=DT)
    W[:, 3] = W[:, 0] + 1e-20 * W[:, 1]  # dependent to float64 precision
    U, r = orthonormal_basis(W)
    assert r == 3
    torch.testing.assert_close(U.T @ U, torch.eye(3, dtype=DT), atol=1e-13, rtol=0)
    # a float32 input uses float32's epsilon: a 1e-9 perturbation is below it
    W32 = W.float()
    W32[:, 3] = W32[:, 0] * (1 + 1e-9)
    assert orthonormal_basis(W32)[1] == 3
    _, r_loose = orthonormal_basis(torch.randn(10, 4, generator=_gen(5), dtype=DT), rtol=0.999)
    assert r_loose == 1


# ---------------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    H=st.integers(2, 6),
    d=st.integers(2, 12),
    k=st.integers(1, 5),
    seed=st.integers(0, 10_000),
    form=st.sampled_from(["subspace", "weight"]),
)
def test_hdi_in_unit_interval_and_overlap_symmetric(H, d, k, seed, form):
    W = torch.randn(H, d, k, generator=_gen(seed), dtype=DT)
    div = diversity(W, form=form)
    assert 0.0 <= div.hdi <= 1.0
    torch.testing.assert_close(div.overlap, div.overlap.T, rtol=0, atol=1e-13)
    assert bool((div.overlap >= -1e-13).all()) and bool((div.overlap <= 1 + 1e-12).all())
    a = div.angles_deg[~torch.isnan(div.angles_deg)]
    assert bool((a >= 0).all()) and bool((a <= 90 + 1e-9).all())


@settings(max_examples=25, deadline=None)
@given(H=st.integers(2, 5), d=st.integers(3, 10), k=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_subspace_hdi_invariant_to_rotation_and_right_factors(H, d, k, seed):
    g = _gen(seed)
    W = torch.randn(H, d, k, generator=g, dtype=DT)
    R = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=DT))[0]
    A = torch.randn(H, k, k, generator=g, dtype=DT) + 3 * torch.eye(k, dtype=DT)  # invertible a.s.
    h0 = diversity(W).hdi
    assert diversity(R @ W).hdi == pytest.approx(h0, abs=1e-10)
    assert diversity(W @ A).hdi == pytest.approx(h0, abs=1e-9)
    # subspace overlap = mean squared cosine of the principal angles (equal ranks)
    div = diversity(W)
    iu = torch.triu_indices(H, H, 1)
    if len(set(div.ranks)) == 1:
        cos2 = torch.cos(torch.deg2rad(div.angles_deg)).square().mean(dim=1)
        torch.testing.assert_close(div.overlap[iu[0], iu[1]], cos2, atol=1e-10, rtol=0)


def test_batched_overlap_matches_pairwise_loop():
    W = torch.randn(7, 30, 6, generator=_gen(21), dtype=DT)
    ov = overlap_matrix(W)
    for a in range(7):
        for b in range(7):
            Ua, ra = orthonormal_basis(W[a])
            Ub, rb = orthonormal_basis(W[b])
            ref = (Ua.T @ Ub).square().sum() / math.sqrt(ra * rb)
            assert float(ov[a, b]) == pytest.approx(float(ref), abs=1e-13)
