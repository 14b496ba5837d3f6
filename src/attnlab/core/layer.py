"""One attention layer in canonical form: per-head weight tensors and the score stages.

Row convention, as in the checkpoints: with token rows ``X`` (``n × d_model``) head ``h`` computes

    softmax(mask(cap(scale · q kᵀ + bias))) (X W_V^g + b_V^g) W_O^h,
    q = rope(norm_Q(X W_Q^h + b_Q^h)),  k = rope(norm_K(X W_K^g + b_K^g)),

with ``g = ⌊h / r⌋`` its K/V head (``r = H / H_kv``; grouped K/V are stored once, unexpanded, and
the expansion is an index). The layer's attention output is the sum over heads plus ``b_O``.
The stages beyond the plain bilinear form are explicit fields of :class:`LayerHeads`, each
``None`` when absent:

``qk_norm``   RMS/LayerNorm of queries and keys, per head or over all heads (Qwen3, OLMo 2, Gemma 3);
``rope``      rotary embedding (:mod:`attnlab.core.positions`; the model default, a layer may override);
``alibi``     per-head slopes of a linear distance bias (BLOOM, MPT, Falcon);
``rel_bias``  learned bucketed relative-position bias (T5, MPNet);
``softcap``   ``cap · tanh(s / cap)`` on the scores (Gemma 2);
``window``    sliding window ``(left, right)``: query ``i`` sees keys ``−left ≤ j − i ≤ right``.

In the column convention of docs/flow.md B the score matrix is ``M_h = scale · W_Q^h (W_K^g)ᵀ`` and
the value matrix ``V_h = (W_V^g W_O^h)ᵀ``; with ``qk_norm`` or ``softcap`` the scores are no longer
this bilinear form (:meth:`LayerHeads.nonbilinear_stages`), with RoPE/ALiBi/relative bias it is the
form at relative position 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.core.positions import RelativeBias, Rope, apply_rope, visibility_mask
from attnlab.core.validation import check_real, check_tensor

__all__ = ["AttentionOutput", "LayerHeads", "QKNorm", "default_scale"]


@dataclass(frozen=True)
class QKNorm:
    """Normalisation of queries and keys before RoPE.

    Attributes
    ----------
    kind : {"rms", "layer"}
        ``x / √(mean x² + eps) · w`` or ``(x − mean)/√(var + eps) · w + b``.
    scope : {"head", "all"}
        over each head's ``d_head`` coordinates (weights ``(H, k)``, or ``(k,)`` shared), or over the
        concatenation of all heads (OLMo 2; weights ``(H·k,)``).
    q_weight, k_weight : Tensor
    eps : float
    q_bias, k_bias : Tensor or None (LayerNorm only)
    """

    kind: str
    scope: str
    q_weight: torch.Tensor
    k_weight: torch.Tensor
    eps: float
    q_bias: torch.Tensor | None = None
    k_bias: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("rms", "layer"):
            raise ValueError(f"kind: expected 'rms' or 'layer', got {self.kind!r}")
        if self.scope not in ("head", "all"):
            raise ValueError(f"scope: expected 'head' or 'all', got {self.scope!r}")

    def apply(self, t: torch.Tensor, which: str) -> torch.Tensor:
        """Normalise ``t`` ``(B, H', n, k)`` (``which`` = ``"q"`` or ``"k"``)."""
        w = (self.q_weight if which == "q" else self.k_weight).to(t.dtype)
        b = self.q_bias if which == "q" else self.k_bias
        B, Hp, n, k = t.shape
        x = t.transpose(1, 2).reshape(B, n, Hp * k) if self.scope == "all" else t
        if self.kind == "rms":
            y = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps)
        else:
            mu = x.mean(-1, keepdim=True)
            y = (x - mu) * torch.rsqrt((x - mu).square().mean(-1, keepdim=True) + self.eps)
        if self.scope == "all":
            y = y * w
            if b is not None:
                y = y + b.to(t.dtype)
            return y.reshape(B, n, Hp, k).transpose(1, 2)
        wv = w[None, :, None, :] if w.ndim == 2 else w  # (1, H', 1, k) or (k,)
        y = y * wv
        if b is not None:
            y = y + (b[None, :, None, :] if b.ndim == 2 else b).to(t.dtype)
        return y

    def to(self, dtype: torch.dtype | None = None, device: Any = None) -> QKNorm:
        def mv(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else x.to(dtype=dtype, device=device)

        return QKNorm(
            self.kind,
            self.scope,
            mv(self.q_weight),
            mv(self.k_weight),
            self.eps,
            mv(self.q_bias),
            mv(self.k_bias),
        )


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
    """One attention layer's heads in canonical per-head form, with its score stages.

    Attributes
    ----------
    W_Q : Tensor ``(H, d_model, d_head)``
    W_K, W_V : Tensor ``(H_kv, d_model, d_head)`` (``H_kv`` divides ``H``; grouped K/V unexpanded)
    W_O : Tensor ``(H, d_head, d_model)``
    b_Q : Tensor ``(H, d_head)``; b_K, b_V : Tensor ``(H_kv, d_head)`` (zeros where absent)
    b_O : Tensor ``(d_model,)``
    scale : float
        the factor multiplying ``q·k`` in the scores (``1/√d_head`` by default).
    qk_norm, rope, alibi, rel_bias, softcap, window :
        the score stages of the module docstring (None when absent; ``rope`` None means the
        model's default, see :meth:`HeadWeights.forward`).
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
    qk_norm: QKNorm | None = None
    rope: Rope | None = None
    alibi: torch.Tensor | None = None
    rel_bias: RelativeBias | None = None
    softcap: float | None = None
    window: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        check_tensor("W_Q", self.W_Q, ndim=3)
        H, d, k = self.W_Q.shape
        check_tensor("W_K", self.W_K, ndim=3)
        Hkv = self.W_K.shape[0]
        if Hkv < 1 or H % Hkv:
            raise ValueError(f"W_K: expected a number of K/V heads dividing H = {H}, got {Hkv}")
        check_tensor("W_K", self.W_K, shape=(Hkv, d, k))
        check_tensor("W_V", self.W_V, shape=(Hkv, d, k))
        check_tensor("W_O", self.W_O, shape=(H, k, d))
        check_tensor("b_Q", self.b_Q, shape=(H, k))
        check_tensor("b_K", self.b_K, shape=(Hkv, k))
        check_tensor("b_V", self.b_V, shape=(Hkv, k))
        check_tensor("b_O", self.b_O, shape=(d,))
        check_real("scale", self.scale, min=0.0, min_open=True)
        if self.alibi is not None:
            check_tensor("alibi", self.alibi, shape=(H,))
        if self.softcap is not None:
            check_real("softcap", self.softcap, min=0.0, min_open=True)

    @property
    def n_heads(self) -> int:
        return int(self.W_Q.shape[0])

    @property
    def n_kv_heads(self) -> int:
        return int(self.W_K.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.W_Q.shape[1])

    @property
    def d_head(self) -> int:
        return int(self.W_Q.shape[2])

    @property
    def kv_index(self) -> torch.Tensor:
        """``(H,)`` the K/V head of each query head, ``⌊h / r⌋``."""
        return torch.arange(self.n_heads, device=self.W_Q.device) // (self.n_heads // self.n_kv_heads)

    def expanded(self, name: str) -> torch.Tensor:
        """``W_K``, ``W_V``, ``b_K`` or ``b_V`` indexed to the ``H`` query heads (a gather, on demand)."""
        if name not in ("W_K", "W_V", "b_K", "b_V"):
            raise ValueError(f"name: expected one of W_K, W_V, b_K, b_V, got {name!r}")
        t = getattr(self, name)
        return t if self.n_kv_heads == self.n_heads else t[self.kv_index]

    def nonbilinear_stages(self) -> tuple[str, ...]:
        """The stages that make the scores something other than ``x_iᵀ M_h x_j`` plus position terms."""
        return tuple(n for n in ("qk_norm", "softcap") if getattr(self, n) is not None)

    def to(self, dtype: torch.dtype | None = None, device: str | torch.device | None = None) -> LayerHeads:
        """A copy with every tensor moved to ``dtype`` / ``device``."""
        kw: dict[str, Any] = {n: getattr(self, n).to(dtype=dtype, device=device) for n in _TENSORS}
        rb = self.rel_bias
        return LayerHeads(
            **kw,
            scale=self.scale,
            qk_norm=None if self.qk_norm is None else self.qk_norm.to(dtype, device),
            rope=self.rope,
            alibi=None if self.alibi is None else self.alibi.to(dtype=dtype, device=device),
            rel_bias=None
            if rb is None
            else RelativeBias(rb.table.to(dtype=dtype, device=device), rb.max_distance, rb.bidirectional),
            softcap=self.softcap,
            window=self.window,
        )

    def score_matrices(self) -> torch.Tensor:
        """``M_h = scale · W_Q^h (W_K^g)ᵀ``, shape ``(H, d_model, d_model)`` (biases not included)."""
        return self.scale * self.W_Q @ self.expanded("W_K").transpose(-1, -2)  # (H, d, d)

    def value_matrices(self) -> torch.Tensor:
        """``V_h = (W_V^g W_O^h)ᵀ``, shape ``(H, d_model, d_model)`` (column convention)."""
        return (self.expanded("W_V") @ self.W_O).transpose(-1, -2)  # (H, d, d)

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
            the hidden states that enter attention (after any pre-attention norm).
        causal : bool
            mask keys after the query (decoder models).
        key_mask : Tensor ``(B, n)`` of bool, optional
            False for padding keys.
        rope : Rope, optional
            rotary embedding used when the layer has none of its own.

        Returns
        -------
        AttentionOutput
        """
        squeeze = x.ndim == 2
        if squeeze:
            x = x.unsqueeze(0)
        check_tensor("x", x, shape=(None, None, self.d_model))
        x = x.to(self.W_Q.dtype)
        B, n, _ = x.shape
        H, G = self.n_heads, self.n_kv_heads
        r = H // G
        q = torch.einsum("bnd,hdk->bhnk", x, self.W_Q) + self.b_Q[None, :, None, :]  # (B, H, n, k)
        kk = torch.einsum("bnd,gdk->bgnk", x, self.W_K) + self.b_K[None, :, None, :]  # (B, G, n, k)
        v = torch.einsum("bnd,gdk->bgnk", x, self.W_V) + self.b_V[None, :, None, :]  # (B, G, n, k)
        if self.qk_norm is not None:
            q, kk = self.qk_norm.apply(q, "q"), self.qk_norm.apply(kk, "k")
        rope = self.rope or rope
        if rope is not None:
            q, kk = apply_rope(q, kk, rope)
        qg = q.reshape(B, G, r, n, self.d_head)  # (B, G, r, n, k): query heads grouped by K/V head
        scores = self.scale * (qg @ kk[:, :, None].transpose(-1, -2))  # (B, G, r, n, n)
        scores = scores.reshape(B, H, n, n)
        if self.alibi is not None:
            pos = torch.arange(n, device=x.device, dtype=scores.dtype)
            scores = scores + self.alibi.to(scores.dtype)[:, None, None] * (pos[None, :] - pos[:, None])
        if self.rel_bias is not None:
            scores = scores + self.rel_bias.bias(n).to(scores.dtype)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        vis = visibility_mask(n, causal=causal, window=self.window, device=x.device)
        if vis is not None:
            scores = scores.masked_fill(~vis, float("-inf"))
        if key_mask is not None:
            check_tensor("key_mask", key_mask, shape=(B, n))
            scores = scores.masked_fill(~key_mask.bool()[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)  # (B, H, n, n)
        z = probs.reshape(B, G, r, n, n) @ v[:, :, None]  # (B, G, r, n, k)
        head_out = z.reshape(B, H, n, self.d_head) @ self.W_O[None]  # (B, H, n, d)
        out = head_out.sum(1) + self.b_O  # (B, n, d)
        if squeeze:
            return AttentionOutput(probs[0], head_out[0], out[0])
        return AttentionOutput(probs, head_out, out)


_TENSORS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


def default_scale(d_head: int) -> float:
    """``1/√d_head``, the usual score scale."""
    return 1.0 / math.sqrt(d_head)
