"""BERT family (BERT, MiniLM, RoBERTa, XLM-R, ELECTRA): separate ``query/key/value`` nn.Linear layers.

Key map (per layer ``i``, under an optional prefix such as ``bert.`` or ``roberta.``)::

    encoder.layer.i.attention.self.query.{weight,bias}   -> W_Q, b_Q   weight (H·k, d): y = x Wᵀ + b
    encoder.layer.i.attention.self.key.{weight,bias}     -> W_K, b_K
    encoder.layer.i.attention.self.value.{weight,bias}   -> W_V, b_V
    encoder.layer.i.attention.output.dense.{weight,bias} -> W_O, b_O   weight (d, H·k)

Post-norm: the LayerNorm follows attention, so a layer's attention input is the previous layer's
output (or the embeddings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from attnlab.core.heads import HeadWeights, LayerHeads, LayerSource, default_scale
from attnlab.models._common import ConfigView, find_prefix, get_tensor, linear_to_heads, out_linear_to_heads

MODEL_TYPES = ("bert", "roberta", "xlm-roberta", "camembert", "electra")
#: module names (regex on ``named_modules``): input = attention input; output = attention block output
ATTENTION_INPUT = r"encoder\.layer\.\d+\.attention\.self$"
ATTENTION_OUTPUT = r"encoder\.layer\.\d+\.attention\.output\.dense$"


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """Convert a BERT-family state dict to :class:`HeadWeights`."""
    cfg = ConfigView(config)
    pet = cfg.get("position_embedding_type", default="absolute")
    if pet != "absolute":
        raise ValueError(
            f"config.position_embedding_type: expected 'absolute' (relative embeddings inside the scores are "
            f"not reproduced), got {pet!r}"
        )
    d = cfg.int("hidden_size")
    H = cfg.int("num_attention_heads")
    L = cfg.int("num_hidden_layers")
    if d % H:
        raise ValueError(f"config.hidden_size: expected a multiple of num_attention_heads = {H}, got {d}")
    k = d // H
    p = find_prefix(state, "encoder.layer.0.attention.self.query.weight", "BERT")

    def read(i: int) -> LayerHeads:
        a = f"{p}encoder.layer.{i}.attention."

        def w(name: str, shape: tuple[int, ...]) -> torch.Tensor:
            return get_tensor(state, a + name, shape, dtype)

        return LayerHeads(
            W_Q=linear_to_heads(w("self.query.weight", (H * k, d)).T, H, k),
            W_K=linear_to_heads(w("self.key.weight", (H * k, d)).T, H, k),
            W_V=linear_to_heads(w("self.value.weight", (H * k, d)).T, H, k),
            W_O=out_linear_to_heads(w("output.dense.weight", (d, H * k)).T, H, k),
            b_Q=w("self.query.bias", (H * k,)).reshape(H, k),
            b_K=w("self.key.bias", (H * k,)).reshape(H, k),
            b_V=w("self.value.bias", (H * k,)).reshape(H, k),
            b_O=w("output.dense.bias", (d,)),
            scale=default_scale(k),
        )

    return HeadWeights(
        layers=LayerSource(read, n_layers=L, n_heads=H, n_kv_heads=H, d_model=d, d_head=k),
        architecture="bert",
        model_type=str(cfg.get("model_type", default="bert")),
        causal=bool(cfg.get("is_decoder", default=False)),
        pre_norm=False,
        extra={"layer_norm_eps": cfg.get("layer_norm_eps", default=None)},
    )
