"""Encoders (and encoder towers) with separate projections: DistilBERT, ViT, CLIP, Whisper, BART, T5, MPNet.

Key maps (per layer ``i``, under an optional prefix; ``nn.Linear`` weights ``(out, in)``)::

    distilbert        transformer.layer.i.attention.{q_lin,k_lin,v_lin,out_lin}       post-norm
    vit               encoder.layer.i.attention.attention.{query,key,value},
                      encoder.layer.i.attention.output.dense                          pre-norm
    clip_text_model   [text_model.]encoder.layers.i.self_attn.{q,k,v,out}_proj         causal, pre-norm
    clip_vision_model [vision_model.]encoder.layers.i.self_attn.{q,k,v,out}_proj       pre-norm
    clip              the text tower (text_model.…, as clip_text_model)
    whisper           encoder.layers.i.self_attn.{q,k,v,out}_proj (no k bias): the audio encoder
    bart              encoder.layers.i.self_attn.{q,k,v,out}_proj: the encoder's self-attention
    t5                encoder.block.i.layer.0.SelfAttention.{q,k,v,o} (no biases, no score scale),
                      relative bias encoder.block.0.layer.0.SelfAttention.relative_attention_bias
                      (buckets × H), shared by all layers: the encoder
    mpnet             encoder.layer.i.attention.attn.{q,k,v,o}, relative bias
                      encoder.relative_attention_bias (buckets × H), shared by all layers
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource
from attnlab.core.positions import RelativeBias
from attnlab.models._common import ConfigView, find_prefix, get_tensor, linear_to_heads, out_linear_to_heads

#: model_type -> (attention module template, (q, k, v) names, output projection path from the
#: layer template, causal, pre_norm)
KEYS: dict[str, tuple[str, tuple[str, str, str], str, bool, bool]] = {
    "distilbert": ("transformer.layer.{i}.attention.", ("q_lin", "k_lin", "v_lin"), "out_lin", False, False),
    "vit": (
        "encoder.layer.{i}.attention.attention.",
        ("query", "key", "value"),
        "../output.dense",
        False,
        True,
    ),
    "clip_text_model": (
        "encoder.layers.{i}.self_attn.",
        ("q_proj", "k_proj", "v_proj"),
        "out_proj",
        True,
        True,
    ),
    "clip_vision_model": (
        "encoder.layers.{i}.self_attn.",
        ("q_proj", "k_proj", "v_proj"),
        "out_proj",
        False,
        True,
    ),
    "whisper": ("encoder.layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj"), "out_proj", False, True),
    "bart": ("encoder.layers.{i}.self_attn.", ("q_proj", "k_proj", "v_proj"), "out_proj", False, False),
    "t5": ("encoder.block.{i}.layer.0.SelfAttention.", ("q", "k", "v"), "o", False, True),
    "mpnet": ("encoder.layer.{i}.attention.attn.", ("q", "k", "v"), "o", False, False),
}
KEYS["clip"] = KEYS["clip_text_model"]
MODEL_TYPES = tuple(KEYS)
ATTENTION_INPUT = r"(^|\.)transformer\.layer\.\d+\.attention$"
ATTENTION_OUTPUT = r"(^|\.)transformer\.layer\.\d+\.attention\.out_lin$"


def _out_path(template: str, out: str) -> str:
    if out.startswith("../"):  # relative to the parent module (ViT's attention.output.dense)
        return template.rstrip(".").rsplit(".", 1)[0] + "." + out[3:]
    return template + out


#: module names that differ in current transformers from the checkpoint keys (input, output)
_MODULES = {
    "vit": (r"layers\.\d+\.attention", r"layers\.\d+\.attention\.o_proj"),
}


def patterns(model_type: str) -> tuple[str, str]:
    """Module-name patterns (attention input, attention output projection) of ``model_type``: the
    checkpoint's own names, or (where they differ) the module names of current transformers."""
    template, _, out, _, _ = KEYS[model_type]

    def rx(path: str) -> str:
        return path.format(i=r"\d+").rstrip(".").replace(".", r"\.")

    pin, pout = rx(template), rx(_out_path(template, out))
    if model_type in _MODULES:
        pin, pout = f"(?:{pin}|{_MODULES[model_type][0]})", f"(?:{pout}|{_MODULES[model_type][1]})"
    return rf"(^|\.){pin}$", rf"(^|\.){pout}$"


def _shape(mt: str, cfg: ConfigView) -> tuple[int, int, int, int]:
    """(d_model, heads, layers, d_head)."""
    if mt == "distilbert":
        d, H, L = cfg.int("dim"), cfg.int("n_heads"), cfg.int("n_layers")
    elif mt in ("whisper", "bart"):
        d, H, L = cfg.int("d_model"), cfg.int("encoder_attention_heads"), cfg.int("encoder_layers")
    elif mt == "t5":
        d, H, L = cfg.int("d_model"), cfg.int("num_heads"), cfg.int("num_layers")
        return d, H, L, cfg.int("d_kv")
    else:
        d, H, L = cfg.int("hidden_size"), cfg.int("num_attention_heads"), cfg.int("num_hidden_layers")
    if d % H:
        raise ValueError(f"config: expected a model dimension divisible by the head count {H}, got {d}")
    return d, H, L, d // H


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """A streamed :class:`HeadWeights` of an encoder's self-attention."""
    mt = str(config.get("model_type"))
    if mt == "clip":
        config = {**(config.get("text_config") or {}), "model_type": "clip_text_model"}
    cfg = ConfigView(config)
    d, H, L, k = _shape(mt, cfg)
    template, (nq, nk, nv), out, causal, pre_norm = KEYS[mt]
    anchor = template.format(i=0) + nq + ".weight"
    p = "text_model." if mt == "clip" and "text_model." + anchor in state else find_prefix(state, anchor, mt)
    out_t = _out_path(template, out)
    scale = 1.0 if mt == "t5" else k**-0.5
    rel = None
    if mt in ("t5", "mpnet"):
        key = (
            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
            if mt == "t5"
            else "encoder.relative_attention_bias.weight"
        )
        nb = cfg.int("relative_attention_num_buckets", default=32)
        table = get_tensor(state, p + key, (nb, H), dtype)
        rel = RelativeBias(table, int(cfg.get("relative_attention_max_distance", default=128)), True)

    def read(i: int) -> LayerHeads:
        a = p + template.format(i=i)
        o = p + out_t.format(i=i)

        def w(key: str, shape: tuple[int, ...]) -> torch.Tensor:
            return get_tensor(state, key, shape, dtype)

        def b(key: str, n: int, like: torch.Tensor) -> torch.Tensor:
            return w(key, (n,)) if key in state else torch.zeros(n, dtype=like.dtype)

        wq, wk, wv = (w(a + n + ".weight", (H * k, d)) for n in (nq, nk, nv))
        wo = w(o + ".weight", (d, H * k))
        return LayerHeads(
            W_Q=linear_to_heads(wq.T, H, k),
            W_K=linear_to_heads(wk.T, H, k),
            W_V=linear_to_heads(wv.T, H, k),
            W_O=out_linear_to_heads(wo.T, H, k),
            b_Q=b(a + nq + ".bias", H * k, wq).reshape(H, k),
            b_K=b(a + nk + ".bias", H * k, wq).reshape(H, k),
            b_V=b(a + nv + ".bias", H * k, wq).reshape(H, k),
            b_O=b(o + ".bias", d, wq),
            scale=scale,
            rel_bias=rel,
        )

    return HeadWeights(
        layers=LayerSource(read, n_layers=L, n_heads=H, n_kv_heads=H, d_model=d, d_head=k),
        architecture="encoder",
        model_type=str(config.get("model_type")),
        causal=causal,
        pre_norm=pre_norm,
        extra={"stages": {"relative_bias": rel is not None}},
    )
