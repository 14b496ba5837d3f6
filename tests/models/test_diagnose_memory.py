"""The lower-memory and faster paths of ``diagnose`` (subspaces promoted to float64 one at a time, cross
products in blocks without the (H, H, k, k) array, bases from k × k Gram matrices, float32 Gram products
of the bases at H·k >= 1024, K/V products once per K/V head) give the numbers of the direct computations."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.core import geometry
from attnlab.diagnose import cross_products, diagnose, flow_defects, ov_factors
from attnlab.diagnose.flow import grouped_cross_products, grouped_flow_defects
from attnlab.models import from_state_dict


def test_blocked_cross_products_without_grouping_equal_the_expanded_ones() -> None:
    g = torch.Generator().manual_seed(4)
    WQ = torch.randn(16, 40, 6, generator=g, dtype=torch.float64)
    WK = torch.randn(16, 40, 6, generator=g, dtype=torch.float64)
    # the same quantity contracted in another order: rounding only (~1e-15 relative)
    torch.testing.assert_close(
        grouped_cross_products(WQ, WK, torch.arange(16)), cross_products(WQ, WK), rtol=1e-10, atol=1e-12
    )


def test_bfloat16_layers_diagnosed_as_their_float64_copy() -> None:
    """A bf16 checkpoint streamed (kept in bf16, each subspace promoted when measured) gives the same
    per-head numbers as the same weights converted to float64 up front."""
    g = torch.Generator().manual_seed(0)
    d, H, Hkv, k, L = 48, 6, 2, 8, 2
    sd = {}
    for i in range(L):
        for n, s in (
            ("q_proj", (H * k, d)),
            ("k_proj", (Hkv * k, d)),
            ("v_proj", (Hkv * k, d)),
            ("o_proj", (d, H * k)),
        ):
            sd[f"model.layers.{i}.self_attn.{n}.weight"] = torch.randn(s, generator=g).to(torch.bfloat16)
    cfg = {
        "model_type": "llama",
        "hidden_size": d,
        "num_attention_heads": H,
        "num_key_value_heads": Hkv,
        "num_hidden_layers": L,
    }
    streamed = diagnose(from_state_dict(sd, cfg, dtype=None, stream=True))
    direct = diagnose(from_state_dict(sd, cfg, dtype=torch.float64))
    assert len(streamed.heads) == len(direct.heads) == L * H
    for a, b in zip(streamed.heads, direct.heads):
        for key, va in a.items():
            vb = b[key]
            if isinstance(va, float) and math.isnan(va):
                assert math.isnan(vb), key
            else:  # identical float64 inputs; only thread-count-free rounding could differ
                assert va == vb or abs(va - vb) <= 1e-12 * max(1.0, abs(vb)), (key, va, vb)


def _stack(H: int, d: int, k: int, seed: int, cond: float = 1.0) -> torch.Tensor:
    """Gaussian heads; ``cond`` > 1 stretches one column of head 0 (condition number about ``cond``)."""
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(H, d, k, generator=g, dtype=torch.float64)
    W[0, :, 0] *= cond
    return W


def test_fast_geometry_agrees_with_the_svd_path() -> None:
    """H·k = 1024: float32 Gram products of the bases, bases from k × k Gram eigen-decompositions, cosines
    from symmetric eigenvalue solves. Cosines carry ~1e-7 absolute error (float32 products of unit vectors
    summed over d = 256 terms; up to 2e-7 measured on the self-overlaps, whose k cosines are all ~1),
    the HDI, a mean over pairs, to ~1e-9, the angles to ~1e-5 degrees; the tolerances are a few times
    those and far below the digits inspect prints (4 decimals for HDI, 0.1 for z and degrees)."""
    W = _stack(16, 256, 64, seed=1)
    ref, ref_w = geometry.diversity_with_weight(W)
    fast, fast_w = geometry.diversity_with_weight(W, fast=True)
    assert abs(fast.hdi - ref.hdi) < 1e-8 and abs(fast.z - ref.z) < 1e-3
    torch.testing.assert_close(fast.overlap, ref.overlap, rtol=0, atol=5e-7)
    torch.testing.assert_close(fast_w, ref_w, rtol=0, atol=5e-7)
    torch.testing.assert_close(fast.angles_deg, ref.angles_deg, rtol=0, atol=1e-4)
    assert fast.ranks == ref.ranks and fast.hdi_null == ref.hdi_null
    # a difference the tolerances would catch: one head's subspace rotated by ~0.1 degree
    W2 = W.clone()
    W2[3, :, 0] += (
        2e-3
        * W2[3].norm(dim=0).mean()
        * torch.randn(256, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
        / 16
    )
    moved, _ = geometry.diversity_with_weight(W2, fast=True)
    assert (moved.angles_deg - ref.angles_deg).abs().nan_to_num().max() > 1e-3


def test_fast_geometry_falls_back_to_the_svd_for_ill_conditioned_heads() -> None:
    """A head of condition number ~1e5 (beyond the Gram route's 1e3): the fast path takes the SVD's bases,
    and below H·k = 1024 float64 products, so it equals the default to rounding (1e-12)."""
    W = _stack(4, 64, 8, seed=2, cond=1e5)
    ref, ref_w = geometry.diversity_with_weight(W)
    fast, fast_w = geometry.diversity_with_weight(W, fast=True)
    assert abs(fast.hdi - ref.hdi) < 1e-12
    torch.testing.assert_close(fast_w, ref_w, rtol=0, atol=1e-12)
    torch.testing.assert_close(
        fast.angles_deg, ref.angles_deg, rtol=0, atol=1e-9
    )  # arccos vs eigvalsh cosines
    assert geometry._gram_bases_sv(W, None) is None  # the Gram route declined
    assert geometry._gram_bases_sv(_stack(4, 64, 8, seed=2), None) is not None


def test_fast_geometry_small_well_conditioned_equals_svd_to_rounding() -> None:
    """Below H·k = 1024 (float64 products), well-conditioned heads: Gram-eigen bases are orthonormal to
    ~eps·κ² (κ ~ 2 here), so everything agrees with the SVD route to ~1e-13."""
    W = _stack(6, 48, 8, seed=3)
    ref, ref_w = geometry.diversity_with_weight(W)
    fast, fast_w = geometry.diversity_with_weight(W, fast=True)
    assert abs(fast.hdi - ref.hdi) < 1e-13 and abs(fast.mean_angle_deg - ref.mean_angle_deg) < 1e-9
    torch.testing.assert_close(fast_w, ref_w, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="fast"):
        geometry.diversity_with_weight(W, fast=1)
    bad = W.clone()
    bad[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        geometry.diversity_with_weight(bad, fast=True)


def test_grouped_flow_defects_and_ov_factors_equal_the_expanded_ones() -> None:
    g = torch.Generator().manual_seed(5)
    H, Hkv, d, k = 8, 2, 30, 5
    WQ = torch.randn(H, d, k, generator=g, dtype=torch.float64)
    WK = torch.randn(Hkv, d, k, generator=g, dtype=torch.float64)
    WV = torch.randn(Hkv, d, k, generator=g, dtype=torch.float64)
    WO = torch.randn(H, k, d, generator=g, dtype=torch.float64)
    kv = torch.arange(H) // (H // Hkv)
    a = grouped_flow_defects(WQ, WK, WV, WO, 0.3, kv)
    b = flow_defects(WQ, WK[kv], WV[kv], WO, 0.3)
    for name in ("sym_defect", "value_cos", "value_defect", "M_fro", "V_fro"):  # same products, regrouped
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(ov_factors(WV, WO, kv), ov_factors(WV[kv], WO), rtol=0, atol=0)


def test_nan_weights_refused_by_name_without_the_per_call_checks() -> None:
    """diagnose no longer re-checks each float64 stack: a non-finite weight is refused when the layer is
    built (the streamed checkpoint's layer, in its own dtype)."""
    g = torch.Generator().manual_seed(0)
    d, H, k = 16, 2, 8
    sd = {
        f"model.layers.0.self_attn.{n}.weight": torch.randn(s, generator=g).to(torch.bfloat16)
        for n, s in (
            ("q_proj", (H * k, d)),
            ("k_proj", (H * k, d)),
            ("v_proj", (H * k, d)),
            ("o_proj", (d, H * k)),
        )
    }
    sd["model.layers.0.self_attn.k_proj.weight"][3, 4] = float("nan")
    cfg = {"model_type": "llama", "hidden_size": d, "num_attention_heads": H, "num_hidden_layers": 1}
    with pytest.raises(ValueError, match="W_K.*finite"):
        diagnose(from_state_dict(sd, cfg, dtype=None, stream=True))
