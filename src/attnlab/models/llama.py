"""Llama-style decoders (Llama, Mistral, Qwen2): ``q_proj/k_proj/v_proj/o_proj`` with grouped K/V.

Key map (per layer ``i``, under an optional prefix such as ``model.``)::

    layers.i.self_attn.q_proj.weight (H·k, d)      -> W_Q   (bias -> b_Q when present)
    layers.i.self_attn.k_proj.weight (H_kv·k, d)   -> W_K, expanded to the H query heads
    layers.i.self_attn.v_proj.weight (H_kv·k, d)   -> W_V, expanded likewise
    layers.i.self_attn.o_proj.weight (d, H·k)      -> W_O   (bias -> b_O when present)

Grouped K/V: K/V head ``j`` serves query heads ``j·r .. (j+1)·r − 1`` with ``r = H / H_kv`` (the
order of the reference implementation's ``repeat_kv``). RoPE (rotate-half) is applied to queries and
keys; pre-norm (RMSNorm), causal. ``d_head`` may differ from ``d_model / H`` (``head_dim``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, Rope, default_scale
from attnlab.models._common import ConfigView, find_prefix, get_tensor, linear_to_heads, out_linear_to_heads

MODEL_TYPES = ("llama", "mistral", "qwen2")
ATTENTION_INPUT = r"(^|\.)layers\.\d+\.self_attn$"
ATTENTION_OUTPUT = r"(^|\.)layers\.\d+\.self_attn\.o_proj$"


def convert(state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype) -> HeadWeights:
    """Convert a Llama-style state dict to :class:`HeadWeights` (grouped K/V expanded)."""
    cfg = ConfigView(config)
    d = cfg.int("hidden_size")
    H = cfg.int("num_attention_heads")
    L = cfg.int("num_hidden_layers")
    H_kv = cfg.int("num_key_value_heads", default=H)
    if H % H_kv:
        raise ValueError(f"config.num_key_value_heads: expected a divisor of {H}, got {H_kv}")
    k = cfg.int("head_dim", default=d // H)
    r = H // H_kv
    rope_params = cfg.get("rope_parameters", default=None) or {}
    theta = float(rope_params.get("rope_theta", cfg.get("rope_theta", default=10000.0)))
    rope_type = rope_params.get("rope_type", "default")
    partial = float(rope_params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", default=1.0)))
    p = find_prefix(state, "layers.0.self_attn.q_proj.weight", "Llama-style")

    def maybe_bias(key: str, shape: tuple[int, ...]) -> torch.Tensor:
        return get_tensor(state, key, shape, dtype) if key in state else torch.zeros(shape, dtype=dtype)

    layers = []
    for i in range(L):
        a = f"{p}layers.{i}.self_attn."
        wq = get_tensor(state, a + "q_proj.weight", (H * k, d), dtype)
        wk = get_tensor(state, a + "k_proj.weight", (H_kv * k, d), dtype)
        wv = get_tensor(state, a + "v_proj.weight", (H_kv * k, d), dtype)
        wo = get_tensor(state, a + "o_proj.weight", (d, H * k), dtype)
        layers.append(
            LayerHeads(
                W_Q=linear_to_heads(wq.T, H, k),
                W_K=linear_to_heads(wk.T, H_kv, k).repeat_interleave(r, dim=0),  # (H, d, k)
                W_V=linear_to_heads(wv.T, H_kv, k).repeat_interleave(r, dim=0),  # (H, d, k)
                W_O=out_linear_to_heads(wo.T, H, k),
                b_Q=maybe_bias(a + "q_proj.bias", (H * k,)).reshape(H, k),
                b_K=maybe_bias(a + "k_proj.bias", (H_kv * k,)).reshape(H_kv, k).repeat_interleave(r, dim=0),
                b_V=maybe_bias(a + "v_proj.bias", (H_kv * k,)).reshape(H_kv, k).repeat_interleave(r, dim=0),
                b_O=maybe_bias(a + "o_proj.bias", (d,)),
                scale=default_scale(k),
            )
        )
    return HeadWeights(
        layers=tuple(layers),
        architecture="llama",
        model_type=str(cfg.get("model_type", default="llama")),
        grouped_kv=H_kv < H,
        n_kv_heads=H_kv,
        causal=True,
        pre_norm=True,
        rope=Rope(theta=theta, dim=int(k * partial)),
        extra={"rope_type": rope_type},
    )
