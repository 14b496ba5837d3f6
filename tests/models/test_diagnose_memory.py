"""The lower-memory and faster paths of ``diagnose`` (subspaces promoted to float64 one at a time, cross
products in blocks without the (H, H, k, k) array, bases from k × k Gram matrices, float32 Gram products
of the bases at H·k >= 1024, K/V products once per K/V head, heads of a bf16 layer promoted to float64 a
block at a time) give the numbers of the direct computations."""

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


_BF16_SHAPE = (48, 6, 2, 8, 2)  # d, query heads, K/V heads, head dimension, layers


def _bf16_llama(seed: int) -> tuple[dict, dict]:
    """A two-layer llama state dict in bf16 (6 query heads sharing 2 K/V heads of dimension 8, d = 48)."""
    g = torch.Generator().manual_seed(seed)
    d, H, Hkv, k, L = _BF16_SHAPE
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
    return sd, cfg


def test_bfloat16_layers_diagnosed_as_their_float64_copy() -> None:
    """A bf16 checkpoint streamed (kept in bf16, each subspace promoted when measured) gives the same
    per-head numbers as the same weights converted to float64 up front."""
    sd, cfg = _bf16_llama(0)
    d, H, Hkv, k, L = _BF16_SHAPE
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
    # the grouped path forms each value head's Gram matrix and Cholesky factor once, on a batch of H_kv = 2,
    # the expanded one on H = 8 duplicates: the same products, but batched BLAS and LAPACK may take other
    # kernels for other batch sizes, so the factors agree to rounding, not to the bit (on an AMD EPYC core
    # 56 of 1200 entries differ, by at most 3.6e-15 absolute and 2.2e-15 relative; entries are O(1-10))
    torch.testing.assert_close(ov_factors(WV, WO, kv), ov_factors(WV[kv], WO), rtol=1e-13, atol=1e-13)


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


# ------------------------------------------------------------------------------------------------
# Blocks of heads promoted to float64 one at a time (diagnose._blocks): the blocked products on bf16
# stacks against independent float64 computations on the whole expanded stacks, with blocks small
# enough that every loop runs several times and the blocks do not divide the head counts.


def _bf16_heads(H: int, Hkv: int, d: int, k: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(s, generator=g).to(torch.bfloat16)
        for s in ((H, d, k), (Hkv, d, k), (Hkv, d, k), (H, k, d))
    )


@pytest.fixture
def three_heads_a_block(monkeypatch):
    """Blocks of 3 heads of d = 40, k = 6 (tiles of the cross products: 6 heads)."""
    from attnlab.diagnose import _blocks

    monkeypatch.setattr(_blocks, "BLOCK_BYTES", 3 * 8 * 40 * 6)
    assert [b.stop - b.start for b in _blocks.head_blocks(8, 40, 6)] == [3, 3, 2]


@pytest.mark.parametrize("Hkv", [8, 4])
def test_blocked_products_of_bf16_heads_equal_the_float64_expanded_ones(three_heads_a_block, Hkv) -> None:
    from attnlab.diagnose._blocks import r_factors

    H, d, k = 8, 40, 6
    WQ, WK, WV, WO = _bf16_heads(H, Hkv, d, k, seed=11)
    kv = torch.arange(H) // (H // Hkv)
    Q, K, V, O = (t.to(torch.float64) for t in (WQ, WK, WV, WO))  # the same values (bf16 -> float64 exact)
    # R factors: the same Householder QR of the same float64 matrices, head by head (rounding only)
    torch.testing.assert_close(r_factors(WQ), torch.linalg.qr(Q, mode="r")[1], rtol=1e-12, atol=1e-13)
    # cross products against the expanded dense-SVD-free reference of flow.cross_products (its own QR and
    # einsum contraction order): rounding of k × k products of O(√d) entries, ~1e-15 relative
    torch.testing.assert_close(
        grouped_cross_products(WQ, WK, kv), cross_products(Q, K[kv]), rtol=1e-10, atol=1e-12
    )
    a = grouped_flow_defects(WQ, WK, WV, WO, 0.3, kv)
    b = flow_defects(Q, K[kv], V[kv], O, 0.3)
    for name in ("sym_defect", "value_cos", "value_defect", "M_fro", "V_fro"):  # same traces, regrouped
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-14)
    # OV factors: F_h F_hᵀ against the dense V_h V_hᵀ = (W_V W_O)ᵀ (W_V W_O), d × d (entries ~d·k, float64
    # rounding ~1e-13 relative after the Cholesky)
    F = ov_factors(WV, WO, None if Hkv == H else kv)
    assert F.dtype == torch.float64 and F.shape == (H, d, k)
    Vd = V[kv] @ O  # (H, d, d) = V_hᵀ
    torch.testing.assert_close(F @ F.transpose(-1, -2), Vd.transpose(-1, -2) @ Vd, rtol=1e-10, atol=1e-9)


def test_blocked_layer_products_form_no_float64_stack(three_heads_a_block) -> None:
    """The spectra's R factors, the flow defects and the cross products of a bf16 layer hold float64
    copies of a few heads at a time: no operation produces a float64 tensor of a whole (H, d, k) stack
    (the former code promoted each stack whole)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from attnlab.diagnose._blocks import r_factors

    class Largest(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.dtype == torch.float64:
                    self.numel = max(self.numel, t.numel())
            return out

    H, Hkv, d, k = 8, 4, 40, 6
    WQ, WK, WV, WO = _bf16_heads(H, Hkv, d, k, seed=12)
    kv = torch.arange(H) // 2
    with Largest() as seen:
        Ra, Rb = r_factors(WQ), r_factors(WK)
        grouped_flow_defects(WQ, WK, WV, WO, 0.3, kv)
        grouped_cross_products(WQ, WK, kv, factors=(Ra, Rb))
    # the largest: the cross products' tile of 6 query heads (2 blocks), 6·d·k < H·d·k
    assert 0 < seen.numel <= 6 * d * k < H * d * k, seen.numel
    with Largest() as whole:  # the check sees a whole stack when one is promoted
        WQ.to(torch.float64)
    assert whole.numel == H * d * k


def test_diagnose_in_blocks_equals_diagnose_in_one_block(monkeypatch) -> None:
    """A bf16 grouped-K/V model diagnosed with one head per block (every loop split) and with every head in
    one block: the same per-head rows and layer summaries, keys in the same order."""
    from attnlab.diagnose import _blocks

    sd, cfg = _bf16_llama(3)
    d, H, Hkv, k, L = _BF16_SHAPE
    one = diagnose(from_state_dict(sd, cfg, dtype=None, stream=True))
    monkeypatch.setattr(_blocks, "BLOCK_BYTES", 8 * d * k)
    split = diagnose(from_state_dict(sd, cfg, dtype=None, stream=True))
    for a, b in zip((*one.layers, *one.heads), (*split.layers, *split.heads), strict=True):
        assert list(a) == list(b)
        for key, va in a.items():
            vb = b[key]
            if isinstance(va, float) and math.isnan(va):
                assert math.isnan(vb), key
            else:  # the same per-head float64 products; only the batch of a LAPACK/BLAS call differs
                assert va == vb or abs(va - vb) <= 1e-12 * max(1.0, abs(vb)), (key, va, vb)
