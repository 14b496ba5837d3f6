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


# ------------------------------------------------------------------------------------------------
# tiny random configs of every supported decoder family, for the transformers-as-oracle tests

_BASE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 40}
_GQA = {**_BASE, "num_key_value_heads": 2}

#: name -> (model_type, config kwargs, sequence length). Windows, contexts and caps are small so
#: that the features act on a 12-token input.
FAMILY_CONFIGS: dict[str, tuple[str, dict, int]] = {
    "llama": ("llama", {**_GQA, "attention_bias": True}, 12),
    "mistral-window": ("mistral", {**_GQA, "sliding_window": 4}, 12),
    "mixtral": (
        "mixtral",
        {**_GQA, "num_local_experts": 2, "num_experts_per_tok": 1, "sliding_window": 5},
        12,
    ),
    "qwen2-window": (
        "qwen2",
        {**_GQA, "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1},
        12,
    ),
    "qwen3": ("qwen3", {**_GQA, "head_dim": 12}, 12),
    "gemma": ("gemma", {**_GQA, "head_dim": 8}, 12),
    "gemma2": (
        "gemma2",
        {
            **_GQA,
            "head_dim": 8,
            "sliding_window": 4,
            "attn_logit_softcapping": 2.0,
            "query_pre_attn_scalar": 6,
        },
        12,
    ),
    "gemma3_text": (
        "gemma3_text",
        {
            **_GQA,
            "num_hidden_layers": 3,
            "head_dim": 8,
            "sliding_window": 4,
            "sliding_window_pattern": 2,
            "query_pre_attn_scalar": 8,
        },
        12,
    ),
    "phi3": ("phi3", {**_GQA, "partial_rotary_factor": 0.5, "pad_token_id": 0}, 12),
    "phi": ("phi", {**_BASE, "partial_rotary_factor": 0.5}, 12),
    "olmo": ("olmo", {**_GQA}, 12),
    "olmo2": ("olmo2", {**_GQA}, 12),
    "starcoder2": ("starcoder2", {**_GQA, "sliding_window": 5, "use_bias": True}, 12),
    "granite": ("granite", {**_GQA, "attention_multiplier": 0.3}, 12),
    "stablelm": (
        "stablelm",
        {**_GQA, "qk_layernorm": True, "use_qkv_bias": True, "partial_rotary_factor": 0.5},
        12,
    ),
    "cohere": ("cohere", {**_GQA, "use_qk_norm": True}, 12),
    "gptj": ("gptj", {"n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": 64}, 12),
    "gpt_neo": (
        "gpt_neo",
        {
            "hidden_size": 32,
            "num_layers": 2,
            "num_heads": 4,
            "window_size": 4,
            "attention_types": [[["global", "local"], 1]],
            "max_position_embeddings": 64,
        },
        12,
    ),
    "opt": (
        "opt",
        {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "ffn_dim": 40,
            "word_embed_proj_dim": 32,
            "max_position_embeddings": 64,
        },
        12,
    ),
}

FAMILY_CONFIGS["modernbert"] = (
    "modernbert",
    {
        **_BASE,
        "num_hidden_layers": 3,
        "local_attention": 6,
        "global_attn_every_n_layers": 2,
        "pad_token_id": 0,
    },
    12,
)

#: RoPE variants on a tiny Llama (max_position_embeddings 8 < 12 tokens, so context extension acts)
ROPE_VARIANTS: dict[str, dict] = {
    "default": {"rope_type": "default", "rope_theta": 100.0},
    "linear": {"rope_type": "linear", "rope_theta": 100.0, "factor": 3.0},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 100.0, "factor": 2.0},
    "llama3": {
        "rope_type": "llama3",
        "rope_theta": 500.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8,
    },
    "yarn": {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "original_max_position_embeddings": 8},
    "longrope": {
        "rope_type": "longrope",
        "rope_theta": 100.0,
        "short_factor": [1.0, 1.5, 2.0, 3.0],
        "long_factor": [2.0, 3.0, 5.0, 9.0],
        "original_max_position_embeddings": 4,
    },
}


def randomise(model: torch.nn.Module, seed: int = 0) -> None:
    """Every parameter random and O(1)-scaled (scores of order one, so every stage matters)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 1.5 / p.shape[-1] ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))


def build_family(name: str, seed: int = 0, rope: dict | None = None) -> torch.nn.Module:
    """A tiny float32 base model of ``FAMILY_CONFIGS[name]`` (or a Llama with ``rope``), eager attention."""
    torch.manual_seed(seed)
    if rope is not None:
        mt, kw = "llama", {**_GQA, "head_dim": 8, "max_position_embeddings": 8, "rope_parameters": rope}
    else:
        mt, kw, _ = FAMILY_CONFIGS[name]
    cfg = transformers.AutoConfig.for_model(mt, vocab_size=40, **kw)
    cfg._attn_implementation = "eager"
    model = transformers.AutoModel.from_config(cfg, attn_implementation="eager")
    randomise(model, seed)
    return model.float().eval()


FAMILY_CONFIGS["qwen3_moe"] = (
    "qwen3_moe",
    {**_GQA, "head_dim": 12, "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 16},
    12,
)


#: name -> (model_type, config kwargs, transformers class, input kind, sequence length)
ENCODER_CONFIGS: dict[str, tuple[str, dict, str, str, int]] = {
    "gpt_neox": ("gpt_neox", {**_BASE, "rotary_pct": 0.5, "attention_bias": True}, "AutoModel", "ids", 12),
    "bloom": ("bloom", {"hidden_size": 32, "n_layer": 2, "n_head": 4}, "AutoModel", "ids", 12),
    "bloom-6-heads": ("bloom", {"hidden_size": 36, "n_layer": 1, "n_head": 6}, "AutoModel", "ids", 12),
    "gpt_bigcode": (
        "gpt_bigcode",
        {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64},
        "AutoModel",
        "ids",
        12,
    ),
    "distilbert": (
        "distilbert",
        {"dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 40},
        "AutoModel",
        "ids",
        12,
    ),
    "electra": ("electra", {**_BASE, "embedding_size": 16}, "AutoModel", "ids", 12),
    "vit": ("vit", {**_BASE, "image_size": 8, "patch_size": 4}, "AutoModel", "pixels", 5),
    "clip_text_model": (
        "clip_text_model",
        {**_BASE, "max_position_embeddings": 16},
        "CLIPTextModel",
        "ids",
        12,
    ),
    "clip_vision_model": (
        "clip_vision_model",
        {**_BASE, "image_size": 8, "patch_size": 4},
        "CLIPVisionModel",
        "pixels",
        5,
    ),
    "whisper": (
        "whisper",
        {
            "d_model": 32,
            "encoder_layers": 2,
            "encoder_attention_heads": 4,
            "decoder_layers": 1,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 40,
            "decoder_ffn_dim": 40,
            "num_mel_bins": 8,
            "max_source_positions": 6,
            "max_target_positions": 8,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "decoder_start_token_id": 1,
        },
        "AutoModel",
        "audio",
        6,
    ),
    "bart": (
        "bart",
        {
            "d_model": 32,
            "encoder_layers": 2,
            "encoder_attention_heads": 4,
            "decoder_layers": 1,
            "decoder_attention_heads": 4,
            "encoder_ffn_dim": 40,
            "decoder_ffn_dim": 40,
            "max_position_embeddings": 32,
        },
        "AutoModel",
        "ids",
        12,
    ),
    "t5": (
        "t5",
        {
            "d_model": 32,
            "d_kv": 8,
            "d_ff": 40,
            "num_layers": 2,
            "num_heads": 4,
            "relative_attention_num_buckets": 8,
            "relative_attention_max_distance": 10,
        },
        "T5EncoderModel",
        "ids",
        24,
    ),
    "mpnet": (
        "mpnet",
        {**_BASE, "max_position_embeddings": 40},  # 32 buckets: transformers' MPNet ignores other counts
        "AutoModel",
        "ids",
        24,
    ),
}


_FALCON = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "bias": True}
ENCODER_CONFIGS["falcon-mq"] = ("falcon", {**_FALCON, "multi_query": True}, "AutoModel", "ids", 12)
ENCODER_CONFIGS["falcon-new"] = (
    "falcon",
    {**_FALCON, "new_decoder_architecture": True, "num_kv_heads": 2},
    "AutoModel",
    "ids",
    12,
)
ENCODER_CONFIGS["falcon-mha"] = ("falcon", {**_FALCON, "multi_query": False}, "AutoModel", "ids", 12)


def build_encoder(name: str, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """A tiny float32 model of ``ENCODER_CONFIGS[name]`` and its inputs (batch 2)."""
    mt, kw, cls, kind, n = ENCODER_CONFIGS[name]
    return _build(mt, kw, cls, kind, n, seed)


def _build(
    mt: str, kw: dict, cls: str, kind: str, n: int, seed: int, rope: dict | None = None
) -> tuple[torch.nn.Module, dict]:
    torch.manual_seed(seed)
    cfg = transformers.AutoConfig.for_model(mt, vocab_size=40, **kw)
    cfg._experts_implementation = "eager"  # mixture-of-experts layers in float64 (no grouped matmul)
    if rope is not None:  # merged into the config's own (flat, or nested per layer type)
        rp = dict(cfg.rope_parameters)
        if all(isinstance(v, dict) for v in rp.values()):
            rp = {t: {**v, **rope.get(t, rope)} for t, v in rp.items()}
        else:
            rp.update(rope)
        cfg.rope_parameters = rp
    for key in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        if key in kw:  # some configs reset special ids in __init__
            setattr(cfg, key, kw[key])
    model_cls = getattr(transformers, cls)
    model = model_cls.from_config(cfg, attn_implementation="eager") if cls == "AutoModel" else model_cls(cfg)
    model.set_attn_implementation("eager")
    randomise(model, seed)
    g = torch.Generator().manual_seed(3)
    if kind == "ids":
        inputs = {"input_ids": torch.randint(3, 40, (2, n), generator=g)}
    elif kind == "pixels":
        inputs = {"pixel_values": torch.randn(2, 3, 8, 8, generator=g)}
    else:
        inputs = {
            "input_features": torch.randn(2, 8, 2 * n, generator=g),
            "decoder_input_ids": torch.randint(3, 40, (2, 2), generator=g),
        }
    return model.float().eval(), inputs


_MLA = {
    **_BASE,
    "num_key_value_heads": 4,
    "kv_lora_rank": 10,
    "qk_nope_head_dim": 6,
    "qk_rope_head_dim": 4,
    "v_head_dim": 10,
    "moe_intermediate_size": 16,
    "n_routed_experts": 2,
    "num_experts_per_tok": 1,
    "n_shared_experts": 1,
    "first_k_dense_replace": 1,
    "max_position_embeddings": 64,
}
FAMILY_CONFIGS["deepseek_v2"] = ("deepseek_v2", {**_MLA, "q_lora_rank": None}, 12)
FAMILY_CONFIGS["deepseek_v3"] = (
    "deepseek_v3",
    {**_MLA, "q_lora_rank": 12, "n_group": 1, "topk_group": 1},
    12,
)


FAMILY_CONFIGS["qwen2_moe"] = (
    "qwen2_moe",
    {
        **_GQA,
        "num_experts": 2,
        "num_experts_per_tok": 1,
        "moe_intermediate_size": 16,
        "shared_expert_intermediate_size": 16,
    },
    12,
)
FAMILY_CONFIGS["xglm"] = (
    "xglm",
    {"d_model": 32, "num_layers": 2, "attention_heads": 4, "ffn_dim": 40, "max_position_embeddings": 64},
    12,
)
ENCODER_CONFIGS["codegen"] = (
    "codegen",
    {"n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4, "n_positions": 64},
    "AutoModel",
    "ids",
    12,
)
ENCODER_CONFIGS["mpt"] = (
    "mpt",
    {"d_model": 48, "n_layers": 2, "n_heads": 6, "max_seq_len": 64},
    "AutoModel",
    "ids",
    12,
)


# ------------------------------------------------------------------------------------------------
# the config-flag matrix: every attention-relevant config field at a non-default value

_LINEAR_ROPE = {"rope_type": "linear", "factor": 2.0, "rope_theta": 50.0}

#: "family/field=value" -> (base name in FAMILY_CONFIGS or ENCODER_CONFIGS, config overrides).
#: ``rope_parameters`` overrides are merged into the base config's own (partial factors kept).
FLAG_VARIANTS: dict[str, tuple[str, dict]] = {
    "llama/attention_bias=False": ("llama", {"attention_bias": False}),
    "llama/head_dim=12": ("llama", {"head_dim": 12}),
    "llama/rope_parameters=linear": ("llama", {"rope_parameters": _LINEAR_ROPE}),
    "llama/max_position_embeddings=8": (
        "llama",
        {"max_position_embeddings": 8, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
    ),
    "mistral/sliding_window=None": ("mistral-window", {"sliding_window": None}),
    "mistral/sliding_window=3": ("mistral-window", {"sliding_window": 3}),
    "mistral/rope_parameters=linear": ("mistral-window", {"rope_parameters": _LINEAR_ROPE}),
    "mixtral/sliding_window=3": ("mixtral", {"sliding_window": 3}),
    "qwen2/layer_types": (
        "qwen2-window",
        {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 3},
    ),
    "qwen2/use_sliding_window=False": ("qwen2-window", {"use_sliding_window": False}),
    "qwen2/rope_parameters=linear": ("qwen2-window", {"rope_parameters": _LINEAR_ROPE}),
    "qwen3/attention_bias=True": ("qwen3", {"attention_bias": True}),
    "qwen3/rms_norm_eps=0.5": ("qwen3", {"rms_norm_eps": 0.5}),
    "qwen3/sliding_window=3": (
        "qwen3",
        {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1},
    ),
    "qwen3/layer_types": (
        "qwen3",
        {
            "use_sliding_window": True,
            "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 4,
        },
    ),
    "qwen3_moe/attention_bias=True": ("qwen3_moe", {"attention_bias": True}),
    "qwen3_moe/rms_norm_eps=0.5": ("qwen3_moe", {"rms_norm_eps": 0.5}),
    "qwen3_moe/sliding_window=3": (
        "qwen3_moe",
        {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 1},
    ),
    "gemma/attention_bias=True": ("gemma", {"attention_bias": True}),
    "gemma/use_bidirectional_attention=True": ("gemma", {"use_bidirectional_attention": True}),
    "gemma2/attn_logit_softcapping=None": ("gemma2", {"attn_logit_softcapping": None}),
    "gemma2/sliding_window=3": ("gemma2", {"sliding_window": 3}),
    "gemma2/layer_types": ("gemma2", {"layer_types": ["full_attention", "sliding_attention"]}),
    "gemma2/use_bidirectional_attention=True": ("gemma2", {"use_bidirectional_attention": True}),
    "gemma2/attention_bias=True": ("gemma2", {"attention_bias": True}),
    "gemma2/query_pre_attn_scalar=2": ("gemma2", {"query_pre_attn_scalar": 2}),
    "gemma3_text/use_bidirectional_attention=True": ("gemma3_text", {"use_bidirectional_attention": True}),
    "gemma3_text/attn_logit_softcapping=2.0": ("gemma3_text", {"attn_logit_softcapping": 2.0}),
    "gemma3_text/rms_norm_eps=0.5": ("gemma3_text", {"rms_norm_eps": 0.5}),
    "gemma3_text/layer_types": (
        "gemma3_text",
        {"layer_types": ["full_attention", "sliding_attention", "full_attention"]},
    ),
    "gemma3_text/rope_parameters=linear": ("gemma3_text", {"rope_parameters": _LINEAR_ROPE}),
    "gemma3_text/attention_bias=True": ("gemma3_text", {"attention_bias": True}),
    "olmo/attention_bias=True": ("olmo", {"attention_bias": True}),
    "olmo2/attention_bias=True": ("olmo2", {"attention_bias": True}),
    "olmo2/rms_norm_eps=0.5": ("olmo2", {"rms_norm_eps": 0.5}),
    "granite/attention_bias=True": ("granite", {"attention_bias": True}),
    "granite/attention_multiplier=2.0": ("granite", {"attention_multiplier": 2.0}),
    "starcoder2/use_bias=False": ("starcoder2", {"use_bias": False}),
    "starcoder2/sliding_window=None": ("starcoder2", {"sliding_window": None}),
    "stablelm/qk_layernorm=False": ("stablelm", {"qk_layernorm": False}),
    "stablelm/use_qkv_bias=False": ("stablelm", {"use_qkv_bias": False}),
    "stablelm/layer_norm_eps=0.5": ("stablelm", {"layer_norm_eps": 0.5}),
    "cohere/use_qk_norm=False": ("cohere", {"use_qk_norm": False}),
    "cohere/attention_bias=True": ("cohere", {"attention_bias": True}),
    "cohere/layer_norm_eps=0.5": ("cohere", {"layer_norm_eps": 0.5}),
    "phi/qk_layernorm=True": ("phi", {"qk_layernorm": True}),
    "phi/layer_norm_eps=0.5": ("phi", {"qk_layernorm": True, "layer_norm_eps": 0.5}),
    "phi/num_key_value_heads=2": ("phi", {"num_key_value_heads": 2}),
    "phi/rope_parameters=linear": ("phi", {"rope_parameters": _LINEAR_ROPE}),
    "phi3/sliding_window=3": ("phi3", {"sliding_window": 3}),
    "phi3/rope_parameters=theta": ("phi3", {"rope_parameters": {"rope_theta": 50.0}}),  # longrope only
    "gptj/rotary_dim=2": ("gptj", {"rotary_dim": 2}),
    "gpt_neo/window_size=3": ("gpt_neo", {"window_size": 3}),
    "gpt_neo/attention_types": ("gpt_neo", {"attention_types": [[["local", "global"], 1]]}),
    "opt/enable_bias=False": ("opt", {"enable_bias": False}),
    "opt/do_layer_norm_before=False": ("opt", {"do_layer_norm_before": False}),
    "modernbert/attention_bias=True": ("modernbert", {"attention_bias": True}),
    "modernbert/local_attention=4": ("modernbert", {"local_attention": 4}),
    "modernbert/layer_types": (
        "modernbert",
        {"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]},
    ),
    "modernbert/rope_parameters=linear": ("modernbert", {"rope_parameters": _LINEAR_ROPE}),
    "gpt_neox/attention_bias=False": ("gpt_neox", {"attention_bias": False}),
    "gpt_neox/rope_parameters=linear": ("gpt_neox", {"rope_parameters": _LINEAR_ROPE}),
    "gpt_bigcode/multi_query=False": ("gpt_bigcode", {"multi_query": False}),
    "gpt_bigcode/scale_attn_weights=False": ("gpt_bigcode", {"scale_attn_weights": False}),
    "gpt_bigcode/attention_softmax_in_fp32=False": (
        "gpt_bigcode",
        {"attention_softmax_in_fp32": False, "scale_attention_softmax_in_fp32": False},
    ),
    "falcon/bias=False": ("falcon-new", {"bias": False}),
    "falcon/num_kv_heads=1": ("falcon-new", {"num_kv_heads": 1}),
    "falcon/parallel_attn=False": ("falcon-mha", {"parallel_attn": False}),
    "falcon/rope_parameters=linear": ("falcon-mq", {"rope_parameters": _LINEAR_ROPE}),
    "electra/is_decoder=True": ("electra", {"is_decoder": True}),
    "vit/qkv_bias=False": ("vit", {"qkv_bias": False}),
    "t5/relative_attention_num_buckets=4": ("t5", {"relative_attention_num_buckets": 4}),
    "t5/relative_attention_max_distance=6": ("t5", {"relative_attention_max_distance": 6}),
}

_BERTS = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 40}
for _mt in ("bert", "roberta", "camembert", "xlm-roberta"):
    ENCODER_CONFIGS[_mt] = (_mt, {**_BERTS, "pad_token_id": 1}, "AutoModel", "ids", 12)
    FLAG_VARIANTS[f"{_mt}/is_decoder=True"] = (_mt, {"is_decoder": True})
ENCODER_CONFIGS["albert"] = (
    "albert",
    {**_BERTS, "num_hidden_layers": 4, "num_hidden_groups": 2, "embedding_size": 16},
    "AutoModel",
    "ids",
    12,
)
ENCODER_CONFIGS["gpt2"] = ("gpt2", {"n_embd": 32, "n_layer": 2, "n_head": 4}, "AutoModel", "ids", 12)
FLAG_VARIANTS.update(
    {
        "albert/inner_group_num=2": ("albert", {"inner_group_num": 2}),
        "gpt2/scale_attn_weights=False": ("gpt2", {"scale_attn_weights": False}),
        "gpt2/scale_attn_by_inverse_layer_idx=True": ("gpt2", {"scale_attn_by_inverse_layer_idx": True}),
        "gpt2/reorder_and_upcast_attn=True": ("gpt2", {"reorder_and_upcast_attn": True}),
        "falcon/multi_query=False": ("falcon-mq", {"multi_query": False}),
        "falcon/new_decoder_architecture=True": (
            "falcon-mha",
            {"new_decoder_architecture": True, "num_kv_heads": 2},
        ),
        "gemma3_text/query_pre_attn_scalar=2": ("gemma3_text", {"query_pre_attn_scalar": 2}),
        "gemma3_text/sliding_window=3": ("gemma3_text", {"sliding_window": 3}),
    }
)
for _name in (
    "cohere",
    "gemma",
    "gemma2",
    "granite",
    "mixtral",
    "olmo",
    "olmo2",
    "qwen3",
    "qwen3_moe",
    "starcoder2",
    "stablelm",
):
    FLAG_VARIANTS[f"{_name}/rope_parameters=linear"] = (_name, {"rope_parameters": _LINEAR_ROPE})

_YARN_MSCALE = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 8,
    "mscale": 0.7,
    "mscale_all_dim": 1.0,
}
FLAG_VARIANTS.update(
    {
        "deepseek_v2/q_lora_rank=12": ("deepseek_v2", {"q_lora_rank": 12}),
        "deepseek_v2/attention_bias=True": ("deepseek_v2", {"attention_bias": True, "q_lora_rank": 12}),
        "deepseek_v2/v_head_dim=7": ("deepseek_v2", {"v_head_dim": 7}),
        "deepseek_v2/rope_parameters=yarn": ("deepseek_v2", {"rope_parameters": _YARN_MSCALE}),
        "deepseek_v3/q_lora_rank=None": ("deepseek_v3", {"q_lora_rank": None}),
        "deepseek_v3/rope_interleave=False": ("deepseek_v3", {"rope_interleave": False}),
        "deepseek_v3/v_head_dim=14": ("deepseek_v3", {"v_head_dim": 14}),
        "deepseek_v3/attention_bias=True": ("deepseek_v3", {"attention_bias": True}),
        "deepseek_v3/rope_parameters=yarn": ("deepseek_v3", {"rope_parameters": _YARN_MSCALE}),
    }
)

FLAG_VARIANTS.update(
    {
        "qwen2_moe/use_sliding_window=True": (
            "qwen2_moe",
            {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 2},
        ),
        "qwen2_moe/qkv_bias=False": ("qwen2_moe", {"qkv_bias": False}),
        "qwen2_moe/rope_parameters=linear": ("qwen2_moe", {"rope_parameters": _LINEAR_ROPE}),
        "xglm/scale_embedding=False": ("xglm", {"scale_embedding": False}),
        "codegen/rotary_dim=8": ("codegen", {"rotary_dim": 8}),
        "mpt/attn_config=softmax_scale": ("mpt", {"attn_config": {"softmax_scale": 0.2}}),
        "mpt/n_heads=8": ("mpt", {"n_heads": 8, "d_model": 32}),
    }
)

#: "family/field=value" -> (base, overrides, the message ``load`` and ``inspect`` give)
REFUSED_VARIANTS: dict[str, tuple[str, dict, str]] = {
    "olmo/clip_qkv=2.0": ("olmo", {"clip_qkv": 2.0}, r"config\.clip_qkv: expected none .* got 2\.0"),
    "falcon/alibi=True": ("falcon-mha", {"alibi": True}, r"config\.alibi: expected false .* got true"),
    "mpt/attn_config=clip_qkv": (
        "mpt",
        {"attn_config": {"clip_qkv": 2.0}},
        r"config\.attn_config\.clip_qkv: expected null .* got 2\.0",
    ),
    "mpt/attn_config=qk_ln": (
        "mpt",
        {"attn_config": {"qk_ln": True}},
        r"config\.attn_config\.qk_ln: expected false .* got true",
    ),
    "mpt/attn_config=alibi_bias_max": (
        "mpt",
        {"attn_config": {"alibi_bias_max": 16}},
        r"config\.attn_config\.alibi_bias_max: expected 8 .* got 16",
    ),
    "deepseek_v2/num_key_value_heads=2": (
        "deepseek_v2",
        {"num_key_value_heads": 2},
        r"config\.num_key_value_heads: expected 4 .* got 2",
    ),
    "deepseek_v3/num_key_value_heads=1": (
        "deepseek_v3",
        {"num_key_value_heads": 1},
        r"config\.num_key_value_heads: expected 4 .* got 1",
    ),
}


def _base(name: str) -> tuple[str, dict, str, str, int]:
    if name in FAMILY_CONFIGS:
        mt, kw, n = FAMILY_CONFIGS[name]
        return mt, kw, "AutoModel", "ids", n
    return ENCODER_CONFIGS[name]


def build_variant(name: str, seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """A tiny float64 model (eager attention) of ``FLAG_VARIANTS[name]`` (or ``REFUSED_VARIANTS``) and its
    inputs (batch 2)."""
    base, over = FLAG_VARIANTS[name] if name in FLAG_VARIANTS else REFUSED_VARIANTS[name][:2]  # type: ignore[misc]
    mt, kw, cls, kind, n = _base(base)
    rope = over.get("rope_parameters")
    kw = {**kw, **{k: v for k, v in over.items() if k != "rope_parameters"}}
    model, inputs = _build(mt, kw, cls, kind, n, seed, rope=rope)
    if name in FLOAT32_ONLY:
        return model, inputs
    return model.double().eval(), {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}


#: variants whose reference runs in float32 only (GPT-2's reordered, upcast attention insists on it;
#: XGLM clamps its scores with a float32 constant of float64's minimum, which overflows)
FLOAT32_ONLY = ("gpt2/reorder_and_upcast_attn=True", "xglm/scale_embedding=False")
