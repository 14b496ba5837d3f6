"""The trainer: schedule, resume bit for bit, a planted optimum reached, the orthogonality control."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.training import (
    CopyTask,
    ModelConfig,
    TrainConfig,
    layer_geometry,
    learning_rate,
    record_steps,
    train,
)

COPY = CopyTask(vocab=8, seq_len=16, offset=3)
SMALL = ModelConfig(n_layers=1, n_heads=2, d_model=16, seq_len=16, vocab_size=8)


def test_schedule_warmup_and_cosine_end_points():
    cfg = TrainConfig(steps=101, lr=1e-2, warmup=10, min_lr_ratio=0.1)
    assert learning_rate(0, cfg) == pytest.approx(1e-3)
    assert learning_rate(9, cfg) == pytest.approx(1e-2)
    assert learning_rate(10, cfg) == pytest.approx(1e-2)
    assert learning_rate(100, cfg) == pytest.approx(1e-3)
    # half-way through the decay the cosine is at its mid-point: (1 + 0.1)/2 · lr
    assert learning_rate(55, cfg) == pytest.approx(0.55e-2)
    assert record_steps(1000, 4) == (0, 1, 10, 100, 1000)
    assert record_steps(7, 1) == (0, 7)


def _flat(result) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in result.model.parameters()])


def test_resume_gives_the_same_trajectory_bit_for_bit():
    cfg = TrainConfig(steps=14, batch_size=8, lr=5e-3, warmup=3, records=4, val_batches=1, probe_batch=2)
    whole = train(COPY, SMALL, cfg, seed=5)
    first = train(COPY, SMALL, cfg, seed=5, until=6)
    assert first.step == 6
    rest = train(COPY, SMALL, cfg, seed=5, checkpoint=first.checkpoint)
    assert torch.equal(_flat(whole), _flat(rest))
    assert np.array_equal(whole.train_losses, np.concatenate([first.train_losses, rest.train_losses]))
    assert [(r.step, r.val_loss, r.train_loss) for r in whole.records] == [
        (r.step, r.val_loss, r.train_loss) for r in rest.records
    ]
    # the optimiser state as well
    sa, sb = whole.checkpoint["optimizer"]["state"], rest.checkpoint["optimizer"]["state"]
    assert all(torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"]) for i in sa)
    # another seed gives another trajectory
    other = train(COPY, SMALL, cfg, seed=6)
    assert not torch.equal(_flat(whole), _flat(other))
    with pytest.raises(ValueError, match="checkpoint"):
        train(COPY, SMALL, cfg, seed=7, checkpoint=first.checkpoint)
    with pytest.raises(ValueError, match="until"):
        train(COPY, SMALL, cfg, seed=5, checkpoint=first.checkpoint, until=3)


def test_fits_a_planted_attention_pattern_to_its_known_optimum():
    """Copy at offset 3: the optimum (offset − 1)/n · log V = 0.2599 nats needs position t to attend to a
    key holding s_{t+1}, i.e. one of t − 2, t − 5, ... (the sequence has period 3); the trained model gets
    within 0.03 nats of the optimum, and one head puts most of its weight on those keys."""
    calls = []
    cfg = TrainConfig(steps=150, batch_size=32, lr=1e-2, weight_decay=0.0, records=2, val_batches=2)
    run = train(COPY, SMALL, cfg, seed=0, progress=lambda s, n, loss: calls.append((s, n)))
    assert calls[0] == (1, 150) and calls[-1] == (150, 150)
    opt = COPY.optimal_loss()
    assert opt == pytest.approx(2 / 16 * math.log(8))
    assert run.final_val_loss < opt + 0.03
    assert run.final_val_loss > opt - 0.01  # cannot beat the Bayes loss beyond sampling noise
    x, _ = COPY.sample(16, torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, _, probs = run.model(x, capture=True)
    t = torch.arange(16)
    planted = (t[None, :] <= t[:, None] - 2) & ((t[:, None] - t[None, :]) % 3 == 2)  # (n, n) query, key
    mass = (probs[0] * planted).sum(-1)[:, :, 2:].mean(dim=(0, 2))  # (H,) weight on the planted keys
    assert float(mass.max()) > 0.9


def test_orthogonality_penalty_raises_hdi():
    """The positive control: the same run with the penalty ends with more diverse K heads (all forms)."""
    model = ModelConfig(n_layers=1, n_heads=4, d_model=16, seq_len=16, vocab_size=8)
    cfg = dict(steps=60, batch_size=16, lr=1e-2, records=1, val_batches=1, probe_batch=4)
    plain = train(COPY, model, TrainConfig(**cfg), seed=2)
    ortho = train(COPY, model, TrainConfig(**cfg, ortho_penalty=1.0), seed=2)
    gp = layer_geometry(plain.records[-1].heads(), plain.records[-1].sigma, samples=8)[0]
    go = layer_geometry(ortho.records[-1].heads(), ortho.records[-1].sigma, samples=8)[0]
    for form in ("subspace", "weight", "data"):
        assert go[f"hdi_k_{form}"] > gp[f"hdi_k_{form}"] + 0.1
    assert go["hdi_k_weight"] > go["null_k_weight"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="vocab_size"):
        train(COPY, ModelConfig(vocab_size=9, seq_len=16), TrainConfig(steps=1), seed=0)
    with pytest.raises(ValueError, match="seq_len"):
        train(COPY, ModelConfig(vocab_size=8, seq_len=8), TrainConfig(steps=1), seed=0)
    with pytest.raises(ValueError, match="until"):
        train(COPY, SMALL, TrainConfig(steps=2), seed=0, until=3)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=0.0)
