"""The lower-memory paths of ``diagnose`` (subspaces promoted to float64 one at a time, cross products
in blocks without the (H, H, k, k) array) give the numbers of the direct computations."""

from __future__ import annotations

import math

import torch

from attnlab.diagnose import cross_products, diagnose
from attnlab.diagnose.model import grouped_cross_products
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
