"""Checkpoints -> :class:`~attnlab.core.heads.HeadWeights`, offline, one converter per family.

Families: BERT/MiniLM/RoBERTa (``bert``), ALBERT (``albert``, shared layers), GPT-2 (``gpt2``, fused
Conv1D), and the ``q/k/v/o`` decoders of :mod:`attnlab.models.decoder` (Llama, Mistral, Mixtral,
Qwen2/3 and their MoE, Gemma 1/2/3, Phi, Phi-3, OLMo 1/2, Granite, StarCoder2, StableLM, Cohere, GPT-J,
GPT-Neo, OPT, XGLM), the fused-qkv decoders (GPT-NeoX, BLOOM, GPT-BigCode, Falcon, MPT, CodeGen), the
encoders of :mod:`attnlab.models.encoders`, multi-head latent attention (DeepSeek-V2/V3,
:mod:`attnlab.models.mla`); GGUF files (:mod:`attnlab.models.gguf_file`) through the same converters;
grouped K/V are kept unexpanded. :data:`REFUSED` names the architectures that are not
reproduced exactly, each with its reason. With ``stream=True`` layers are read from the checkpoint
one at a time, in its dtype.

>>> heads = load("minilm")                  # the bundled all-MiniLM-L6-v2, no network  # doctest: +SKIP
>>> heads.n_layers, heads.n_heads, heads.d_head                                       # doctest: +SKIP
(6, 12, 32)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from attnlab.core.heads import HeadWeights
from attnlab.models import albert, bert, decoder, encoders, fused, gpt2, hub, mla
from attnlab.models.checkpoint import bundled_model_path, offline, read_config, read_folder, resolve_folder
from attnlab.models.gguf_file import is_gguf, read_gguf

__all__ = [
    "FAMILIES",
    "NO_ATTENTION",
    "REFUSED",
    "REFUSED_FEATURES",
    "architectures",
    "bundled_model_path",
    "family_of",
    "from_state_dict",
    "from_transformers",
    "load",
    "offline",
    "resolve_source",
]

#: family name -> converter module (``MODEL_TYPES``, ``convert``, ``ATTENTION_INPUT``, ``ATTENTION_OUTPUT``)
FAMILIES: dict[str, ModuleType] = {
    "bert": bert,
    "albert": albert,
    "gpt2": gpt2,
    "decoder": decoder,
    "fused": fused,
    "encoders": encoders,
    "mla": mla,
}

#: model_type -> why it is refused (not reproduced exactly by HeadWeights)
REFUSED: dict[str, str] = {
    "deberta-v2": "disentangled attention adds content-to-position and position-to-content scores built "
    "from shared relative embeddings, not expressible as per-head stages",
    "deberta": "disentangled attention (as deberta-v2)",
}

#: model_type -> what it has instead of attention layers (nothing for attnlab to read)
NO_ATTENTION: dict[str, str] = {
    "mamba": "a state-space model (selective scan)",
    "mamba2": "a state-space model (structured state-space duality)",
    "falcon_mamba": "a state-space model (Mamba architecture)",
    "rwkv": "a recurrent model (RWKV time mixing)",
}

#: configurations of supported families that are refused, and why
REFUSED_FEATURES: dict[str, str] = {
    "olmo with clip_qkv": "q, k and v are clipped elementwise before attention (not a HeadWeights stage)",
    "falcon with alibi": "the reference rounds the ALiBi bias to bfloat16",
    "bert-family with position_embedding_type relative_key(_query)": "relative position embeddings inside "
    "the scores are not reproduced",
    "rope_type outside default/linear/dynamic/llama3/yarn/longrope": "only these six variants are reproduced",
    "mpt with attn_config clip_qkv, qk_ln, alibi false, alibi_bias_max != 8, prefix_lm or multi-query "
    "attn_type": "transformers' MPT ignores or clips them; not reproduced",
    "deepseek_v2/v3 with num_key_value_heads != num_attention_heads": "every head reads its own key from "
    "the shared latent; grouping the expanded keys is not reproduced",
}
BUNDLED_NAME = "all-MiniLM-L6-v2"


def family_of(config: Mapping[str, Any]) -> str:
    """The converter family of a config (by its ``model_type``); one clear error when unsupported."""
    mt = config.get("model_type")
    for name, mod in FAMILIES.items():
        if mt in mod.MODEL_TYPES:
            return name
    if mt in NO_ATTENTION:
        raise ValueError(
            f"model_type: expected a model with attention layers, got {mt!r} ({NO_ATTENTION[mt]}: "
            "no attention layers)"
        )
    if mt in REFUSED:
        raise ValueError(
            f"model_type: expected an architecture reproduced exactly, got {mt!r} ({REFUSED[mt]})"
        )
    known = ", ".join(t for m in FAMILIES.values() for t in m.MODEL_TYPES)
    raise ValueError(f"model_type: expected a supported architecture ({known}), got {mt!r}")


def architectures() -> dict[str, Any]:
    """``{"supported": {model_type: family}, "refused": {model_type: reason}, "no_attention": {...},
    "refused_configurations": {...}}``."""
    sup = {t: name for name, m in FAMILIES.items() for t in m.MODEL_TYPES}
    return {
        "supported": dict(sorted(sup.items())),
        "refused": dict(sorted(REFUSED.items())),
        "no_attention": dict(sorted(NO_ATTENTION.items())),
        "refused_configurations": dict(REFUSED_FEATURES),
    }


def from_state_dict(
    state: Mapping[str, torch.Tensor],
    config: Mapping[str, Any] | Any,
    *,
    dtype: torch.dtype | None = torch.float32,
    name: str = "",
    stream: bool = False,
) -> HeadWeights:
    """Convert a state dict with its model config (a dict or a ``transformers`` config object).

    Parameters
    ----------
    state : mapping of str to Tensor
        the checkpoint's tensors (prefixes such as ``bert.`` or ``model.`` are found automatically).
    config : mapping or transformers.PretrainedConfig
        the model config; it names the architecture (``model_type``) and the head counts.
    dtype : torch.dtype or None
        dtype of the returned weights (float32 by default; None keeps the checkpoint's).
    name : str
        a label for tables.
    stream : bool
        read each layer from ``state`` when it is accessed instead of converting all now.
    """
    if not isinstance(state, Mapping):
        raise ValueError(f"state: expected a mapping of names to tensors, got {type(state).__name__}")
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    if not isinstance(config, Mapping):
        raise ValueError(f"config: expected a dict or a transformers config, got {type(config).__name__}")
    if dtype not in (torch.float32, torch.float64, None):
        raise ValueError(f"dtype: expected torch.float32, torch.float64 or None, got {dtype}")
    fam = family_of(config)
    heads = FAMILIES[fam].convert(state, config, dtype)
    heads = dataclasses.replace(
        heads, name=name or str(config.get("_name_or_path") or config.get("model_type"))
    )
    return heads if stream else heads.materialize()


def from_transformers(
    model: Any, *, dtype: torch.dtype | None = torch.float32, name: str = ""
) -> HeadWeights:
    """Convert an in-memory ``transformers`` model (its ``state_dict`` and ``config``)."""
    if not (hasattr(model, "state_dict") and hasattr(model, "config")):
        raise ValueError(f"model: expected a transformers model, got {type(model).__name__}")
    return from_state_dict(model.state_dict(), model.config, dtype=dtype, name=name)


def resolve_source(source: str | os.PathLike) -> tuple[Path, str]:
    """The checkpoint folder and a display name for ``"minilm"``, a path, or a hub id ``ORG/NAME`` found
    in the local Hugging Face cache (:mod:`attnlab.models.hub`)."""
    if isinstance(source, str) and source.lower() in ("minilm", "all-minilm-l6-v2", BUNDLED_NAME.lower()):
        return bundled_model_path(), BUNDLED_NAME
    if is_gguf(source):  # a single GGUF file: its folder holds no config.json
        return Path(source).parent, Path(source).stem
    if hub.is_hub_id(source):  # ORG/NAME, not a local path: the local Hugging Face cache, never the network
        return hub.resolve(str(source)), str(source)
    folder = resolve_folder(source)
    return folder, Path(source).name or str(source)


def load(
    source: str | os.PathLike | Mapping[str, torch.Tensor] | Any = "minilm",
    *,
    config: Mapping[str, Any] | Any | None = None,
    dtype: torch.dtype | None = torch.float32,
    name: str = "",
    stream: bool = False,
) -> HeadWeights:
    """Load a model's attention heads, never touching the network.

    Parameters
    ----------
    source : "minilm", path, transformers model or state dict
        ``"minilm"`` (default) is the bundled all-MiniLM-L6-v2; a path is a local Hugging Face folder
        (or a weights file inside one, or a ``.gguf`` file); ``ORG/NAME`` is a model in the local Hugging
        Face cache (``HF_HUB_CACHE``, ``HF_HOME``, the default cache); a state dict needs ``config``.
    config : mapping or transformers config, optional
        required with a state dict, ignored otherwise.
    dtype : torch.dtype or None
        float32 (default), float64, or None for the checkpoint's own dtype.
    name : str
        label for tables (default: derived from the source).
    stream : bool
        layers are read from the checkpoint when accessed (one resident at a time) instead of all now.

    Returns
    -------
    HeadWeights
    """
    with offline():
        if isinstance(source, (str, os.PathLike)) and is_gguf(source):
            cfg, state = read_gguf(source)  # attention tensors only, dequantised when accessed
            return from_state_dict(state, cfg, dtype=dtype, name=name or Path(source).stem, stream=stream)
        if isinstance(source, (str, os.PathLike)):
            folder, default_name = resolve_source(source)
            family_of(read_config(folder))  # an unknown architecture fails before any weight is read
            cfg, state = read_folder(folder if not Path(source).is_file() else source)
            return from_state_dict(state, cfg, dtype=dtype, name=name or default_name, stream=stream)
        if isinstance(source, Mapping):
            if config is None:
                raise ValueError("config: expected the model config with a state dict, got None")
            return from_state_dict(source, config, dtype=dtype, name=name, stream=stream)
        if hasattr(source, "state_dict") and hasattr(source, "config"):
            return from_transformers(source, dtype=dtype, name=name)
    raise ValueError(
        f"source: expected 'minilm', a checkpoint path, a transformers model or a state dict, "
        f"got {type(source).__name__}"
    )
