"""End-to-end: attention weights and block outputs recomputed from HeadWeights equal the model's own."""

from __future__ import annotations

import pytest
import torch

from attnlab.models import from_transformers, load
from attnlab.models.trace import trace

pytest.importorskip("transformers")

KINDS = ["bert", "roberta", "albert", "gpt2", "gpt2-layerscale", "llama-gqa", "llama-headdim"]


def _check_model(model: torch.nn.Module, heads, n: int = 9, rtol: float = 1e-10) -> None:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 50, (2, n), generator=g)
    tr = trace(model, ids)
    assert len(tr.inputs) == heads.n_layers
    for i in range(heads.n_layers):
        out = heads.forward(i, tr.inputs[i])
        # float64 model and float64 HeadWeights: the two computations differ only by summation order,
        # ~1e-15 relative per op; 1e-10 leaves room for softmax of O(10) scores and sums over d.
        torch.testing.assert_close(out.probs, tr.attentions[i], rtol=rtol, atol=rtol * 1e-2)
        torch.testing.assert_close(out.output, tr.outputs[i], rtol=rtol, atol=rtol)
        # head contributions plus b_O reproduce the block output
        summed = out.head_outputs.sum(1) + heads.layers[i].b_O
        torch.testing.assert_close(summed, tr.outputs[i], rtol=rtol, atol=rtol)


@pytest.mark.parametrize("kind", KINDS)
def test_end_to_end(kind: str, build_model) -> None:
    model = build_model(kind)
    heads = from_transformers(model, dtype=torch.float64)
    # The reference Llama computes its RoPE angles in float32 even in a float64 model (relative
    # error ~1e-7 on cos/sin), so the Llama comparison gets 1e-6; everything else is float64 throughout.
    _check_model(model, heads, rtol=1e-6 if kind.startswith("llama") else 1e-10)
    if kind != "llama-headdim":  # every other config has biases: they must reach HeadWeights, non-zero
        for layer in heads.layers:
            for name in ("b_Q", "b_K", "b_V", "b_O"):
                assert getattr(layer, name).abs().min() > 0, name


def test_dropped_bias_is_detected(build_model) -> None:
    """The end-to-end check can fail: zeroing one bias in HeadWeights breaks the block output."""
    import dataclasses

    model = build_model("bert")
    heads = from_transformers(model, dtype=torch.float64)
    bad = dataclasses.replace(heads.layers[0], b_V=torch.zeros_like(heads.layers[0].b_V))
    heads_bad = dataclasses.replace(heads, layers=(bad, *heads.layers[1:]))
    with pytest.raises(AssertionError):
        _check_model(model, heads_bad)


def test_metadata(build_model) -> None:
    albert = from_transformers(build_model("albert"))
    assert albert.shared_layers and albert.n_layers == 4
    assert albert.layers[0] is albert.layers[1] and albert.layers[2] is albert.layers[3]
    assert albert.layers[0] is not albert.layers[2]
    llama = from_transformers(build_model("llama-gqa"))
    assert llama.grouped_kv and llama.n_kv_heads == 2 and llama.n_heads == 6
    assert llama.causal and llama.pre_norm and llama.rope is not None and llama.rope.theta == 500.0
    gpt = from_transformers(build_model("gpt2"))
    assert gpt.causal and gpt.pre_norm and not gpt.grouped_kv and gpt.n_kv_heads == 4
    hd = from_transformers(build_model("llama-headdim"))
    assert (hd.d_model, hd.d_head) == (32, 12)
    scaled = from_transformers(build_model("gpt2-layerscale"))
    assert [round(layer.scale * 12**0.5 * (i + 1), 12) for i, layer in enumerate(scaled.layers)] == [1.0] * 3


def test_gqa_kv_heads_unexpanded(build_model) -> None:
    """K/V head j (stored once) serves query heads j*r .. j*r+r-1 (r = 3 here), read from k_proj."""
    model = build_model("llama-gqa")
    heads = from_transformers(model, dtype=torch.float64)
    wk = model.model.layers[0].self_attn.k_proj.weight.detach()  # (H_kv*k, d)
    k = heads.d_head
    layer = heads.layers[0]
    assert layer.W_K.shape == (2, 48, k) and layer.b_V.shape == (2, k)
    for h in range(6):
        j = h // 3
        assert int(layer.kv_index[h]) == j
        torch.testing.assert_close(layer.expanded("W_K")[h], wk[j * k : (j + 1) * k].T, rtol=0, atol=0)


def test_gpt2_conv1d_orientation(build_model) -> None:
    """Conv1D stores x @ W: head h's W_Q is a block of columns of c_attn.weight, not of its transpose."""
    model = build_model("gpt2")
    heads = from_transformers(model, dtype=torch.float64)
    w = model.h[1].attn.c_attn.weight.detach()  # (d, 3d)
    wo = model.h[1].attn.c_proj.weight.detach()  # (d, d), rows = inputs
    d, k = 48, 12
    for h in range(4):
        torch.testing.assert_close(heads.layers[1].W_Q[h], w[:, h * k : (h + 1) * k], rtol=0, atol=0)
        torch.testing.assert_close(
            heads.layers[1].W_V[h], w[:, 2 * d + h * k : 2 * d + (h + 1) * k], rtol=0, atol=0
        )
        torch.testing.assert_close(heads.layers[1].W_O[h], wo[h * k : (h + 1) * k], rtol=0, atol=0)


@pytest.mark.parametrize("fmt", ["safetensors", "sharded", "bin"])
def test_folder_formats(tmp_path, fmt: str, build_model) -> None:
    """The three on-disk layouts give the same HeadWeights as the in-memory model."""
    model = build_model("bert").float()
    if fmt == "bin":  # a plain torch pickle of tensors, read back with weights_only=True
        model.config.save_pretrained(tmp_path)
        torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    else:
        model.save_pretrained(tmp_path, **({"max_shard_size": "20KB"} if fmt == "sharded" else {}))
    names = {p.name for p in tmp_path.iterdir()}
    if fmt == "sharded":
        assert "model.safetensors.index.json" in names
    if fmt == "bin":
        assert "pytorch_model.bin" in names
    a = load(tmp_path)
    b = from_transformers(model)
    for la, lb in zip(a.layers, b.layers):
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"):
            torch.testing.assert_close(getattr(la, name), getattr(lb, name), rtol=0, atol=0)
