"""Decoders with separate ``q/k/v/o`` projections (Llama and its relatives), one table row per family.

Key map (per layer ``i``, under an optional prefix such as ``model.``; ``nn.Linear`` weights are
``(out, in)``, so ``y = x Wᵀ + b``)::

    {layer}{q} (H·k, d) -> W_Q   {layer}{k} (H_kv·k, d) -> W_K   {layer}{v} (H_kv·k, d) -> W_V
    {layer}{o} (d, H·k) -> W_O   biases ``.bias`` -> b_Q, b_K, b_V, b_O where present

+-------------+--------------------------------+-------------------------------+-----------------------------+
| model_type  | {layer}                        | q, k, v, o                    | stages beyond Llama         |
+=============+================================+===============================+=============================+
| llama       | layers.i.self_attn.            | q_proj k_proj v_proj o_proj   | (all RoPE variants)         |
| mistral,    | layers.i.self_attn.            | same                          | sliding window (i−j < W)    |
| mixtral     |                                |                               | (Mixtral: experts ignored)  |
| qwen2       | layers.i.self_attn.            | same (+ q/k/v biases)         | window on layers ≥          |
|             |                                |                               | max_window_layers           |
| qwen3       | layers.i.self_attn.            | same                          | per-head RMS q/k norm       |
| gemma       | layers.i.self_attn.            | same                          | —                           |
| gemma2      | layers.i.self_attn.            | same                          | scale query_pre_attn_scalar |
|             |                                |                               | ^−½, soft-capping, windows  |
|             |                                |                               | on alternate layers         |
| gemma3_text | layers.i.self_attn.            | same                          | RMS q/k norm (1 + w), local |
|             |                                |                               | RoPE base on window layers  |
| olmo2       | layers.i.self_attn.            | same                          | RMS q/k norm over all heads |
| olmo        | layers.i.self_attn.            | same                          | (clip_qkv refused)          |
| granite     | layers.i.self_attn.            | same                          | scale = attention_multiplier|
| starcoder2  | layers.i.self_attn.            | same (+ biases)               | sliding window              |
| stablelm    | layers.i.self_attn.            | same                          | partial RoPE, per-head      |
|             |                                |                               | LayerNorm q/k (optional)    |
| cohere      | layers.i.self_attn.            | same                          | interleaved RoPE, LayerNorm |
|             |                                |                               | q/k (optional)              |
| phi         | layers.i.self_attn.            | q_proj k_proj v_proj dense    | partial RoPE, LayerNorm q/k |
|             |                                |                               | shared by heads (optional)  |
| phi3        | layers.i.self_attn.            | qkv_proj = [q; k; v], o_proj  | partial RoPE, longrope      |
| gptj        | h.i.attn.                      | q_proj k_proj v_proj out_proj | interleaved partial RoPE    |
| gpt_neo     | h.i.attn.attention.            | same as gptj                  | no score scale; local layers|
|             |                                |                               | window i−j < W              |
| opt         | decoder.layers.i.self_attn.    | q_proj k_proj v_proj out_proj | learned absolute positions  |
| xglm        | layers.i.self_attn.            | same as opt (+ biases)        | sinusoidal positions        |
| qwen2_moe   | layers.i.self_attn.            | q_proj k_proj v_proj o_proj   | windows on odd-numbered     |
|             |                                | (+ q/k/v biases)              | layers < max_window_layers  |
| modernbert  | layers.i.attn.                 | Wqkv = [q; k; v], Wo          | bidirectional; local layers |
|             |                                |                               | see |i − j| ≤ window/2 and  |
|             |                                |                               | use the local RoPE base     |
+-------------+--------------------------------+-------------------------------+-----------------------------+

Grouped K/V: K/V head ``j`` serves query heads ``j·r .. (j+1)·r − 1`` (``r = H / H_kv``), stored once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource, QKNorm, Rope
from attnlab.models._common import (
    ConfigView,
    find_prefix,
    get_tensor,
    layer_kinds,
    linear_to_heads,
    make_rope,
    out_linear_to_heads,
)

#: model_type -> (layer template, (q, k, v, o) names or ("qkv_proj", None, None, o))
KEYS: dict[str, tuple[str, tuple[str, str | None, str | None, str]]] = {
    **{
        t: ("layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj", "o_proj"))
        for t in (
            "llama",
            "mistral",
            "mixtral",
            "qwen2",
            "qwen3",
            "qwen3_moe",
            "qwen2_moe",
            "gemma",
            "gemma2",
            "gemma3_text",
            "olmo",
            "olmo2",
            "granite",
            "starcoder2",
            "stablelm",
            "cohere",
        )
    },
    "phi": ("layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj", "dense")),
    "phi3": ("layers.{i}.self_attn.", ("qkv_proj", None, None, "o_proj")),
    "gptj": ("h.{i}.attn.", ("q_proj", "k_proj", "v_proj", "out_proj")),
    "gpt_neo": ("h.{i}.attn.attention.", ("q_proj", "k_proj", "v_proj", "out_proj")),
    "opt": ("layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj", "out_proj")),
    "xglm": ("layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj", "out_proj")),
    "modernbert": ("layers.{i}.attn.", ("Wqkv", None, None, "Wo")),
}
MODEL_TYPES = tuple(KEYS)
ATTENTION_INPUT = r"(^|\.)layers\.\d+\.self_attn$"
ATTENTION_OUTPUT = r"(^|\.)layers\.\d+\.self_attn\.(o_proj|dense|out_proj)$"


def patterns(model_type: str) -> tuple[str, str]:
    """Module-name patterns (attention input, attention output projection) of ``model_type``."""
    template, names = KEYS[model_type]
    mod = template.format(i=r"\d+").rstrip(".").replace(".", r"\.")
    return rf"(^|\.){mod}$", rf"(^|\.){mod}\.{names[3]}$"


_NO_ROPE = ("gpt_neo", "opt", "xglm")
#: families whose head width is always d_model / H (no head_dim field)
_SPLIT_WIDTH = ("gptj", "gpt_neo", "opt", "xglm")


def _check_supported(mt: str, cfg: ConfigView) -> None:
    if mt == "olmo" and cfg.get("clip_qkv", default=None) is not None:
        raise ValueError(
            "config.clip_qkv: expected none (clipping q, k and v is not reproduced by HeadWeights), "
            f"got {cfg.get('clip_qkv')}"
        )
    if mt == "opt" and not cfg.get("do_layer_norm_before", default=True):
        pass  # post-norm OPT (350m): attention itself is unchanged


def _scale(mt: str, cfg: ConfigView, k: int) -> float:
    if mt == "gemma2" or mt == "gemma3_text":
        return float(cfg.get("query_pre_attn_scalar", default=k)) ** -0.5
    if mt == "granite":
        return float(cfg.get("attention_multiplier", default=k**-0.5))
    if mt == "gpt_neo":
        return 1.0
    return k**-0.5


def _qk_norm(
    mt: str, cfg: ConfigView, state: Mapping[str, torch.Tensor], a: str, H: int, Hk: int, k: int, dtype: Any
) -> QKNorm | None:
    def w(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        return get_tensor(state, a + name, shape, dtype)

    eps = float(cfg.get("rms_norm_eps", "layer_norm_eps", "norm_eps", default=1e-6))
    if mt in ("qwen3", "qwen3_moe"):
        return QKNorm("rms", "head", w("q_norm.weight", (k,)), w("k_norm.weight", (k,)), eps)
    if mt == "gemma3_text":
        return QKNorm("rms", "head", 1 + w("q_norm.weight", (k,)), 1 + w("k_norm.weight", (k,)), eps)
    if mt == "olmo2":
        return QKNorm("rms", "all", w("q_norm.weight", (H * k,)), w("k_norm.weight", (Hk * k,)), eps)
    if mt == "stablelm" and cfg.get("qk_layernorm", default=False):
        qw = torch.stack([w(f"q_layernorm.norms.{h}.weight", (k,)) for h in range(H)])
        kw = torch.stack([w(f"k_layernorm.norms.{h}.weight", (k,)) for h in range(Hk)])
        return QKNorm("layer", "head", qw, kw, eps)
    if mt == "phi" and cfg.get("qk_layernorm", default=False):  # one LayerNorm (with bias) shared by heads
        return QKNorm(
            "layer",
            "head",
            w("q_layernorm.weight", (k,)),
            w("k_layernorm.weight", (k,)),
            eps,
            w("q_layernorm.bias", (k,)),
            w("k_layernorm.bias", (k,)),
        )
    if mt == "cohere" and cfg.get("use_qk_norm", default=False):
        return QKNorm("layer", "head", w("q_norm.weight", (H, k)), w("k_norm.weight", (Hk, k)), eps)
    return None


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """A streamed :class:`HeadWeights` (layers read on access) for a ``q/k/v/o`` decoder state dict."""
    cfg = ConfigView(config)
    mt = str(cfg.get("model_type"))
    if mt not in KEYS:
        raise ValueError(f"model_type: expected one of {', '.join(KEYS)}, got {mt!r}")
    _check_supported(mt, cfg)
    d = cfg.int("hidden_size", "n_embd", "d_model")
    H = cfg.int("num_attention_heads", "n_head", "num_heads", "attention_heads")
    L = cfg.int("num_hidden_layers", "n_layer", "num_layers")
    Hk = cfg.int("num_key_value_heads", default=H)
    if H % Hk:
        raise ValueError(f"config.num_key_value_heads: expected a divisor of {H}, got {Hk}")
    k = cfg.int("head_dim", default=d // H) if mt not in _SPLIT_WIDTH else d // H
    if H * k != d and mt in _SPLIT_WIDTH:
        raise ValueError(f"config.hidden_size: expected a multiple of the head count {H}, got {d}")
    template, (nq, nk, nv, no) = KEYS[mt]
    p = find_prefix(state, template.format(i=0) + (nq + ".weight"), mt)
    kinds = layer_kinds(config, L) if mt != "gpt_neo" else _gpt_neo_kinds(cfg, L)
    win = cfg.get("sliding_window", "window_size", default=None)
    # EmbeddingGemma-style Gemma 3: full layers see every token; window layers |i − j| < W' with
    # W' = ⌊W/2⌋ + 1 for the stored W (the reference config halves it on load)
    bidirectional = mt == "gemma3_text" and bool(cfg.get("use_bidirectional_attention", default=False))
    causal = mt != "modernbert" and not bidirectional
    if mt == "modernbert":  # local layers: |i − j| ≤ local_attention/2, both directions
        every = int(cfg.get("global_attn_every_n_layers", default=3))
        if cfg.get("layer_types", default=None) is None:
            kinds = ["sliding_attention" if i % every else "full_attention" for i in range(L)]
        win = int(cfg.get("local_attention", default=128)) // 2
    softcap = cfg.get("attn_logit_softcapping", default=None) if mt == "gemma2" else None
    rope = None
    if mt == "gptj":  # rotary_dim leading coordinates of each head, interleaved pairs, base 10000
        rope = Rope(theta=10000.0, dim=cfg.int("rotary_dim", default=k), interleaved=True)
    elif mt not in _NO_ROPE:
        rope = make_rope(config, k, interleaved=mt == "cohere")
    local_rope = None
    if mt == "gemma3_text" and rope is not None:
        local_rope = make_rope(config, k, layer_type="sliding_attention")
    if mt == "modernbert":
        flat = {key: v for key, v in config.items() if key != "rope_parameters"}
        nested = cfg.get("rope_parameters", default=None) or {}
        full = {**(nested.get("full_attention") or {})}
        loc = {**(nested.get("sliding_attention") or {})}
        full.setdefault("rope_theta", cfg.get("global_rope_theta", default=160000.0))
        loc.setdefault("rope_theta", cfg.get("local_rope_theta", default=10000.0))
        rope = make_rope({**flat, "rope_parameters": full}, k)
        local_rope = make_rope({**flat, "rope_parameters": loc}, k)
    scale = _scale(mt, cfg, k)
    window = None
    if win is not None:
        window = (int(win) - 1, 0) if causal else (int(win) // 2,) * 2 if bidirectional else (int(win),) * 2

    def read(i: int) -> LayerHeads:
        a = p + template.format(i=i)
        out_dt = dtype

        def w(name: str, shape: tuple[int, ...]) -> torch.Tensor:
            return get_tensor(state, a + name, shape, out_dt)

        def b(name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
            key = a + name
            return (
                get_tensor(state, key, shape, out_dt)
                if key in state
                else torch.zeros(shape, dtype=like.dtype)
            )

        if nk is None:  # fused [q; k; v] rows
            qkv = w(nq + ".weight", ((H + 2 * Hk) * k, d))
            wq, wk, wv = qkv.split([H * k, Hk * k, Hk * k])
            bqkv = b(nq + ".bias", ((H + 2 * Hk) * k,), qkv)
            bq, bk, bv = bqkv.split([H * k, Hk * k, Hk * k])
        else:
            wq, wk, wv = (
                w(nq + ".weight", (H * k, d)),
                w(nk + ".weight", (Hk * k, d)),
                w(nv + ".weight", (Hk * k, d)),
            )
            bq, bk, bv = (
                b(nq + ".bias", (H * k,), wq),
                b(nk + ".bias", (Hk * k,), wq),
                b(nv + ".bias", (Hk * k,), wq),
            )
        wo = w(no + ".weight", (d, H * k))
        sliding = kinds[i] == "sliding_attention" and win is not None
        return LayerHeads(
            W_Q=linear_to_heads(wq.T, H, k),
            W_K=linear_to_heads(wk.T, Hk, k),
            W_V=linear_to_heads(wv.T, Hk, k),
            W_O=out_linear_to_heads(wo.T, H, k),
            b_Q=bq.reshape(H, k),
            b_K=bk.reshape(Hk, k),
            b_V=bv.reshape(Hk, k),
            b_O=b(no + ".bias", (d,), wo),
            scale=scale,
            qk_norm=_qk_norm(mt, cfg, state, a, H, Hk, k, out_dt),
            rope=local_rope if (sliding and local_rope is not None) else None,
            softcap=None if softcap is None else float(softcap),
            window=None if not sliding else window,
        )

    stages = {
        "qk_norm": _qk_norm_kind(mt, cfg),
        "softcap": softcap,
        "sliding_window": int(win) if win is not None and "sliding_attention" in kinds else None,
        "window_layers": [i for i, t in enumerate(kinds) if t == "sliding_attention"]
        if win is not None
        else [],
    }
    return HeadWeights(
        layers=LayerSource(read, n_layers=L, n_heads=H, n_kv_heads=Hk, d_model=d, d_head=k),
        architecture="llama" if mt in ("llama", "mistral", "qwen2") else mt,
        model_type=mt,
        grouped_kv=Hk < H,
        n_kv_heads=Hk,
        causal=causal,
        pre_norm=not (mt == "opt" and not cfg.get("do_layer_norm_before", default=True)),
        rope=rope,
        extra={"stages": stages, "rope_type": None if rope is None else rope.rope_type},
    )


def _qk_norm_kind(mt: str, cfg: ConfigView) -> str | None:
    if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
        return "rms per head"
    if mt == "olmo2":
        return "rms over all heads"
    if (mt in ("stablelm", "phi") and cfg.get("qk_layernorm", default=False)) or (
        mt == "cohere" and cfg.get("use_qk_norm", default=False)
    ):
        return "layernorm per head"
    return None


def _gpt_neo_kinds(cfg: ConfigView, L: int) -> list[str]:
    types: list[str] = []
    for kinds, n in cfg.get("attention_layers_spec", "attention_types", default=[[["global"], L]]):
        if isinstance(kinds, str):
            kinds = [kinds]
        types.extend(list(kinds) * n)
    layers = cfg.get("attention_layers", default=None) or types[:L]
    return ["sliding_attention" if t == "local" else "full_attention" for t in layers]
