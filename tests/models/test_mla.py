"""Multi-head latent attention (DeepSeek-V2/V3): the per-head effective maps against the model's own
factors, a dropped latent norm is detected, and the spectra use the non-rotary (bilinear) part.

The probabilities and block outputs of every variant are compared with ``output_attentions`` in
``test_flag_matrix.py`` (``deepseek_v2/...``, ``deepseek_v3/...``) and in ``test_families.py``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnlab.models import load
from attnlab.models.mla import LatentLayerHeads
from attnlab.models.trace import trace

transformers = pytest.importorskip("transformers")
from tinymodels import build_variant  # noqa: E402

# The reference's RMS norms compute in float32 even in a float64 model (~6e-8 relative); projections of
# O(1) inputs through O(1) weights stay O(10): 1e-5 absolute bounds the difference with room.
TOL = 1e-5


@pytest.mark.parametrize("name", ["deepseek_v2/v_head_dim=7", "deepseek_v3/attention_bias=True"])
def test_effective_maps_reproduce_the_modules_own_projections(name: str, tmp_path) -> None:
    model, inputs = build_variant(name)
    model.save_pretrained(tmp_path)
    heads = load(tmp_path, dtype=torch.float64)
    tr = trace(model, **inputs)
    cfg = model.config
    H, N, R, V = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    att = model.layers[0].self_attn
    x = tr.inputs[0]  # (B, n, d)
    B, n, _ = x.shape
    with torch.no_grad():  # the model's own modules, step by step
        if cfg.q_lora_rank is None:
            q = att.q_proj(x)
        else:
            q = att.q_b_proj(att.q_a_layernorm(att.q_a_proj(x)))
        q = q.view(B, n, H, N + R).transpose(1, 2)  # (B, H, n, N+R): [nope; rotary]
        c, k_pe = att.kv_a_proj_with_mqa(x).split([cfg.kv_lora_rank, R], dim=-1)
        kv = att.kv_b_proj(att.kv_a_layernorm(c)).view(B, n, H, N + V).transpose(1, 2)
    layer = heads.layers[0]
    assert isinstance(layer, LatentLayerHeads)
    rq, rkv = layer.latent_factors(x)  # (B, n)
    q_ours = rq[:, None, :, None] * (torch.einsum("bnd,hdk->bhnk", x, layer.W_Q) + layer.b_Q[:, None])
    k_ours = torch.einsum("bnd,hdk->bhnk", x, layer.W_K) + layer.b_K[:, None]
    v_ours = rkv[:, None, :, None] * (torch.einsum("bnd,hdk->bhnk", x, layer.W_V) + layer.b_V[:, None])
    torch.testing.assert_close(q_ours[..., :R], q[..., N:], rtol=0, atol=TOL)
    torch.testing.assert_close(q_ours[..., R : R + N], q[..., :N], rtol=0, atol=TOL)
    torch.testing.assert_close(k_ours[..., :R], k_pe[:, None].expand(B, H, n, R), rtol=0, atol=TOL)
    torch.testing.assert_close(rkv[:, None, :, None] * k_ours[..., R : R + N], kv[..., :N], rtol=0, atol=TOL)
    torch.testing.assert_close(v_ours[..., :V], kv[..., N:], rtol=0, atol=TOL)
    assert float(layer.W_V[..., V:].abs().sum()) == 0.0  # zero padding up to d_head = max(N + R, V)


def test_a_dropped_latent_norm_is_detected(tmp_path) -> None:
    """The comparison can fail: without the latent RMS factors the probabilities differ."""
    model, inputs = build_variant("deepseek_v3/q_lora_rank=None")
    model.save_pretrained(tmp_path)
    heads = load(tmp_path, dtype=torch.float64)
    tr = trace(model, **inputs)
    layer = heads.layers[0]
    bare = dataclasses.replace(layer, latent_eps=1e6)  # ρ ≈ 10⁻³ instead of ≈ 1/rms(c)
    full = layer.forward(tr.inputs[0], causal=True, rope=heads.rope).probs
    torch.testing.assert_close(full, tr.attentions[0], rtol=0, atol=2e-6)
    off = bare.forward(tr.inputs[0], causal=True, rope=heads.rope).probs
    assert (off - tr.attentions[0]).abs().max() > 1e-2


def test_spectra_use_the_bilinear_part(tmp_path) -> None:
    """qk_sv of the diagnosis equals the singular values of scale · W_Q^nope (W_K^nope)ᵀ built from the
    checkpoint's factors directly (q_proj rows, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj)."""
    from attnlab import diagnose as dg

    model, _ = build_variant("deepseek_v2/v_head_dim=7")
    model.save_pretrained(tmp_path)
    diag = dg.diagnose(load(tmp_path, dtype=torch.float64))
    cfg = model.config
    H, N, R, V, r = (
        cfg.num_attention_heads,
        cfg.qk_nope_head_dim,
        cfg.qk_rope_head_dim,
        cfg.v_head_dim,
        cfg.kv_lora_rank,
    )
    att = model.layers[1].self_attn
    wq = att.q_proj.weight.detach().view(H, N + R, -1)[:, :N]  # (H, N, d)
    a_c = att.kv_a_proj_with_mqa.weight.detach()[:r]  # (r, d)
    g = att.kv_a_layernorm.weight.detach()  # (r,)
    bk = att.kv_b_proj.weight.detach().view(H, N + V, r)[:, :N]  # (H, N, r)
    wk = bk @ (g[:, None] * a_c)  # (H, N, d)
    scale = (N + R) ** -0.5
    M = scale * wq.transpose(1, 2) @ wk  # (H, d, d) in the row convention x_i M x_jᵀ
    sv = torch.linalg.svdvals(M)[:, :N]  # rank ≤ N
    ours = torch.as_tensor(diag.arrays["qk_sv"][1])[:, :N]
    # float64 SVDs of the same product assembled in two orders: 1e-10 relative
    torch.testing.assert_close(ours, sv, rtol=1e-10, atol=1e-12)


def test_inspect_says_what_the_hdi_means_for_a_shared_latent(tmp_path, capsys) -> None:
    import json

    from attnlab.cli.main import main

    model, _ = build_variant("deepseek_v3/attention_bias=True")
    model.save_pretrained(tmp_path)
    capsys.readouterr()
    assert main(["inspect", str(tmp_path), "--json", "--no-text"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scores_bilinear"] is False
    cfg = model.config
    k, r, R = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim, cfg.kv_lora_rank, cfg.qk_rope_head_dim
    # the null of random (N+R)-dim subspaces of the (r+R)-dim span of the latent and the rotary key
    assert f"give HDI {1 - k / (r + R):.4f} (K)" in data["note"]
