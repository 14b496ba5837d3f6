"""Where attention scores depend on positions: rotary embeddings, ALiBi, relative buckets, masks.

Rotary position embedding (RoPE)
--------------------------------
Pairs of query/key coordinates are rotated by ``position · ω_i``. Two pairings exist:
rotate-half (Llama, GPT-NeoX: coordinate ``i`` with ``i + dim/2``) and interleaved (GPT-J, Cohere:
``2i`` with ``2i + 1``); only the first ``dim`` coordinates of a head are rotated (partial rotary,
``dim = ⌊d_head · partial_rotary_factor⌋``). The frequencies ``ω_i`` (``i < dim/2``) start from
``θ^(−2i/dim)`` and the ``rope_type`` rescales them (``L`` the sequence length, ``L₀`` the pretraining
context ``original_max_position_embeddings``, ``f`` the ``factor``):

``default``  ``ω_i = θ^(−2i/dim)``.
``linear``   ``ω_i / f`` (positions interpolated).
``dynamic``  NTK-aware: when ``L > L_max`` (``max_position_embeddings``) the base becomes
             ``θ · (f L / L_max − (f − 1))^(dim/(dim−2))``; unchanged otherwise.
``llama3``   wavelengths ``λ_i = 2π/ω_i`` above ``L₀/low_freq_factor`` are divided by ``f``, those below
             ``L₀/high_freq_factor`` kept, and in between ``ω_i ← (1 − s) ω_i/f + s ω_i`` with
             ``s = (L₀/λ_i − low)/(high − low)``.
``yarn``     ``ω_i = ω_i^int (1 − e_i) + ω_i^ext e_i`` with ``ω^ext = θ^(−2i/dim)``, ``ω^int = ω^ext/f`` and
             ``e_i = 1 − clamp((i − lo)/(hi − lo), 0, 1)``, where ``lo, hi`` are the (floored/ceiled unless
             ``truncate`` is false) dimensions ``dim · ln(L₀/(2π β))/(2 ln θ)`` at ``β = beta_fast`` (32) and
             ``beta_slow`` (1); cos and sin are multiplied by ``attention_factor`` (default ``0.1 ln f + 1``,
             or ``m(f, mscale)/m(f, mscale_all_dim)`` with ``m(f, μ) = 0.1 μ ln f + 1``).
``longrope`` ``ω_i = θ^(−2i/dim) / φ_i`` with ``φ = long_factor`` when ``L > L₀`` and ``short_factor``
             otherwise; cos and sin are multiplied by ``attention_factor`` (default
             ``√(1 + ln f / ln L₀)`` with ``f = L_max/L₀`` when not given).

The frequencies depend on ``L`` for ``dynamic`` and ``longrope``: they are those of the sequence at
hand (what a freshly loaded reference model does; a reference model that has already seen a longer
sequence keeps the longer sequence's frequencies).

ALiBi adds ``slope_h · (j − i)`` to the score of query ``i`` and key ``j`` (a per-row constant shift of
``slope_h · j``, the same probabilities). Relative position buckets (T5, MPNet) add a learned
per-head bias indexed by the bucket of ``j − i``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "ROPE_TYPES",
    "RelativeBias",
    "Rope",
    "alibi_slopes",
    "apply_rope",
    "relative_bucket",
    "rope_frequencies",
    "visibility_mask",
]

ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn", "longrope")
_DT = torch.float64


@dataclass(frozen=True)
class Rope:
    """Rotary position embedding of queries and keys.

    Attributes
    ----------
    theta : float
        the base of the frequencies.
    dim : int
        number of leading head coordinates rotated (even).
    rope_type : str
        one of :data:`ROPE_TYPES` (see the module docstring).
    interleaved : bool
        pairs ``(2i, 2i+1)`` (GPT-J style) instead of ``(i, i + dim/2)`` (rotate-half).
    params : mapping
        the variant's parameters (``factor``, ``original_max_position_embeddings``,
        ``max_position_embeddings``, ``low_freq_factor``, ``beta_fast``, ``short_factor`` ...).
    """

    theta: float
    dim: int
    rope_type: str = "default"
    interleaved: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rope_type not in ROPE_TYPES:
            raise ValueError(f"rope_type: expected one of {', '.join(ROPE_TYPES)}, got {self.rope_type!r}")
        if self.dim < 2 or self.dim % 2:
            raise ValueError(f"dim: expected an even number of rotated coordinates >= 2, got {self.dim}")
        if not self.theta > 0:
            raise ValueError(f"theta: expected a positive base, got {self.theta}")

    def _p(self, name: str) -> Any:
        if self.params.get(name) is None:
            raise ValueError(f"rope.{name}: expected a value for rope_type {self.rope_type!r}, got none")
        return self.params[name]


def _mscale(f: float, mu: float = 1.0) -> float:
    return 1.0 if f <= 1 else 0.1 * mu * math.log(f) + 1.0


def rope_frequencies(rope: Rope, seq_len: int) -> tuple[torch.Tensor, float]:
    """The frequencies ``ω`` ``(dim/2,)`` (float64) and the cos/sin factor for a sequence of ``seq_len``."""
    dim, theta, p = rope.dim, float(rope.theta), rope.params
    expo = torch.arange(0, dim, 2, dtype=_DT) / dim  # (dim/2,)
    base_inv = theta**-expo
    t = rope.rope_type
    if t == "default":
        return base_inv, 1.0
    if t == "linear":
        return base_inv / float(rope._p("factor")), 1.0
    if t == "dynamic":
        f, lmax = float(rope._p("factor")), int(rope._p("max_position_embeddings"))
        L = max(seq_len, lmax)
        b = theta * ((f * L / lmax) - (f - 1)) ** (dim / (dim - 2))
        return b**-expo, 1.0
    if t == "llama3":
        f, l0 = float(rope._p("factor")), float(rope._p("original_max_position_embeddings"))
        lo, hi = float(rope._p("low_freq_factor")), float(rope._p("high_freq_factor"))
        wavelen = 2 * math.pi / base_inv
        inv = torch.where(wavelen > l0 / lo, base_inv / f, base_inv)
        s = (l0 / wavelen - lo) / (hi - lo)
        smooth = (1 - s) * inv / f + s * inv
        medium = (wavelen >= l0 / hi) & (wavelen <= l0 / lo)
        return torch.where(medium, smooth, inv), 1.0
    if t == "yarn":
        l0 = float(rope._p("original_max_position_embeddings"))
        f = p.get("factor")
        f = float(f) if f is not None else float(rope._p("max_position_embeddings")) / l0
        att = p.get("attention_factor")
        if att is None:
            ms, msa = p.get("mscale"), p.get("mscale_all_dim")
            att = _mscale(f, ms) / _mscale(f, msa) if (ms and msa) else _mscale(f)
        fast, slow = float(p.get("beta_fast") or 32), float(p.get("beta_slow") or 1)

        def corr(beta: float) -> float:
            return dim * math.log(l0 / (beta * 2 * math.pi)) / (2 * math.log(theta))

        lo, hi = corr(fast), corr(slow)
        if p.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = ((torch.arange(dim // 2, dtype=_DT) - lo) / (hi - lo)).clamp(0, 1)
        extra = 1 - ramp
        return base_inv / f * (1 - extra) + base_inv * extra, float(att)
    # longrope
    l0 = float(rope._p("original_max_position_embeddings"))
    f = p.get("factor")
    f = float(f) if f is not None else float(rope._p("max_position_embeddings")) / l0
    att = p.get("attention_factor")
    if att is None:
        att = 1.0 if f <= 1 else math.sqrt(1 + math.log(f) / math.log(l0))
    phi = rope._p("long_factor") if seq_len > l0 else rope._p("short_factor")
    phi_t = torch.as_tensor(phi, dtype=_DT)
    if phi_t.shape != (dim // 2,):
        raise ValueError(
            f"rope.long_factor/short_factor: expected {dim // 2} values, got {tuple(phi_t.shape)}"
        )
    return base_inv / phi_t, float(att)


def apply_rope(
    q: torch.Tensor, k: torch.Tensor, rope: Rope, positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys ``(..., n, d_head)`` by their positions (0..n−1 by default)."""
    n = q.shape[-2]
    if positions is None:
        positions = torch.arange(n, dtype=_DT, device=q.device)
    seq_len = int(positions.max()) + 1 if positions.numel() else 0
    inv, att = rope_frequencies(rope, seq_len)
    ang = positions.to(_DT)[:, None] * inv.to(q.device)[None, :]  # (n, dim/2)
    cos, sin = (att * ang.cos()).to(q.dtype), (att * ang.sin()).to(q.dtype)
    half = rope.dim // 2

    def rot(t: torch.Tensor) -> torch.Tensor:
        rest = t[..., rope.dim :]
        if rope.interleaved:
            a, b = t[..., 0 : rope.dim : 2], t[..., 1 : rope.dim : 2]  # (..., n, dim/2) each
            ra, rb = a * cos - b * sin, b * cos + a * sin
            return torch.cat([torch.stack([ra, rb], dim=-1).flatten(-2), rest], dim=-1)
        a, b = t[..., :half], t[..., half : rope.dim]
        return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)

    return rot(q), rot(k)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi slopes ``(H,)``: ``2^(−8h/m)`` for ``h = 1..m`` with ``m`` the power of two ``≤ H``, then the
    odd multiples ``2^(−4(2h−1)/m)`` for the remaining ``H − m`` heads (float64)."""
    m = 2 ** math.floor(math.log2(n_heads))
    s = [2 ** (-8 * h / m) for h in range(1, m + 1)]
    s += [2 ** (-4 * (2 * h - 1) / m) for h in range(1, n_heads - m + 1)]
    return torch.tensor(s, dtype=_DT)


@dataclass(frozen=True)
class RelativeBias:
    """A learned per-head bias of the bucketed relative position ``j − i`` (T5, MPNet).

    Attributes
    ----------
    table : Tensor ``(num_buckets, H)``
    max_distance : int
    bidirectional : bool
    """

    table: torch.Tensor
    max_distance: int
    bidirectional: bool = True

    def bias(self, n: int) -> torch.Tensor:
        """``(H, n, n)`` bias of query ``i``, key ``j``."""
        pos = torch.arange(n, device=self.table.device)
        rel = pos[None, :] - pos[:, None]  # (n, n)  j − i
        b = relative_bucket(rel, self.table.shape[0], self.max_distance, self.bidirectional)
        return self.table[b].permute(2, 0, 1)  # (H, n, n)


def relative_bucket(
    rel: torch.Tensor, num_buckets: int, max_distance: int, bidirectional: bool
) -> torch.Tensor:
    """Bucket of the relative position ``rel = j − i``: exact below ``num_buckets/2`` (per direction when
    bidirectional), logarithmic up to ``max_distance``, then the last bucket. The logarithm is taken in
    float32 and truncated, as in the reference implementations (bucket edges depend on it)."""
    out = torch.zeros_like(rel)
    nb = num_buckets
    if bidirectional:
        nb //= 2
        out = out + (rel > 0).long() * nb
        dist = rel.abs()
    else:
        dist = (-rel).clamp_min(0)
    exact = nb // 2
    small = dist < exact
    large = exact + (torch.log(dist.float() / exact) / math.log(max_distance / exact) * (nb - exact)).to(
        torch.long
    )
    large = large.clamp_max(nb - 1)
    return out + torch.where(small, dist, large)


def visibility_mask(
    n: int, *, causal: bool, window: tuple[int, int] | None = None, device: Any = None
) -> torch.Tensor | None:
    """``(n, n)`` bool, True where query ``i`` may see key ``j`` (None: everything visible).

    ``window = (left, right)`` keeps ``−left ≤ j − i ≤ right``; a causal mask also drops ``j > i``.
    """
    if not causal and window is None:
        return None
    pos = torch.arange(n, device=device)
    rel = pos[None, :] - pos[:, None]  # (n, n)  j − i
    ok = torch.ones(n, n, dtype=torch.bool, device=device)
    if causal:
        ok &= rel <= 0
    if window is not None:
        ok &= (rel >= -window[0]) & (rel <= window[1])
    return ok
