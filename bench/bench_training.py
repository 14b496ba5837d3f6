"""Benchmarks of the trainer (run: pytest bench/bench_training.py --benchmark-only -s).

1. One AdamW training step (forward, backward, clip, step) of the project's transformer against a plain
   reference of the same size built on ``torch.nn.MultiheadAttention`` (pre-LN blocks, the same MLP,
   embeddings and read-out, causal mask), at the quick size (d 32, 2 layers, 4 heads, 32 characters,
   batch 32) and at the full size (d 128, 4 layers, 4 heads, 128 characters, batch 64). Ratio =
   reference time / project time (> 1: the project is faster).
2. The geometry of one record (HDI of Q/K/V/OV in three forms with their nulls, QK rank) at the full
   size, against a plain loop that calls ``geometry.diversity`` once per subspace and form on
   explicitly formed factors and draws the data-metric null one head at a time.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from attnlab.core import geometry
from attnlab.training import CopyTask, ModelConfig, TrainConfig, Transformer, layer_geometry, train
from attnlab.training.trainer import _optimizer


@pytest.fixture(autouse=True)
def _one_thread():
    """Both sides on one thread, so the ratio compares implementations, not thread counts."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


class _RefBlock(nn.Module):
    def __init__(self, d: int, H: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, H, bias=False, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class _Reference(nn.Module):
    """The plain way: nn.MultiheadAttention blocks with a boolean causal mask."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(cfg.seq_len, cfg.d_model))
        self.blocks = nn.ModuleList(_RefBlock(cfg.d_model, cfg.n_heads) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)  # True: not allowed
        h = self.embed(x) + self.pos[:n]
        for b in self.blocks:
            h = b(h, mask)
        return self.head(self.ln_f(h))


def _step_fn(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor):
    def step() -> None:
        out = model(x)
        loss = nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


def _best(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


@pytest.mark.parametrize(
    "size,d,L,n,B",
    [("quick", 32, 2, 32, 32), ("full", 128, 4, 128, 64)],
)
def test_training_step(benchmark, size, d, L, n, B):
    V = 81  # the Shakespeare alphabet
    cfg = ModelConfig(n_layers=L, n_heads=4, d_model=d, seq_len=n, vocab_size=V)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, V, (B, n), generator=g)
    y = torch.randint(0, V, (B, n), generator=g)
    ours = Transformer(cfg, g)
    ours_step = _step_fn(ours, _optimizer(ours, TrainConfig()), x, y)
    ref = _Reference(cfg)
    ref_step = _step_fn(ref, torch.optim.AdamW(ref.parameters(), lr=3e-3), x, y)
    reps = 10 if size == "quick" else 3
    ours_step(), ref_step()  # warm-up
    benchmark.pedantic(ours_step, rounds=reps, iterations=1)
    t_ours = benchmark.stats.stats.min
    t_ref = _best(ref_step, reps)
    ratio = t_ref / t_ours
    benchmark.extra_info.update({"project_s": t_ours, "reference_s": t_ref, "ratio": ratio})
    print(
        f"\n[{size}] training step: project {t_ours * 1e3:.1f} ms, "
        f"nn.MultiheadAttention {t_ref * 1e3:.1f} ms, "
        f"ratio {ratio:.2f}"
    )


def _plain_geometry(heads, sigma, samples: int) -> None:
    """Per subspace and form: geometry.diversity on explicit factors; the data null head by head."""
    from attnlab.diagnose import ov_factors

    for i, la in enumerate(heads.layers):
        S = sigma[i]
        w, U = torch.linalg.eigh(S)
        root = (U * w.clamp_min(0).sqrt()) @ U.T
        for W in (la.W_Q, la.W_K, la.W_V, ov_factors(la.W_V, la.W_O)):
            geometry.diversity(W, "subspace")
            geometry.diversity(W, "weight")
            geometry.diversity(root @ W, "subspace")
        g = torch.Generator().manual_seed(0)
        for _ in range(samples):
            G = torch.stack(
                [
                    torch.randn(heads.d_model, heads.d_head, generator=g, dtype=torch.float64)
                    for _ in range(heads.n_heads)
                ]
            )
            geometry.diversity(root @ G, "subspace")


def test_record_geometry(benchmark):
    task = CopyTask(vocab=81, seq_len=128, offset=3)
    cfg = ModelConfig(n_layers=4, n_heads=4, d_model=128, seq_len=128, vocab_size=81)
    run = train(
        task, cfg, TrainConfig(steps=1, batch_size=8, records=1, val_batches=1, probe_batch=8), seed=0
    )
    rec = run.records[-1]
    heads = rec.heads()
    layer_geometry(heads, rec.sigma, samples=32)  # warm-up (the weight-form nulls are cached)
    benchmark.pedantic(
        layer_geometry, args=(heads, rec.sigma), kwargs={"samples": 32}, rounds=3, iterations=1
    )
    t_ours = benchmark.stats.stats.min
    t_ref = _best(lambda: _plain_geometry(heads, rec.sigma, 32), 2)
    ratio = t_ref / t_ours
    benchmark.extra_info.update({"project_s": t_ours, "reference_s": t_ref, "ratio": ratio})
    print(
        f"\nrecord geometry (4 layers, d 128): project {t_ours:.3f} s, plain loop {t_ref:.3f} s, "
        f"ratio {ratio:.2f}"
    )
