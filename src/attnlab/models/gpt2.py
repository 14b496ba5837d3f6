"""GPT-2: a fused Conv1D ``c_attn`` holding Q, K and V side by side, stored as ``x @ W`` (not transposed).

Key map (per block ``i``, under an optional prefix such as ``transformer.``)::

    h.i.attn.c_attn.weight (d, 3d) = [W_Q | W_K | W_V]   c_attn.bias (3d,) = [b_Q | b_K | b_V]
    h.i.attn.c_proj.weight (d, d)  = W_O (rows: head h's d_head outputs)   c_proj.bias (d,) = b_O

Conv1D computes ``x @ weight + bias``: unlike nn.Linear there is no transpose. Scores are scaled by
``1/√d_head`` when ``scale_attn_weights`` and further by ``1/(i+1)`` when
``scale_attn_by_inverse_layer_idx``. Pre-norm (``ln_1`` precedes attention), causal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource
from attnlab.models._common import ConfigView, find_prefix, get_tensor, linear_to_heads, out_linear_to_heads

MODEL_TYPES = ("gpt2",)
ATTENTION_INPUT = r"(^|\.)h\.\d+\.attn$"
ATTENTION_OUTPUT = r"(^|\.)h\.\d+\.attn\.c_proj$"


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """Convert a GPT-2 state dict to :class:`HeadWeights`."""
    cfg = ConfigView(config)
    d = cfg.int("n_embd", "hidden_size")
    H = cfg.int("n_head", "num_attention_heads")
    L = cfg.int("n_layer", "num_hidden_layers")
    if d % H:
        raise ValueError(f"config.n_embd: expected a multiple of n_head = {H}, got {d}")
    k = d // H
    scale_w = bool(cfg.get("scale_attn_weights", default=True))
    by_layer = bool(cfg.get("scale_attn_by_inverse_layer_idx", default=False))
    p = find_prefix(state, "h.0.attn.c_attn.weight", "GPT-2")

    def read(i: int) -> LayerHeads:
        a = f"{p}h.{i}.attn."
        w_qkv = get_tensor(state, a + "c_attn.weight", (d, 3 * d), dtype)  # (d, 3d), x @ W
        b_qkv = get_tensor(state, a + "c_attn.bias", (3 * d,), dtype)
        wq, wk, wv = w_qkv.split(d, dim=1)  # each (d, H·k)
        bq, bk, bv = b_qkv.split(d)
        scale = (k**-0.5 if scale_w else 1.0) / (i + 1 if by_layer else 1)
        return LayerHeads(
            W_Q=linear_to_heads(wq, H, k),
            W_K=linear_to_heads(wk, H, k),
            W_V=linear_to_heads(wv, H, k),
            W_O=out_linear_to_heads(get_tensor(state, a + "c_proj.weight", (d, d), dtype), H, k),
            b_Q=bq.reshape(H, k),
            b_K=bk.reshape(H, k),
            b_V=bv.reshape(H, k),
            b_O=get_tensor(state, a + "c_proj.bias", (d,), dtype),
            scale=scale,
        )

    return HeadWeights(
        layers=LayerSource(read, n_layers=L, n_heads=H, n_kv_heads=H, d_model=d, d_head=k),
        architecture="gpt2",
        model_type="gpt2",
        causal=True,
        pre_norm=True,
        extra={"scale_attn_by_inverse_layer_idx": by_layer, "scale_attn_weights": scale_w},
    )
