"""The canonical form of a model's attention: per-layer, per-head weight tensors.

Row convention, as in the checkpoints: with token rows ``X`` (``n × d_model``) head ``h`` computes

    softmax(scale · (X W_Q^h + b_Q^h)(X W_K^h + b_K^h)ᵀ) (X W_V^h + b_V^h) W_O^h

and the layer's attention output is the sum over heads plus ``b_O``. ``scale`` is ``1/√d_head``
unless the architecture says otherwise (GPT-2 can divide it by the layer index). In the column
convention of THEORY.md B the score matrix is ``M_h = scale · W_Q^h (W_K^h)ᵀ`` and the value
matrix ``V_h = (W_V^h W_O^h)ᵀ``.

Grouped K/V (Llama-style GQA) are stored expanded to the query heads they serve; the metadata
keeps ``n_kv_heads`` so that diagnostics can use the distinct K/V heads only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from attnlab.core.validation import check_real, check_tensor

__all__ = ["AttentionOutput", "HeadWeights", "LayerHeads", "Rope", "apply_rope", "default_scale"]


@dataclass(frozen=True)
class AttentionOutput:
    """What :meth:`LayerHeads.forward` returns.

    Attributes
    ----------
    probs : Tensor ``(B, H, n, n)``
        attention weights (rows sum to one).
    head_outputs : Tensor ``(B, H, n, d_model)``
        each head's contribution ``A_h (X W_V + b_V) W_O`` (without ``b_O``).
    output : Tensor ``(B, n, d_model)``
        the sum over heads plus ``b_O``: the attention block's output before any residual.
    """

    probs: torch.Tensor
    head_outputs: torch.Tensor
    output: torch.Tensor


@dataclass(frozen=True)
class LayerHeads:
    """One attention layer's heads in canonical per-head form.

    Attributes
    ----------
    W_Q, W_K, W_V : Tensor ``(H, d_model, d_head)``
    W_O : Tensor ``(H, d_head, d_model)``
    b_Q, b_K, b_V : Tensor ``(H, d_head)`` (zeros where the architecture has none)
    b_O : Tensor ``(d_model,)``
    scale : float
        the factor multiplying ``q·k`` in the scores (``1/√d_head`` by default).
    """

    W_Q: torch.Tensor
    W_K: torch.Tensor
    W_V: torch.Tensor
    W_O: torch.Tensor
    b_Q: torch.Tensor
    b_K: torch.Tensor
    b_V: torch.Tensor
    b_O: torch.Tensor
    scale: float

    def __post_init__(self) -> None:
        check_tensor("W_Q", self.W_Q, ndim=3)
        H, d, k = self.W_Q.shape
        check_tensor("W_K", self.W_K, shape=(H, d, k))
        check_tensor("W_V", self.W_V, shape=(H, d, k))
        check_tensor("W_O", self.W_O, shape=(H, k, d))
        for name in ("b_Q", "b_K", "b_V"):
            check_tensor(name, getattr(self, name), shape=(H, k))
        check_tensor("b_O", self.b_O, shape=(d,))
        check_real("scale", self.scale, min=0.0, min_open=True)

    @property
    def n_heads(self) -> int:
        return int(self.W_Q.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.W_Q.shape[1])

    @property
    def d_head(self) -> int:
        return int(self.W_Q.shape[2])

    def to(self, dtype: torch.dtype | None = None, device: str | torch.device | None = None) -> LayerHeads:
        """A copy with every tensor moved to ``dtype`` / ``device``."""
        kw = {n: getattr(self, n).to(dtype=dtype, device=device) for n in _TENSORS}
        return LayerHeads(**kw, scale=self.scale)

    def score_matrices(self) -> torch.Tensor:
        """``M_h = scale · W_Q^h (W_K^h)ᵀ``, shape ``(H, d_model, d_model)`` (biases not included)."""
        return self.scale * self.W_Q @ self.W_K.transpose(-1, -2)  # (H, d, d)

    def value_matrices(self) -> torch.Tensor:
        """``V_h = (W_V^h W_O^h)ᵀ``, shape ``(H, d_model, d_model)`` (column convention)."""
        return (self.W_V @ self.W_O).transpose(-1, -2)  # (H, d, d)

    def forward(
        self,
        x: torch.Tensor,
        *,
        causal: bool = False,
        key_mask: torch.Tensor | None = None,
        rope: Rope | None = None,
    ) -> AttentionOutput:
        """Run the heads on token rows ``x``.

        Parameters
        ----------
        x : Tensor ``(B, n, d_model)`` or ``(n, d_model)``
            the hidden states that enter attention (after any pre-attention LayerNorm).
        causal : bool
            mask keys after the query (decoder models).
        key_mask : Tensor ``(B, n)`` of bool, optional
            False for padding keys.
        rope : Rope, optional
            rotary position embedding applied to queries and keys (Llama-style).

        Returns
        -------
        AttentionOutput
        """
        squeeze = x.ndim == 2
        if squeeze:
            x = x.unsqueeze(0)
        check_tensor("x", x, shape=(None, None, self.d_model))
        x = x.to(self.W_Q.dtype)
        q = torch.einsum("bnd,hdk->bhnk", x, self.W_Q) + self.b_Q[None, :, None, :]  # (B, H, n, k)
        kk = torch.einsum("bnd,hdk->bhnk", x, self.W_K) + self.b_K[None, :, None, :]  # (B, H, n, k)
        v = torch.einsum("bnd,hdk->bhnk", x, self.W_V) + self.b_V[None, :, None, :]  # (B, H, n, k)
        if rope is not None:
            q, kk = apply_rope(q, kk, rope)
        scores = self.scale * q @ kk.transpose(-1, -2)  # (B, H, n, n)
        n = x.shape[1]
        if causal:
            future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if key_mask is not None:
            check_tensor("key_mask", key_mask, shape=(x.shape[0], n))
            scores = scores.masked_fill(~key_mask.bool()[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)  # (B, H, n, n)
        z = probs @ v  # (B, H, n, k)
        head_out = z @ self.W_O[None]  # (B, H, n, d)
        out = head_out.sum(1) + self.b_O  # (B, n, d)
        if squeeze:
            return AttentionOutput(probs[0], head_out[0], out[0])
        return AttentionOutput(probs, head_out, out)


_TENSORS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


@dataclass(frozen=True)
class Rope:
    """Rotary position embedding, rotate-half convention (Llama): pairs ``(i, i + dim/2)``.

    Attributes
    ----------
    theta : float
        the base of the frequencies ``theta^(−2i/dim)``.
    dim : int
        number of leading head dimensions rotated (the head size for Llama).
    """

    theta: float
    dim: int


def apply_rope(
    q: torch.Tensor, k: torch.Tensor, rope: Rope, positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys ``(..., n, d_head)`` by their positions (0..n−1 by default).

    Dimension ``i < dim/2`` is paired with ``i + dim/2`` and the pair is rotated by the angle
    ``position · theta^(−2i/dim)``.
    """
    n = q.shape[-2]
    if positions is None:
        positions = torch.arange(n, dtype=torch.float64, device=q.device)
    half = rope.dim // 2
    inv = rope.theta ** (-torch.arange(half, dtype=torch.float64, device=q.device) * 2.0 / rope.dim)
    ang = positions.to(torch.float64)[:, None] * inv[None, :]  # (n, half)
    cos, sin = ang.cos().to(q.dtype), ang.sin().to(q.dtype)

    def rot(t: torch.Tensor) -> torch.Tensor:
        a, b, rest = t[..., :half], t[..., half : 2 * half], t[..., 2 * half :]
        return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)

    return rot(q), rot(k)


@dataclass(frozen=True)
class HeadWeights:
    """A model's attention heads, layer by layer, plus what the architecture does around them.

    Attributes
    ----------
    layers : tuple of LayerHeads
        one per layer (ALBERT repeats the same object when layers share weights).
    architecture : str
        the converter family: ``"bert"``, ``"albert"``, ``"gpt2"`` or ``"llama"``.
    model_type : str
        the checkpoint's own ``model_type`` (``"bert"``, ``"roberta"``, ``"mistral"``, ...).
    name : str
        a label for tables (folder name, ``"all-MiniLM-L6-v2"``, ...).
    shared_layers : bool
        whether layers share their attention weights (ALBERT).
    grouped_kv : bool
        whether K/V were grouped (GQA) and have been expanded to the query heads.
    n_kv_heads : int
        number of distinct K/V heads (equal to ``n_heads`` without GQA).
    causal : bool
        decoder-style causal masking.
    pre_norm : bool
        a LayerNorm/RMSNorm precedes attention (GPT-2, Llama) rather than following it (BERT).
    rope : Rope or None
        rotary position embedding of queries and keys (Llama-style), else None.
    extra : mapping
        further metadata (config values kept for reference).
    """

    layers: tuple[LayerHeads, ...]
    architecture: str
    model_type: str = ""
    name: str = ""
    shared_layers: bool = False
    grouped_kv: bool = False
    n_kv_heads: int = 0
    causal: bool = False
    pre_norm: bool = False
    rope: Rope | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("layers: expected at least one layer, got none")
        first = self.layers[0]
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, LayerHeads):
                raise ValueError(f"layers[{i}]: expected LayerHeads, got {type(layer).__name__}")
            if (layer.n_heads, layer.d_model, layer.d_head) != (first.n_heads, first.d_model, first.d_head):
                raise ValueError(
                    f"layers[{i}]: expected (heads, d_model, d_head) = "
                    f"{(first.n_heads, first.d_model, first.d_head)}, "
                    f"got {(layer.n_heads, layer.d_model, layer.d_head)}"
                )
        if self.n_kv_heads == 0:
            object.__setattr__(self, "n_kv_heads", first.n_heads)
        if self.n_kv_heads < 1 or first.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads: expected a divisor of n_heads = {first.n_heads}, got {self.n_kv_heads}"
            )

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_heads(self) -> int:
        return self.layers[0].n_heads

    @property
    def d_model(self) -> int:
        return self.layers[0].d_model

    @property
    def d_head(self) -> int:
        return self.layers[0].d_head

    @property
    def dtype(self) -> torch.dtype:
        return self.layers[0].W_Q.dtype

    def stacked(self, name: str) -> torch.Tensor:
        """One weight for all layers: e.g. ``stacked("W_Q")`` has shape ``(L, H, d_model, d_head)``."""
        if name not in _TENSORS:
            raise ValueError(f"name: expected one of {', '.join(_TENSORS)}, got {name!r}")
        return torch.stack([getattr(layer, name) for layer in self.layers])

    def scales(self) -> torch.Tensor:
        """Score scale per layer, shape ``(L,)`` (float64)."""
        return torch.tensor([layer.scale for layer in self.layers], dtype=torch.float64)

    def to(self, dtype: torch.dtype | None = None, device: str | torch.device | None = None) -> HeadWeights:
        """A copy with every layer moved to ``dtype`` / ``device`` (shared layers stay shared)."""
        moved: dict[int, LayerHeads] = {}
        layers = []
        for layer in self.layers:
            if id(layer) not in moved:
                moved[id(layer)] = layer.to(dtype=dtype, device=device)
            layers.append(moved[id(layer)])
        return HeadWeights(
            layers=tuple(layers),
            architecture=self.architecture,
            model_type=self.model_type,
            name=self.name,
            shared_layers=self.shared_layers,
            grouped_kv=self.grouped_kv,
            n_kv_heads=self.n_kv_heads,
            causal=self.causal,
            pre_norm=self.pre_norm,
            rope=self.rope,
            extra=dict(self.extra),
        )

    def forward(self, layer: int, x: torch.Tensor, key_mask: torch.Tensor | None = None) -> AttentionOutput:
        """Run layer ``layer``'s heads on its attention input ``x`` with this model's masking and RoPE."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer: expected an integer in [0, {self.n_layers - 1}], got {layer!r}")
        return self.layers[layer].forward(x, causal=self.causal, key_mask=key_mask, rope=self.rope)

    def summary(self) -> dict[str, Any]:
        """The metadata as a plain dict (for tables and JSON)."""
        return {
            "model": self.name,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "d_model": self.d_model,
            "d_head": self.d_head,
            "shared_layers": self.shared_layers,
            "grouped_kv": self.grouped_kv,
            "causal": self.causal,
            "pre_norm": self.pre_norm,
            "rope_theta": None if self.rope is None else self.rope.theta,
        }

    def __repr__(self) -> str:
        return (
            f"HeadWeights({self.name or self.architecture}: {self.n_layers} layers x {self.n_heads} heads, "
            f"d_model={self.d_model}, d_head={self.d_head}"
            + (f", kv_heads={self.n_kv_heads}" if self.grouped_kv else "")
            + (", shared layers" if self.shared_layers else "")
            + ")"
        )


def default_scale(d_head: int) -> float:
    """``1/√d_head``, the usual score scale."""
    return 1.0 / math.sqrt(d_head)
