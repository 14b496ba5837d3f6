"""Decoders with one fused ``qkv`` projection: GPT-NeoX (Pythia), BLOOM, GPT-BigCode, Falcon, MPT, CodeGen.

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

    mpt          blocks.i.attn.Wqkv (3·d, d) rows [q; k; v], blocks.i.attn.out_proj -> W_O; no biases;
                 ALiBi with MPT's slopes (below); scale attn_config.softmax_scale or k^-1/2
    codegen      h.i.attn.qkv_proj (3·d, d): four blocks (the model-parallel shards it was trained
                 with), block j rows [q_j; v_j; k_j] of d/4 each, q = [q_0; q_1; q_2; q_3] (same for
                 k, v); h.i.attn.out_proj -> W_O; no biases; interleaved RoPE on rotary_dim coordinates

Biases follow the same row layout. All causal and pre-norm.

MPT's ALiBi slopes: with ``P = 2^⌈log₂ H⌉`` and ``s_j = 2^{−8j/P}`` (``j = 1..P``), the slopes are
``s`` itself when ``H = P``, else the first ``H`` of ``[s_2, s_4, ..., s_P, s_1, s_3, ...]``. MPT adds
``slope · (j − n + 1)`` for key ``j``: per query row this differs from ``slope · (j − i)`` by a constant,
which the softmax removes. The reference ignores ``attn_config.alibi``, ``alibi_bias_max``, ``qk_ln``,
``prefix_lm`` and ``attn_type``; a checkpoint that sets them to other than ALiBi with maximum 8, no q/k
norm, no prefix LM and multi-head attention is refused, as is ``clip_qkv`` (elementwise clipping).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource, Rope
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
    "mpt": ("blocks.{i}.attn.", "Wqkv", "out_proj"),
    "codegen": ("h.{i}.attn.", "qkv_proj", "out_proj"),
}
#: attn_config values of MPT that the reference does not implement -> the value it assumes
_MPT_ASSUMED = {
    "clip_qkv": None,
    "qk_ln": False,
    "alibi": True,
    "alibi_bias_max": 8,
    "prefix_lm": False,
    "attn_type": "multihead_attention",
}


def mpt_alibi_slopes(H: int) -> torch.Tensor:
    """MPT's ALiBi slopes ``(H,)`` (module docstring)."""
    P = 2 ** math.ceil(math.log2(H))
    s = 2.0 ** (-8.0 * torch.arange(1, P + 1, dtype=torch.float64) / P)  # (P,)
    return s if P == H else torch.cat([s[1::2], s[::2]])[:H]


def _check_mpt(cfg: ConfigView) -> float | None:
    """MPT's attn_config: refused values named; returns its softmax_scale (None: k^-1/2)."""
    ac = cfg.get("attn_config", default={}) or {}
    for key, assumed in _MPT_ASSUMED.items():
        got = ac.get(key, assumed)
        if got != assumed and not (key == "clip_qkv" and not got):
            raise ValueError(
                f"config.attn_config.{key}: expected {json.dumps(assumed)} (what transformers' MPT "
                f"implements; other values are not reproduced), got {json.dumps(got)}"
            )
    scale = ac.get("softmax_scale")
    return None if scale is None else float(scale)


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
    d = cfg.int("hidden_size", "n_embd", "d_model")
    H = cfg.int("num_attention_heads", "n_head", "n_heads")
    L = cfg.int("num_hidden_layers", "n_layer", "n_layers")
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
    mpt_scale = _check_mpt(cfg) if mt == "mpt" else None
    if mt == "codegen":
        layout = "codegen"
        if d % 4:
            raise ValueError(f"config.n_embd: expected a multiple of 4 (the four fused blocks), got {d}")
    if H % Hk:
        raise ValueError(f"config.num_kv_heads: expected a divisor of {H}, got {Hk}")
    template, fused, out = KEYS[mt]
    p = find_prefix(state, template.format(i=0) + fused + ".weight", mt)
    rope = make_rope(config, k) if mt in ("gpt_neox", "falcon") else None
    if mt == "codegen":  # GPT-J's rotary: interleaved pairs on the leading rotary_dim coordinates, base 10000
        rope = Rope(theta=10000.0, dim=cfg.int("rotary_dim"), interleaved=True)
    scale = k**-0.5 if mpt_scale is None else mpt_scale
    if mt == "gpt_bigcode" and not cfg.get("scale_attn_weights", default=True):
        scale = 1.0
    slopes = alibi_slopes(H) if mt == "bloom" else mpt_alibi_slopes(H) if mt == "mpt" else None

    def split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows of the fused weight (or bias) -> q (H·k, ...), k (Hk·k, ...), v (Hk·k, ...)."""
        rest = t.shape[1:]
        if layout == "q_then_kv":
            return t.split([H * k, Hk * k, Hk * k])
        if layout == "codegen":  # four blocks of rows [q_j; v_j; k_j]
            blocks = t.reshape(4, 3, d // 4, *rest)
            return (
                blocks[:, 0].reshape(d, *rest),
                blocks[:, 2].reshape(d, *rest),
                blocks[:, 1].reshape(d, *rest),
            )
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
