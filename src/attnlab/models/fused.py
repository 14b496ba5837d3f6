"""Decoders with one fused ``query_key_value`` projection: GPT-NeoX (Pythia), BLOOM, GPT-BigCode, Falcon.

Key maps (per layer ``i``, under an optional prefix; ``nn.Linear`` weights ``(out, in)``)::

    gpt_neox     layers.i.attention.query_key_value (3·H·k, d): rows per head [q_h; k_h; v_h]
                 layers.i.attention.dense (d, H·k) -> W_O          partial rotate-half RoPE
    bloom        h.i.self_attention.query_key_value (3·H·k, d): rows per head [q_h; k_h; v_h]
                 h.i.self_attention.dense (d, H·k) -> W_O          ALiBi, no RoPE
    gpt_bigcode  h.i.attn.c_attn ((H + 2)·k, d) rows [q (H·k); k (k); v (k)] (multi-query), or
                 (3·H·k, d) rows per head [q_h; k_h; v_h] when multi_query is false
                 h.i.attn.c_proj (d, H·k) -> W_O                   learned absolute positions
    falcon       h.i.self_attention.query_key_value: new_decoder_architecture rows per K/V group
                 [q (r·k); k (k); v (k)]; multi_query rows [q (H·k); k (k); v (k)]; otherwise rows
                 per head [q_h; k_h; v_h]. h.i.self_attention.dense -> W_O. RoPE (ALiBi refused:
                 the reference rounds the bias to bfloat16)

Biases follow the same row layout. All causal and pre-norm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource
from attnlab.core.positions import alibi_slopes
from attnlab.models._common import (
    ConfigView,
    find_prefix,
    get_tensor,
    linear_to_heads,
    make_rope,
    out_linear_to_heads,
)

#: model_type -> (layer template, fused name, output name)
KEYS = {
    "gpt_neox": ("layers.{i}.attention.", "query_key_value", "dense"),
    "bloom": ("h.{i}.self_attention.", "query_key_value", "dense"),
    "gpt_bigcode": ("h.{i}.attn.", "c_attn", "c_proj"),
    "falcon": ("h.{i}.self_attention.", "query_key_value", "dense"),
}
MODEL_TYPES = tuple(KEYS)
ATTENTION_INPUT = r"(^|\.)layers\.\d+\.attention$"
ATTENTION_OUTPUT = r"(^|\.)layers\.\d+\.attention\.dense$"


def patterns(model_type: str) -> tuple[str, str]:
    """Module-name patterns (attention input, attention output projection) of ``model_type``."""
    template, _, out = KEYS[model_type]
    mod = template.format(i=r"\d+").rstrip(".").replace(".", r"\.")
    return rf"(^|\.){mod}$", rf"(^|\.){mod}\.{out}$"


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """A streamed :class:`HeadWeights` for a fused-``qkv`` decoder state dict."""
    cfg = ConfigView(config)
    mt = str(cfg.get("model_type"))
    d = cfg.int("hidden_size", "n_embd")
    H = cfg.int("num_attention_heads", "n_head")
    L = cfg.int("num_hidden_layers", "n_layer")
    if d % H:
        raise ValueError(f"config.hidden_size: expected a multiple of the head count {H}, got {d}")
    k = d // H
    mq = mt == "gpt_bigcode" and bool(cfg.get("multi_query", default=True))
    Hk = 1 if mq else H
    # multi-head GPT-BigCode views its c_attn output as (H, 3·k): rows per head, like GPT-NeoX
    layout = "per_head" if mt in ("gpt_neox", "bloom") or (mt == "gpt_bigcode" and not mq) else "q_then_kv"
    if mt == "falcon":
        if cfg.get("alibi", default=False):
            raise ValueError(
                "config.alibi: expected false for falcon (its reference rounds the ALiBi bias to bfloat16, "
                "which HeadWeights does not reproduce), got true"
            )
        if cfg.get("new_decoder_architecture", default=False):
            Hk, layout = cfg.int("num_kv_heads", default=H), "grouped"
        elif cfg.get("multi_query", default=True):
            Hk = 1
        else:
            layout = "per_head"
    if H % Hk:
        raise ValueError(f"config.num_kv_heads: expected a divisor of {H}, got {Hk}")
    template, fused, out = KEYS[mt]
    p = find_prefix(state, template.format(i=0) + fused + ".weight", mt)
    rope = make_rope(config, k) if mt in ("gpt_neox", "falcon") else None
    scale = k**-0.5
    if mt == "gpt_bigcode" and not cfg.get("scale_attn_weights", default=True):
        scale = 1.0
    slopes = alibi_slopes(H) if mt == "bloom" else None

    def split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows of the fused weight (or bias) -> q (H·k, ...), k (Hk·k, ...), v (Hk·k, ...)."""
        rest = t.shape[1:]
        if layout == "q_then_kv":
            return t.split([H * k, Hk * k, Hk * k])
        if layout == "grouped":  # per K/V group: its r query heads, then its k, then its v
            r = H // Hk
            g = t.reshape(Hk, r + 2, k, *rest)
            return (
                g[:, :r].reshape(H * k, *rest),
                g[:, r].reshape(Hk * k, *rest),
                g[:, r + 1].reshape(Hk * k, *rest),
            )
        per_head = t.reshape(H, 3, k, *rest)  # rows grouped per head as [q_h; k_h; v_h]
        return tuple(per_head[:, j].reshape(H * k, *rest) for j in range(3))  # type: ignore[return-value]

    def read(i: int) -> LayerHeads:
        a = p + template.format(i=i)
        rows = (H + 2 * Hk) * k
        w = get_tensor(state, a + fused + ".weight", (rows, d), dtype)
        b = get_tensor(state, a + fused + ".bias", (rows,), dtype) if a + fused + ".bias" in state else None
        wq, wk, wv = split(w)
        if b is None:
            b = torch.zeros(rows, dtype=w.dtype)
        bq, bk, bv = split(b)
        wo = get_tensor(state, a + out + ".weight", (d, H * k), dtype)
        bo_key = a + out + ".bias"
        return LayerHeads(
            W_Q=linear_to_heads(wq.T, H, k),
            W_K=linear_to_heads(wk.T, Hk, k),
            W_V=linear_to_heads(wv.T, Hk, k),
            W_O=out_linear_to_heads(wo.T, H, k),
            b_Q=bq.reshape(H, k),
            b_K=bk.reshape(Hk, k),
            b_V=bv.reshape(Hk, k),
            b_O=get_tensor(state, bo_key, (d,), dtype) if bo_key in state else torch.zeros(d, dtype=w.dtype),
            scale=scale,
            alibi=None if slopes is None else slopes.to(w.dtype),
        )

    return HeadWeights(
        layers=LayerSource(read, n_layers=L, n_heads=H, n_kv_heads=Hk, d_model=d, d_head=k),
        architecture=mt,
        model_type=mt,
        grouped_kv=Hk < H,
        n_kv_heads=Hk,
        causal=True,
        pre_norm=True,
        rope=rope,
        extra={"stages": {"alibi": slopes is not None}},
    )
