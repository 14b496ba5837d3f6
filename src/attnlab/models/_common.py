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
    state: Mapping[str, torch.Tensor], key: str, shape: Sequence[int], dtype: torch.dtype
) -> torch.Tensor:
    """``state[key]`` as ``dtype`` after checking its shape; a missing key or a wrong shape is one error."""
    if key not in state:
        raise ValueError(f"checkpoint: expected tensor {key!r}, got a checkpoint without it (malformed)")
    t = state[key]
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"checkpoint[{key!r}]: expected a tensor, got {type(t).__name__}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"checkpoint[{key!r}]: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    return t.detach().to(dtype=dtype, device="cpu")


def linear_to_heads(weight_t: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """An input projection in ``x @ W`` orientation ``(d_model, H·d_head)`` to ``(H, d_model, d_head)``.

    Head ``h`` owns the output columns ``h·d_head .. (h+1)·d_head − 1``.
    """
    d_model = weight_t.shape[0]
    return weight_t.reshape(d_model, n_heads, d_head).permute(1, 0, 2).contiguous()  # (H, d, k)


def out_linear_to_heads(weight_t: torch.Tensor, n_heads: int, d_head: int) -> torch.Tensor:
    """An output projection in ``z @ W`` orientation ``(H·d_head, d_model)`` to ``(H, d_head, d_model)``."""
    return weight_t.reshape(n_heads, d_head, weight_t.shape[1]).contiguous()  # (H, k, d)
