"""The transformer, its export and conversion: HeadWeights reproduce the model's own attention."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.training import (
    CopyTask,
    ModelConfig,
    NWTask,
    Transformer,
    export_checkpoint,
    head_weights,
    train,
)
from attnlab.training.trainer import TrainConfig


def _cfg(positions: str, **kw) -> ModelConfig:
    base = dict(n_layers=2, n_heads=4, d_model=16, seq_len=12, vocab_size=7, positions=positions)
    base.update(kw)
    return ModelConfig(**base)


@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_sdpa_path_equals_explicit_softmax(positions):
    model = Transformer(_cfg(positions), torch.Generator().manual_seed(0)).double()
    x = torch.randint(0, 7, (3, 12), generator=torch.Generator().manual_seed(1))
    fast = model(x)
    slow, _, probs = model(x, capture=True)
    # both paths compute the same float64 expression in a different order: rounding only
    assert torch.allclose(fast, slow, atol=1e-12, rtol=0)
    assert all(torch.allclose(p.sum(-1), torch.ones(()).double(), atol=1e-12) for p in probs)
    # causal: no weight on future keys
    assert all(float(p.triu(1).abs().max()) == 0.0 for p in probs)


@pytest.mark.parametrize("positions,family", [("learned", "gpt2"), ("rotary", "llama")])
def test_converted_heads_reproduce_the_models_attention(positions, family):
    """A trained checkpoint -> export -> attnlab.models converter -> HeadWeights.forward on the model's own
    attention inputs gives the model's attention probabilities and attention-block output."""
    task = CopyTask(vocab=7, seq_len=12, offset=3)
    cfg = _cfg(positions)
    run = train(
        task, cfg, TrainConfig(steps=30, batch_size=8, records=1, val_batches=1, probe_batch=2), seed=3
    )
    model = run.model.double()
    heads = head_weights(model)  # float64 through the converter
    assert heads.architecture == family and heads.causal
    assert (heads.n_layers, heads.n_heads, heads.d_model, heads.d_head) == (2, 4, 16, 4)
    x, _ = task.sample(4, torch.Generator().manual_seed(9))
    with torch.no_grad():
        _, inputs, probs = model(x, capture=True)
        for i, blk in enumerate(model.blocks):
            out = heads.forward(i, inputs[i])
            ref_out, _ = blk.attn(inputs[i], probs=True)
            # float64 on both sides, different summation order: 1e-12 covers the rounding
            assert torch.allclose(out.probs, probs[i], atol=1e-12, rtol=0)
            assert torch.allclose(out.output, ref_out, atol=1e-12, rtol=0)
    # the float32 model against float32 heads: float32 rounding (~1e-7) through a softmax
    m32 = run.model.float()
    h32 = head_weights(m32, dtype=torch.float32)
    with torch.no_grad():
        _, inputs, probs = m32(x, capture=True)
        assert torch.allclose(h32.forward(1, inputs[1]).probs, probs[1], atol=1e-5)


def test_export_layouts_and_record_heads():
    cfg = _cfg("learned")
    model = Transformer(cfg, torch.Generator().manual_seed(0))
    state, config = export_checkpoint(model)
    assert config["model_type"] == "gpt2" and state["h.1.attn.c_attn.weight"].shape == (16, 48)
    # head h of W_K is the output rows [16 + 4h, 16 + 4h + 4) of the fused nn.Linear weight
    hw = head_weights(model)
    w = model.blocks[1].attn.qkv.weight.detach().double()
    assert torch.equal(hw.layers[1].W_K[2], w[16 + 8 : 16 + 12].T)
    state, config = export_checkpoint(Transformer(_cfg("rotary"), torch.Generator().manual_seed(0)))
    assert config["model_type"] == "llama" and set(state) >= {"layers.0.self_attn.o_proj.weight"}


def test_vector_inputs_and_init_statistics():
    task = NWTask()
    cfg = ModelConfig(n_layers=2, n_heads=4, d_model=64, seq_len=32, d_in=task.d_in, d_out=1)
    model = Transformer(cfg, torch.Generator().manual_seed(0))
    x, _ = task.sample(2, torch.Generator().manual_seed(0))
    assert model(x).shape == (2, 32, 1)
    w = model.blocks[0].attn.qkv.weight.detach()
    # 64·192 draws of N(0, 0.02²): the sample sd is within 3% of 0.02 (its relative sd is ~0.6%)
    assert abs(float(w.std()) / 0.02 - 1) < 0.03
    assert abs(float(model.blocks[0].attn.out.weight.detach().std()) / (0.02 / math.sqrt(4)) - 1) < 0.05
    # same generator seed, same weights
    again = Transformer(cfg, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_bad_configs():
    with pytest.raises(ValueError, match="d_model"):
        ModelConfig(n_heads=3, d_model=16, vocab_size=5)
    with pytest.raises(ValueError, match="vocab_size/d_in"):
        ModelConfig(vocab_size=5, d_in=3, d_out=1)
    with pytest.raises(ValueError, match="positions"):
        ModelConfig(vocab_size=5, positions="alibi")
    with pytest.raises(ValueError, match="seq_len"):
        Transformer(_cfg("learned"))(torch.zeros(1, 13, dtype=torch.long))
