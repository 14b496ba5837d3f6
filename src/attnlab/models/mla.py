"""Multi-head latent attention (DeepSeek-V2, DeepSeek-V3): per-head effective weights from the factors.

Key map (per layer ``i``, under an optional prefix such as ``model.``; ``nn.Linear`` weights ``(out, in)``;
``r_q`` = ``q_lora_rank``, ``r`` = ``kv_lora_rank``, ``N`` = ``qk_nope_head_dim``, ``R`` =
``qk_rope_head_dim``, ``V`` = ``v_head_dim``)::

    layers.i.self_attn.q_proj (H·(N+R), d)                         without query compression, or
    layers.i.self_attn.q_a_proj (r_q, d) [+ bias], q_a_layernorm (r_q,), q_b_proj (H·(N+R), r_q)
    layers.i.self_attn.kv_a_proj_with_mqa (r + R, d) [+ bias]: rows [latent (r); shared rotary key (R)]
    layers.i.self_attn.kv_a_layernorm (r,), kv_b_proj (H·(N+V), r): rows per head [k_nope_h (N); v_h (V)]
    layers.i.self_attn.o_proj (d, H·V) [+ bias]

The equations, in the row convention (``x`` one token's attention input, ``ρ(c) = (mean c² + ε)^{-1/2}``
the RMS factor of the latent norms, ``ε = 10⁻⁶``, ``g_q, g`` their weights)::

    c_q = x A_q + a_q,          q^h = ρ(c_q) · (c_q ⊙ g_q) B_q^h                     (N + R)
    [c ; k_pe] = x A + a,       k^h = [k_pe ; ρ(c) · (c ⊙ g) B_k^h],  v^h = ρ(c) · (c ⊙ g) B_v^h
    s_ij^h = scale · rope(q_i^h) · rope(k_j^h)                  (RoPE on the R rotary coordinates)

so that, with the norm weights folded into the factors, each head has the effective linear maps

    W_Q^h = A_q diag(g_q) B_q^h,  b_Q^h = a_q diag(g_q) B_q^h     (W_Q^h = q_proj^h without compression)
    W_K^h = [A_pe , A_c diag(g) B_k^h],  W_V^h = A_c diag(g) B_v^h  (biases likewise)

and the per-token factors ``ρ(c_q(x_i))`` (whole query) and ``ρ(c(x_j))`` (the key's non-rotary part and
the value) are what makes the scores non-bilinear. :class:`LatentLayerHeads` holds the effective maps in
the canonical fields with the coordinates of each head ordered ``[rotary (R); non-rotary (N)]`` (so that
``Rope(dim=R)`` acts on the leading ones; the dot product does not depend on the order), plus the latent
factors ``A_q, a_q, A_c, a_c`` needed for ``ρ``. When ``V ≠ N + R`` the shorter side is padded with zero
columns (and ``W_O`` with zero rows), which changes neither scores nor outputs.

``scale = (N + R)^{-1/2}``, times ``m(f, μ)²`` with ``m(f, μ) = 0.1 μ ln f + 1`` when the RoPE type is not
the default and ``mscale_all_dim = μ`` is set (``f`` its ``factor``). RoPE pairs are interleaved
(DeepSeek-V2 always; DeepSeek-V3 when ``rope_interleave``, its default) or rotate-half.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.core.heads import AttentionOutput, HeadWeights, LayerHeads, LayerSource, Rope
from attnlab.core.positions import apply_rope, visibility_mask
from attnlab.core.validation import check_tensor
from attnlab.models._common import ConfigView, find_prefix, get_tensor, make_rope

__all__ = ["LatentLayerHeads", "convert"]

MODEL_TYPES = ("deepseek_v2", "deepseek_v3")
ATTENTION_INPUT = r"(^|\.)layers\.\d+\.self_attn$"
ATTENTION_OUTPUT = r"(^|\.)layers\.\d+\.self_attn\.o_proj$"
#: the latent RMS norms are built with their default epsilon (the config's rms_norm_eps is not passed)
LATENT_EPS = 1e-6


@dataclass(frozen=True)
class LatentLayerHeads(LayerHeads):
    """A :class:`LayerHeads` of multi-head latent attention (module docstring for the equations).

    Extra attributes
    ----------------
    kv_latent : Tensor ``(d_model, r)``
        ``A_c``, the key-value latent projection (before its RMS norm).
    kv_latent_bias : Tensor ``(r,)``
    q_latent : Tensor ``(d_model, r_q)`` or None
        ``A_q``, the query latent projection; None without query compression.
    q_latent_bias : Tensor ``(r_q,)`` or None
    rope_dim : int
        ``R``: the leading coordinates of each head carry RoPE and the key's are not normalised.
    nope_dim : int
        ``N``: the non-rotary coordinates ``R .. R+N−1`` (the bilinear part, :attr:`bilinear_slice`).
    latent_eps : float
    """

    kv_latent: torch.Tensor | None = None
    kv_latent_bias: torch.Tensor | None = None
    q_latent: torch.Tensor | None = None
    q_latent_bias: torch.Tensor | None = None
    rope_dim: int = 0
    nope_dim: int = 0
    latent_eps: float = LATENT_EPS

    def __post_init__(self) -> None:
        super().__post_init__()
        d = self.d_model
        if self.kv_latent is None:
            raise ValueError("kv_latent: expected the key-value latent projection (d_model, r), got None")
        check_tensor("kv_latent", self.kv_latent, ndim=2)
        r = self.kv_latent.shape[1]
        check_tensor("kv_latent", self.kv_latent, shape=(d, r))
        check_tensor("kv_latent_bias", self.kv_latent_bias, shape=(r,))
        if self.q_latent is not None:
            check_tensor("q_latent", self.q_latent, ndim=2)
            check_tensor("q_latent_bias", self.q_latent_bias, shape=(self.q_latent.shape[1],))
        if self.rope_dim + self.nope_dim > self.d_head:
            raise ValueError(
                f"rope_dim + nope_dim: expected at most d_head = {self.d_head}, "
                f"got {self.rope_dim} + {self.nope_dim}"
            )

    @property
    def bilinear_slice(self) -> slice:
        """The non-rotary coordinates of each head: ``W_Q[..., s] W_K[..., s]ᵀ`` is the bilinear part
        of the scores (up to the per-token latent norm factors)."""
        return slice(self.rope_dim, self.rope_dim + self.nope_dim)

    def nonbilinear_stages(self) -> tuple[str, ...]:
        return ("latent_norm", *super().nonbilinear_stages())

    def latent_factors(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``ρ(c_q)`` and ``ρ(c)`` per token of ``x`` ``(B, n, d)``: two ``(B, n)`` tensors."""

        def rho(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            c = x @ a.to(x.dtype) + b.to(x.dtype)  # (B, n, r)
            return torch.rsqrt(c.square().mean(-1) + self.latent_eps)  # (B, n)

        rq = (
            torch.ones(x.shape[:2], dtype=x.dtype, device=x.device)
            if self.q_latent is None
            else rho(self.q_latent, self.q_latent_bias)  # type: ignore[arg-type]
        )
        return rq, rho(self.kv_latent, self.kv_latent_bias)  # type: ignore[arg-type]

    def to(
        self, dtype: torch.dtype | None = None, device: str | torch.device | None = None
    ) -> LatentLayerHeads:
        base = super().to(dtype, device)

        def mv(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(dtype=dtype, device=device)

        kw = {f.name: getattr(base, f.name) for f in dataclasses.fields(LayerHeads)}
        return LatentLayerHeads(
            **kw,
            kv_latent=mv(self.kv_latent),
            kv_latent_bias=mv(self.kv_latent_bias),
            q_latent=mv(self.q_latent),
            q_latent_bias=mv(self.q_latent_bias),
            rope_dim=self.rope_dim,
            nope_dim=self.nope_dim,
            latent_eps=self.latent_eps,
        )

    def forward(
        self,
        x: torch.Tensor,
        *,
        causal: bool = False,
        key_mask: torch.Tensor | None = None,
        rope: Rope | None = None,
    ) -> AttentionOutput:
        """The heads on token rows ``x`` ``(B, n, d)`` or ``(n, d)``, latent norms included."""
        squeeze = x.ndim == 2
        if squeeze:
            x = x.unsqueeze(0)
        check_tensor("x", x, shape=(None, None, self.d_model))
        x = x.to(self.W_Q.dtype)
        B, n, _ = x.shape
        rq, rkv = self.latent_factors(x)  # (B, n) each
        q = torch.einsum("bnd,hdk->bhnk", x, self.W_Q) + self.b_Q[None, :, None, :]  # (B, H, n, k)
        q = q * rq[:, None, :, None]
        kk = torch.einsum("bnd,gdk->bgnk", x, self.expanded("W_K")) + self.expanded("b_K")[None, :, None, :]
        R = self.rope_dim
        kk = torch.cat([kk[..., :R], kk[..., R:] * rkv[:, None, :, None]], dim=-1)  # (B, H, n, k)
        v = torch.einsum("bnd,gdk->bgnk", x, self.expanded("W_V")) + self.expanded("b_V")[None, :, None, :]
        v = v * rkv[:, None, :, None]  # (B, H, n, k)
        rope = self.rope or rope
        if rope is not None:
            q, kk = apply_rope(q, kk, rope)
        scores = self.scale * (q @ kk.transpose(-1, -2))  # (B, H, n, n)
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        vis = visibility_mask(n, causal=causal, window=self.window, device=x.device)
        if vis is not None:
            scores = scores.masked_fill(~vis, float("-inf"))
        if key_mask is not None:
            check_tensor("key_mask", key_mask, shape=(B, n))
            scores = scores.masked_fill(~key_mask.bool()[:, None, None, :], float("-inf"))
        probs = torch.softmax(scores, dim=-1)  # (B, H, n, n)
        head_out = (probs @ v) @ self.W_O[None]  # (B, H, n, d)
        out = head_out.sum(1) + self.b_O  # (B, n, d)
        if squeeze:
            return AttentionOutput(probs[0], head_out[0], out[0])
        return AttentionOutput(probs, head_out, out)


def _mscale(f: float, mu: float) -> float:
    return 1.0 if f <= 1 else 0.1 * mu * math.log(f) + 1.0


def convert(
    state: Mapping[str, torch.Tensor], config: Mapping[str, Any], dtype: torch.dtype | None
) -> HeadWeights:
    """A streamed :class:`HeadWeights` of :class:`LatentLayerHeads` for a DeepSeek-V2/V3 state dict."""
    cfg = ConfigView(config)
    mt = str(cfg.get("model_type"))
    d = cfg.int("hidden_size")
    H = cfg.int("num_attention_heads")
    L = cfg.int("num_hidden_layers")
    Hkv = cfg.int("num_key_value_heads", default=H)
    if Hkv != H:
        raise ValueError(
            f"config.num_key_value_heads: expected {H} (every head has its own key from the shared latent), "
            f"got {Hkv}"
        )
    r = cfg.int("kv_lora_rank")
    rq = cfg.get("q_lora_rank", default=None)
    if rq is not None:
        rq = cfg.int("q_lora_rank")
    N = cfg.int("qk_nope_head_dim")
    R = cfg.int("qk_rope_head_dim")
    V = cfg.int("v_head_dim")
    k = max(N + R, V)  # canonical d_head: the wider of the score and value widths (zero-padded)
    interleaved = mt == "deepseek_v2" or bool(cfg.get("rope_interleave", default=True))
    rope = make_rope(config, R, interleaved=interleaved)
    scale = (N + R) ** -0.5
    if rope.rope_type != "default" and rope.params.get("mscale_all_dim"):
        m = _mscale(float(rope.params.get("factor", 1.0)), float(rope.params["mscale_all_dim"]))
        scale *= m * m
    p = find_prefix(state, "layers.0.self_attn.kv_a_proj_with_mqa.weight", mt)

    def read(i: int) -> LatentLayerHeads:
        a = f"{p}layers.{i}.self_attn."

        def w(name: str, shape: tuple[int, ...]) -> torch.Tensor:
            return get_tensor(state, a + name, shape, dtype)

        def b(name: str, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
            return w(name, shape) if a + name in state else torch.zeros(shape, dtype=like.dtype)

        akv = w("kv_a_proj_with_mqa.weight", (r + R, d))  # rows [latent (r); rotary key (R)]
        bkv = b("kv_a_proj_with_mqa.bias", (r + R,), akv)
        g = w("kv_a_layernorm.weight", (r,))
        bk = w("kv_b_proj.weight", (H * (N + V), r)).reshape(H, N + V, r)  # rows per head [k_nope; v]
        A_c, A_pe = akv[:r].T, akv[r:].T  # (d, r), (d, R)
        Bk = g[:, None] * bk[:, :N].transpose(1, 2)  # (H, r, N) = diag(g) B_k^h
        Bv = g[:, None] * bk[:, N:].transpose(1, 2)  # (H, r, V)
        WK = torch.cat([A_pe.expand(H, d, R), A_c @ Bk], dim=-1)  # (H, d, R+N)
        bK = torch.cat([bkv[r:].expand(H, R), bkv[:r] @ Bk], dim=-1)  # (H, R+N)
        WV, bV = A_c @ Bv, bkv[:r] @ Bv  # (H, d, V), (H, V)
        if rq is None:
            wq = w("q_proj.weight", (H * (N + R), d)).reshape(H, N + R, d).transpose(1, 2)  # (H, d, N+R)
            bq = torch.zeros(H, N + R, dtype=wq.dtype)
            q_lat = q_lat_b = None
        else:
            aq = w("q_a_proj.weight", (rq, d))
            q_lat, q_lat_b = aq.T, b("q_a_proj.bias", (rq,), aq)  # (d, r_q), (r_q,)
            gq = w("q_a_layernorm.weight", (rq,))
            Bq = gq[:, None] * w("q_b_proj.weight", (H * (N + R), rq)).reshape(H, N + R, rq).transpose(1, 2)
            wq, bq = q_lat @ Bq, q_lat_b @ Bq  # (H, d, N+R), (H, N+R)
        WQ = torch.cat([wq[..., N:], wq[..., :N]], dim=-1)  # (H, d, R+N): rotary coordinates first
        bQ = torch.cat([bq[..., N:], bq[..., :N]], dim=-1)
        wo = w("o_proj.weight", (d, H * V)).T.reshape(H, V, d)  # (H, V, d)
        bO = b("o_proj.bias", (d,), wo)

        def pad(t: torch.Tensor, dim: int) -> torch.Tensor:  # zero columns (or rows) up to k
            extra = k - t.shape[dim]
            if extra == 0:
                return t.contiguous()
            shape = list(t.shape)
            shape[dim] = extra
            return torch.cat([t, torch.zeros(shape, dtype=t.dtype)], dim=dim)

        return LatentLayerHeads(
            W_Q=pad(WQ, -1),
            W_K=pad(WK, -1),
            W_V=pad(WV, -1),
            W_O=pad(wo, 1),
            b_Q=pad(bQ, -1),
            b_K=pad(bK, -1),
            b_V=pad(bV, -1),
            b_O=bO,
            scale=scale,
            kv_latent=A_c.contiguous(),
            kv_latent_bias=bkv[:r].contiguous(),
            q_latent=None if q_lat is None else q_lat.contiguous(),
            q_latent_bias=q_lat_b,
            rope_dim=R,
            nope_dim=N,
        )

    stages = {
        "qk_norm": "rms of the query and key-value latents (multi-head latent attention)",
        "mla": {
            "kv_lora_rank": r,
            "q_lora_rank": rq,
            "qk_nope_head_dim": N,
            "qk_rope_head_dim": R,
            "v_head_dim": V,
        },
    }
    return HeadWeights(
        layers=LayerSource(read, n_layers=L, n_heads=H, n_kv_heads=H, d_model=d, d_head=k),
        architecture="mla",
        model_type=mt,
        grouped_kv=False,
        n_kv_heads=H,
        causal=True,
        pre_norm=True,
        rope=rope,
        extra={"stages": stages, "rope_type": rope.rope_type, "mla": stages["mla"]},
    )
