"""A small decoder-only multi-head transformer in plain PyTorch, and its export to a checkpoint layout.

Pre-LayerNorm blocks ``x ← x + Attn(LN₁(x))``, ``x ← x + MLP(LN₂(x))`` (GELU, width
``mlp_ratio · d_model``), a final LayerNorm and a linear read-out. Inputs are token ids (text, a
vocabulary of ``vocab_size``) or vectors of size ``d_in`` (regression tasks, read out to ``d_out``
numbers per position). Positions are a learned table added to the input embedding
(``positions="learned"``) or rotary embeddings applied to queries and keys
(``positions="rotary"``, rotate-half convention, the one of :func:`attnlab.core.heads.apply_rope`).

Attention of layer ``l``: one fused projection ``qkv`` (``nn.Linear(d, 3·H·k, bias=False)``, output
columns ``[Q | K | V]``, head ``h`` owning columns ``h·k .. (h+1)·k − 1`` of each) and an output
projection ``out`` (``nn.Linear(H·k, d, bias=False)``); scores ``q·k/√k``, causal.

:func:`export_checkpoint` writes the attention weights in the key layout of an architecture that
:mod:`attnlab.models` converts — GPT-2's fused Conv1D for learned positions, Llama's
``q_proj/k_proj/v_proj/o_proj`` for rotary ones — with the matching config, and
:func:`head_weights` converts them with :func:`attnlab.models.from_state_dict`: a trained
checkpoint becomes :class:`~attnlab.core.heads.HeadWeights` by the same path as a downloaded model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.core.heads import HeadWeights, Rope, apply_rope
from attnlab.core.validation import check_choice, check_int, check_real

__all__ = ["POSITIONS", "ModelConfig", "Transformer", "export_checkpoint", "head_weights"]

POSITIONS = ("learned", "rotary")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a :class:`Transformer`.

    Exactly one of ``vocab_size`` (token inputs) and ``d_in`` (vector inputs) is positive.
    """

    n_layers: int = 2  # L, number of blocks
    n_heads: int = 4  # H, heads per layer
    d_model: int = 128  # residual width; d_head = d_model / n_heads
    seq_len: int = 64  # longest context (size of the learned position table)
    vocab_size: int = 0  # token vocabulary (0: vector inputs)
    d_in: int = 0  # input vector size (0: token inputs)
    d_out: int = 0  # outputs per position for vector inputs (0: vocab_size logits)
    positions: str = "learned"  # "learned" (GPT-2 export) or "rotary" (Llama export)
    rope_theta: float = 10000.0  # rotary base
    mlp_ratio: int = 4  # MLP width / d_model

    def __post_init__(self) -> None:
        check_int("n_layers", self.n_layers, min=1)
        check_int("n_heads", self.n_heads, min=1)
        check_int("d_model", self.d_model, min=1)
        check_int("seq_len", self.seq_len, min=1)
        check_int("vocab_size", self.vocab_size, min=0)
        check_int("d_in", self.d_in, min=0)
        check_int("d_out", self.d_out, min=0)
        check_int("mlp_ratio", self.mlp_ratio, min=1)
        check_choice("positions", self.positions, POSITIONS)
        check_real("rope_theta", self.rope_theta, min=1.0, min_open=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model: expected a multiple of n_heads = {self.n_heads}, got {self.d_model}")
        if (self.vocab_size > 0) == (self.d_in > 0):
            raise ValueError(
                f"vocab_size/d_in: expected exactly one positive, got {self.vocab_size} and {self.d_in}"
            )
        if self.d_in > 0 and self.d_out < 1:
            raise ValueError(f"d_out: expected >= 1 with vector inputs, got {self.d_out}")
        if self.positions == "rotary" and self.d_head % 2:
            raise ValueError(
                f"d_model: expected an even d_head for rotary positions, got d_head = {self.d_head}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def tokens(self) -> bool:
        """Whether the inputs are token ids."""
        return self.vocab_size > 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        return cls(**data)


class _Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.H, self.k = cfg.n_heads, cfg.d_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.rope = Rope(theta=cfg.rope_theta, dim=cfg.d_head) if cfg.positions == "rotary" else None

    def forward(self, x: torch.Tensor, probs: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, n, d = x.shape
        qkv = self.qkv(x).view(B, n, 3, self.H, self.k)  # (B, n, 3, H, k)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, n, k)
        if self.rope is not None:
            q, k = apply_rope(q, k, self.rope)
        if probs:  # explicit softmax: the attention weights are returned
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.k)  # (B, H, n, n)
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            p = torch.softmax(s, dim=-1)  # (B, H, n, n)
            z = p @ v  # (B, H, n, k)
        else:
            p = None
            z = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, n, k)
        return self.out(z.transpose(1, 2).reshape(B, n, d)), p

    def head_stacks(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``W_Q, W_K, W_V`` as ``(H, d, k)`` stacks in the row convention (``x @ W``), differentiable."""
        d = self.qkv.in_features
        w = self.qkv.weight.view(3, self.H, self.k, d)  # (3, H, k, d): Linear stores (out, in)
        wq, wk, wv = w.transpose(-1, -2).unbind(0)  # each (H, d, k)
        return wq, wk, wv


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model)
        self.proj = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model)


class Transformer(nn.Module):
    """Decoder-only pre-LayerNorm transformer (see the module docstring).

    Parameters
    ----------
    cfg : ModelConfig
    generator : torch.Generator, optional
        CPU generator of the initial weights (normal, sd 0.02; residual output projections
        0.02/√(2L); biases 0; LayerNorms 1, 0). The weights are drawn on CPU, so a model moved to
        another device starts from the same numbers.
    """

    def __init__(self, cfg: ModelConfig, generator: torch.Generator | None = None):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise ValueError(f"cfg: expected a ModelConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d) if cfg.tokens else nn.Linear(cfg.d_in, d)
        self.pos = nn.Parameter(torch.zeros(cfg.seq_len, d)) if cfg.positions == "learned" else None
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, cfg.vocab_size if cfg.tokens else cfg.d_out, bias=not cfg.tokens)
        self._init(generator)

    @torch.no_grad()
    def _init(self, g: torch.Generator | None) -> None:
        resid = 0.02 / math.sqrt(2 * self.cfg.n_layers)
        for name, p in self.named_parameters():
            if p.ndim == 1:  # biases and LayerNorm shifts 0, LayerNorm gains 1
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                std = resid if name.endswith(("attn.out.weight", "proj.weight")) else 0.02
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)

    def forward(
        self, x: torch.Tensor, *, capture: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Outputs ``(B, n, vocab_size or d_out)``; with ``capture`` also, per layer, the hidden states
        entering attention (after LN₁) ``(B, n, d)`` and the attention weights ``(B, H, n, n)``."""
        n = x.shape[1]
        if n > self.cfg.seq_len:
            raise ValueError(f"x: expected at most seq_len = {self.cfg.seq_len} positions, got {n}")
        h = self.embed(x)  # (B, n, d)
        if self.pos is not None:
            h = h + self.pos[:n]
        inputs, attns = [], []
        for blk in self.blocks:
            a_in = blk.ln1(h)  # (B, n, d)
            a_out, p = blk.attn(a_in, probs=capture)
            h = h + a_out
            h = h + blk.proj(F.gelu(blk.fc(blk.ln2(h))))
            if capture:
                inputs.append(a_in.detach())
                attns.append(p.detach())
        out = self.head(self.ln_f(h))
        return (out, inputs, attns) if capture else out

    def head_stacks(self) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per layer ``(W_Q, W_K, W_V)``, each ``(H, d, k)``, differentiable (for penalties)."""
        return [blk.attn.head_stacks() for blk in self.blocks]


def export_checkpoint(model: Transformer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The attention weights under a supported checkpoint layout, with its config (CPU copies).

    Learned positions -> GPT-2 layout (``h.i.attn.c_attn.weight`` ``(d, 3d)`` in ``x @ W`` orientation,
    zero ``c_attn``/``c_proj`` biases, ``model_type="gpt2"``); rotary -> Llama layout
    (``layers.i.self_attn.{q,k,v,o}_proj.weight`` in ``nn.Linear`` orientation, ``model_type="llama"``,
    ``rope_theta``). Only the attention blocks are exported: they are all a converter reads.
    """
    if not isinstance(model, Transformer):
        raise ValueError(f"model: expected a Transformer, got {type(model).__name__}")
    cfg = model.cfg
    d = cfg.d_model
    state: dict[str, torch.Tensor] = {}
    for i, blk in enumerate(model.blocks):
        w = blk.attn.qkv.weight.detach().to("cpu").clone()  # (3d, d), nn.Linear orientation
        o = blk.attn.out.weight.detach().to("cpu").clone()  # (d, d)
        if cfg.positions == "learned":
            state[f"h.{i}.attn.c_attn.weight"] = w.T.contiguous()  # (d, 3d)
            state[f"h.{i}.attn.c_attn.bias"] = torch.zeros(3 * d, dtype=w.dtype)
            state[f"h.{i}.attn.c_proj.weight"] = o.T.contiguous()  # (d, d)
            state[f"h.{i}.attn.c_proj.bias"] = torch.zeros(d, dtype=w.dtype)
        else:
            wq, wk, wv = w.split(d, dim=0)  # each (H·k, d)
            a = f"layers.{i}.self_attn."
            state[a + "q_proj.weight"] = wq.contiguous()
            state[a + "k_proj.weight"] = wk.contiguous()
            state[a + "v_proj.weight"] = wv.contiguous()
            state[a + "o_proj.weight"] = o
    if cfg.positions == "learned":
        config = {"model_type": "gpt2", "n_embd": d, "n_head": cfg.n_heads, "n_layer": cfg.n_layers}
    else:
        config = {
            "model_type": "llama",
            "hidden_size": d,
            "num_attention_heads": cfg.n_heads,
            "num_key_value_heads": cfg.n_heads,
            "num_hidden_layers": cfg.n_layers,
            "head_dim": cfg.d_head,
            "rope_theta": cfg.rope_theta,
        }
    return state, config


def head_weights(
    model_or_export: Transformer | tuple[dict[str, torch.Tensor], dict[str, Any]],
    *,
    dtype: torch.dtype = torch.float64,
    name: str = "trained",
) -> HeadWeights:
    """:class:`HeadWeights` of a model (or of an :func:`export_checkpoint` result) via ``attnlab.models``."""
    from attnlab.models import from_state_dict

    if isinstance(model_or_export, Transformer):
        state, config = export_checkpoint(model_or_export)
    elif isinstance(model_or_export, tuple) and len(model_or_export) == 2:
        state, config = model_or_export
    else:
        raise ValueError(
            "model_or_export: expected a Transformer or a (state, config) pair, "
            f"got {type(model_or_export).__name__}"
        )
    return from_state_dict(state, config, dtype=dtype, name=name)
