"""Small random transformers models (no download) with every bias set to non-zero random values.

Shared by the converter, diagnostics and inspect tests (``build_model`` fixture in conftest.py).
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")


def randomise_biases(model: torch.nn.Module, seed: int = 0) -> None:
    """Fresh models start with zero biases, which would hide a dropped bias: make them all non-zero."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def build(kind: str, seed: int = 0) -> torch.nn.Module:
    """A tiny float64 model of family ``kind`` with random weights and random biases, eager attention."""
    torch.manual_seed(seed)
    tf = transformers
    if kind == "bert":
        cfg = tf.BertConfig(
            hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=50
        )
        model = tf.BertModel(cfg)
    elif kind == "roberta":
        cfg = tf.RobertaConfig(
            hidden_size=48, num_hidden_layers=2, num_attention_heads=6, intermediate_size=64, vocab_size=50
        )
        model = tf.RobertaForMaskedLM(cfg)  # state dict under the "roberta." prefix
    elif kind == "albert":
        cfg = tf.AlbertConfig(
            hidden_size=48,
            embedding_size=16,
            num_hidden_layers=4,
            num_hidden_groups=2,
            num_attention_heads=4,
            intermediate_size=64,
            vocab_size=50,
        )
        model = tf.AlbertModel(cfg)
    elif kind == "gpt2":
        cfg = tf.GPT2Config(n_embd=48, n_layer=3, n_head=4, vocab_size=50, bos_token_id=0, eos_token_id=0)
        model = tf.GPT2Model(cfg)
    elif kind == "gpt2-layerscale":
        cfg = tf.GPT2Config(
            n_embd=48,
            n_layer=3,
            n_head=4,
            vocab_size=50,
            bos_token_id=0,
            eos_token_id=0,
            scale_attn_by_inverse_layer_idx=True,
        )
        model = tf.GPT2LMHeadModel(cfg)  # "transformer." prefix
    elif kind == "llama-gqa":
        cfg = tf.LlamaConfig(
            hidden_size=48,
            num_hidden_layers=2,
            num_attention_heads=6,
            num_key_value_heads=2,
            intermediate_size=64,
            vocab_size=50,
            attention_bias=True,
            rope_theta=500.0,
        )
        model = tf.LlamaForCausalLM(cfg)  # "model." prefix
    elif kind == "llama-headdim":
        cfg = tf.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=12,
            intermediate_size=64,
            vocab_size=50,
        )
        model = tf.LlamaModel(cfg)
    else:  # pragma: no cover
        raise KeyError(kind)
    model = model.double().eval()
    model.set_attn_implementation("eager")
    randomise_biases(model, seed)
    return model
