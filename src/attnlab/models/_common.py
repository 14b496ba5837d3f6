"""Helpers shared by the converters: config access, key prefixes, shape-checked tensor reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["ConfigView", "find_prefix", "get_tensor", "has_tensor", "linear_to_heads", "out_linear_to_heads"]


class ConfigView:
    """Read a checkpoint config (a dict) by any of several names, with one clear error when absent."""

    def __init__(self, config: Mapping[str, Any]):
        self.raw = dict(config)

    def get(self, *names: str, default: Any = ...) -> Any:
        for n in names:
            if n in self.raw and self.raw[n] is not None:
                return self.raw[n]
        if default is ...:
            raise ValueError(
                f"config: expected a value for {' or '.join(names)}, got none in the model config"
            )
        return default

    def int(self, *names: str, default: Any = ...) -> int:
        value = self.get(*names, default=default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"config.{names[0]}: expected a positive integer, got {value!r}")
        return value


def find_prefix(state: Mapping[str, torch.Tensor], anchor: str, family: str) -> str:
    """The key prefix (``""``, ``"bert."``, ``"model."``...) under which ``anchor`` appears."""
    hits = sorted((k[: -len(anchor)] for k in state if k.endswith(anchor)), key=len)
    if not hits:
        raise ValueError(
            f"checkpoint: expected {family} attention weights (a key ending in {anchor!r}), "
            f"got none among {len(state)} keys"
        )
    return hits[0]


def has_tensor(state: Mapping[str, torch.Tensor], key: str) -> bool:
    return key in state


def get_tensor(
    state: Mapping[str, torch.Tensor], key: str, shape: Sequence[int], dtype: torch.dtype | None
) -> torch.Tensor:
    """``state[key]`` as ``dtype`` (None: as stored) after checking its shape; a missing key or a wrong
    shape is one error."""
    if key not in state:
        raise ValueError(f"checkpoint: expected tensor {key!r}, got a checkpoint without it (malformed)")
    t = state[key]
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"checkpoint[{key!r}]: expected a tensor, got {type(t).__name__}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"checkpoint[{key!r}]: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    return t.detach().to(device="cpu") if dtype is None else t.detach().to(dtype=dtype, device="cpu")


def linear_to_heads(weight_t: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """An input projection in ``x @ W`` orientation ``(d_model, H·d_head)`` to ``(H, d_model, d_head)``.

    Head ``h`` owns the output columns ``h·d_head .. (h+1)·d_head − 1``.
    """
    d_model = weight_t.shape[0]
    return weight_t.reshape(d_model, n_heads, d_head).permute(1, 0, 2).contiguous()  # (H, d, k)


def out_linear_to_heads(weight_t: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """An output projection in ``z @ W`` orientation ``(H·d_head, d_model)`` to ``(H, d_head, d_model)``."""
    return weight_t.reshape(n_heads, d_head, weight_t.shape[1]).contiguous()  # (H, k, d)


# ------------------------------------------------------------------------------------------------
# config readers shared by the decoders: RoPE in both config layouts, per-layer attention types


def rope_params(config: Mapping[str, Any], layer_type: str | None = None) -> dict[str, Any]:
    """The RoPE parameters of a config in either layout, as one flat dict with ``rope_theta``.

    Layouts: ``rope_parameters`` (flat, or nested per layer type such as ``sliding_attention``), or
    the older ``rope_scaling`` beside a top-level ``rope_theta``. ``max_position_embeddings`` and a
    default ``original_max_position_embeddings`` are filled in as the reference implementation does.
    """
    cfg = ConfigView(config)
    rp = cfg.get("rope_parameters", default=None)
    if isinstance(rp, Mapping) and rp and all(isinstance(v, Mapping) or v is None for v in rp.values()):
        key = layer_type if layer_type in rp else "full_attention"
        rp = rp.get(key) or {}
    if not rp:
        rp = dict(cfg.get("rope_scaling", default=None) or {})
    out = dict(rp)
    out.setdefault("rope_type", out.get("type", "default"))
    if out.get("rope_theta") is None:
        out["rope_theta"] = cfg.get("rope_theta", "rotary_emb_base", "rope_embedding_base", default=10000.0)
    if out.get("partial_rotary_factor") is None:
        prf = cfg.get("partial_rotary_factor", "rotary_pct", default=None)
        if prf is not None:
            out["partial_rotary_factor"] = prf
    out["max_position_embeddings"] = cfg.get("max_position_embeddings", "n_positions", default=None)
    if out["rope_type"] in ("llama3", "yarn", "longrope"):
        omp = cfg.get("original_max_position_embeddings", default=None)
        out.setdefault("original_max_position_embeddings", omp or out["max_position_embeddings"])
        if omp is not None:
            out["original_max_position_embeddings"] = omp
    return out


def make_rope(
    config: Mapping[str, Any], head_dim: int, *, layer_type: str | None = None, interleaved: bool = False
) -> Any:
    """A :class:`~attnlab.core.positions.Rope` from the config; unknown RoPE types are an error."""
    from attnlab.core.positions import ROPE_TYPES, Rope

    p = rope_params(config, layer_type)
    t = p["rope_type"]
    if t not in ROPE_TYPES:
        raise ValueError(
            f"config.rope_parameters.rope_type: expected one of {', '.join(ROPE_TYPES)} "
            f"(reproduced exactly), got {t!r}"
        )
    dim = int(head_dim * float(p.get("partial_rotary_factor", 1.0)))
    keep = {
        k: v for k, v in p.items() if k not in ("rope_type", "type", "rope_theta", "partial_rotary_factor")
    }
    return Rope(theta=float(p["rope_theta"]), dim=dim, rope_type=t, interleaved=interleaved, params=keep)


def layer_kinds(config: Mapping[str, Any], n_layers: int) -> list[str]:
    """``"sliding_attention"`` or ``"full_attention"`` per layer (``layer_types``, else the older flags)."""
    cfg = ConfigView(config)
    lt = cfg.get("layer_types", default=None)
    if lt is not None:
        if len(lt) != n_layers:
            raise ValueError(f"config.layer_types: expected {n_layers} entries, got {len(lt)}")
        return [str(t) for t in lt]
    mt = cfg.get("model_type", default="")
    win = cfg.get("sliding_window", default=None)
    if mt == "qwen3_moe":  # no max_window_layers: every layer slides when the window is used
        use = bool(cfg.get("use_sliding_window", default=False)) and win is not None
        return ["sliding_attention" if use else "full_attention"] * n_layers
    if mt == "qwen2_moe":  # layers i < max_window_layers with even i (1-based odd) slide
        use = bool(cfg.get("use_sliding_window", default=False)) and bool(win)
        first = int(cfg.get("max_window_layers", default=n_layers))
        return [
            "sliding_attention" if use and (i + 1) % 2 and i < first else "full_attention"
            for i in range(n_layers)
        ]
    if mt in ("qwen2", "qwen3"):
        use = bool(cfg.get("use_sliding_window", default=False)) and win is not None
        first = int(cfg.get("max_window_layers", default=n_layers))
        return ["sliding_attention" if use and i >= first else "full_attention" for i in range(n_layers)]
    if mt in ("gemma2",):
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
    if mt in ("gemma3_text", "gemma3"):
        pat = int(cfg.get("sliding_window_pattern", "_sliding_window_pattern", default=6))
        return ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(n_layers)]
    return ["sliding_attention" if win is not None else "full_attention"] * n_layers
