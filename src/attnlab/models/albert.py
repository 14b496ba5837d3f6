"""ALBERT: BERT-style projections stored once per layer *group* and shared across layers.

Key map (group ``g``, inner layer ``j``, under an optional prefix such as ``albert.``)::

    encoder.albert_layer_groups.g.albert_layers.j.attention.query.{weight,bias} -> W_Q, b_Q  (H·k, d)
    ... .attention.key / .attention.value                                     -> W_K / W_V
    ... .attention.dense.{weight,bias}                                         -> W_O, b_O  (d, H·k)

Layer ``i`` (of ``num_hidden_layers``) runs group ``⌊i / (L/G)⌋``, whose ``inner_group_num`` layers
are applied in turn; the resulting sequence of attention layers repeats the same weights, and
``HeadWeights.layers`` repeats the same :class:`LayerHeads` object accordingly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource, default_scale
from attnlab.models._common import ConfigView, find_prefix, get_tensor, linear_to_heads, out_linear_to_heads

MODEL_TYPES = ("albert",)
ATTENTION_INPUT = r"albert_layers\.\d+\.attention$"
ATTENTION_OUTPUT = r"albert_layers\.\d+\.attention\.dense$"


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """Convert an ALBERT state dict to :class:`HeadWeights` (shared layers are the same object)."""
    cfg = ConfigView(config)
    d = cfg.int("hidden_size")
    H = cfg.int("num_attention_heads")
    L = cfg.int("num_hidden_layers")
    G = cfg.int("num_hidden_groups", default=1)
    inner = cfg.int("inner_group_num", default=1)
    if d % H:
        raise ValueError(f"config.hidden_size: expected a multiple of num_attention_heads = {H}, got {d}")
    k = d // H
    p = find_prefix(state, "encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight", "ALBERT")

    def group_layer(g: int, j: int) -> LayerHeads:
        a = f"{p}encoder.albert_layer_groups.{g}.albert_layers.{j}.attention."

        def w(name: str, shape: tuple[int, ...]) -> torch.Tensor:
            return get_tensor(state, a + name, shape, dtype)

        return LayerHeads(
            W_Q=linear_to_heads(w("query.weight", (H * k, d)).T, H, k),
            W_K=linear_to_heads(w("key.weight", (H * k, d)).T, H, k),
            W_V=linear_to_heads(w("value.weight", (H * k, d)).T, H, k),
            W_O=out_linear_to_heads(w("dense.weight", (d, H * k)).T, H, k),
            b_Q=w("query.bias", (H * k,)).reshape(H, k),
            b_K=w("key.bias", (H * k,)).reshape(H, k),
            b_V=w("value.bias", (H * k,)).reshape(H, k),
            b_O=w("dense.bias", (d,)),
            scale=default_scale(k),
        )

    # attention layer i·inner + j runs group ⌊i / (L/G)⌋, inner layer j
    order = [(int(i / (L / G)), j) for i in range(L) for j in range(inner)]
    distinct = len(set(order))
    return HeadWeights(
        layers=LayerSource(
            lambda i: group_layer(*order[i]),
            n_layers=len(order),
            n_heads=H,
            n_kv_heads=H,
            d_model=d,
            d_head=k,
            key=lambda i: order[i],
        ),
        architecture="albert",
        model_type="albert",
        shared_layers=distinct < len(order),
        pre_norm=False,
        extra={"num_hidden_groups": G, "inner_group_num": inner, "distinct_layers": distinct},
    )
