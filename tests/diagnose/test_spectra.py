"""Spectra of W_Q W_Kᵀ: against full d×d SVDs, energy ranks by a loop, planted outliers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.diagnose import energy_rank, qk_spectra


def test_singular_values_match_full_product() -> None:
    g = torch.Generator().manual_seed(0)
    WQ = torch.randn(3, 4, 40, 6, generator=g, dtype=torch.float64)
    WK = torch.randn(3, 4, 40, 6, generator=g, dtype=torch.float64)
    scale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)[:, None]
    spec = qk_spectra(WQ, WK, scale)
    for l in range(3):
        for h in range(4):
            M = scale[l, 0].item() * WQ[l, h].numpy() @ WK[l, h].numpy().T  # (40, 40), rank 6
            ref = np.linalg.svd(M, compute_uv=False)[:6]
            # float64 QR + SVD vs a 40×40 SVD: agreement to ~1e-13 relative; 1e-10 is generous
            np.testing.assert_allclose(spec.sv[l, h].numpy(), ref, rtol=1e-10)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=12), st.floats(0.05, 1.0))
def test_energy_rank_matches_loop(values: list[float], frac: float) -> None:
    sv = np.sort(np.array(values))[::-1]
    e = sv**2
    total, acc, r = e.sum(), 0.0, 0
    for x in e:  # smallest r whose leading energy reaches frac
        acc += x
        r += 1
        if acc >= frac * total * (1 - 1e-12):
            break
    assert int(energy_rank(torch.tensor(sv.copy()), frac)) == r


def test_planted_spikes_are_outliers_and_noise_is_not() -> None:
    g = torch.Generator().manual_seed(1)
    d, k, n_heads = 200, 32, 20
    noise_q = torch.randn(n_heads, d, k, generator=g, dtype=torch.float64)
    noise_k = torch.randn(n_heads, d, k, generator=g, dtype=torch.float64)
    pure = qk_spectra(noise_q, noise_k)
    # the edge is the null's 99th percentile of σ_max: pure-noise heads rarely show an outlier
    assert int(pure.outliers.sum()) <= 2
    # plant 3 strong directions: W_Q W_Kᵀ gains Σ_i a² u_i v_iᵀ (first 3 columns)
    u = torch.linalg.qr(torch.randn(d, 3, generator=g, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(d, 3, generator=g, dtype=torch.float64))[0]
    a = 25.0  # σ of a spike ≈ a² = 625 against a bulk edge near 2·√(d k)·... ≈ 330
    spiked_q = noise_q.clone()
    spiked_k = noise_k.clone()
    spiked_q[:, :, :3] += a * u
    spiked_k[:, :, :3] += a * v
    spec = qk_spectra(spiked_q, spiked_k)
    assert spec.outliers.tolist() == [3] * n_heads
    assert bool((spec.outlier_energy > 0.5).all())


def test_bad_shapes() -> None:
    with pytest.raises(ValueError, match="W_K: expected shape"):
        qk_spectra(torch.randn(2, 10, 3), torch.randn(2, 10, 4))
    with pytest.raises(ValueError, match="k <= d"):
        qk_spectra(torch.randn(3, 5), torch.randn(3, 5))
