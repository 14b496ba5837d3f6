"""Benchmarks of the real-model diagnostics (run: pytest bench/bench_models.py --benchmark-only -s).

Each benchmark times the project's weights-only ``diagnose`` and a plain reference in the same run
and reports ratio = reference time / project time. The reference is the direct approach: per head
pair ``scipy.linalg.subspace_angles`` and overlaps from per-head SVD bases (Q, K, V, OV), a dense
``d × d`` SVD of ``W_Q W_Kᵀ`` per head, dense ``M_h, V_h`` for the flow defects and ``‖M_g M_h‖_op``.
Targets: MiniLM (72 heads) under 10 s, GPT-2-small-sized random model (144 heads, d 768) under 30 s.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from attnlab.diagnose import diagnose
from attnlab.models import from_state_dict, load


def _reference_layer(WQ, WK, WV, WO, scale) -> None:
    """Naive numpy/scipy diagnostics of one layer (same quantities as diagnose, no batching)."""
    from scipy.linalg import subspace_angles

    H = WQ.shape[0]
    ov = [(WV[h] @ WO[h]).T for h in range(H)]  # dense V_h (d, d)
    for stack in (WQ, WK, WV, ov):
        bases = [np.linalg.svd(W, full_matrices=False)[0][:, : WQ.shape[2]] for W in stack]
        for a in range(H):
            for b in range(a + 1, H):
                np.linalg.norm(bases[a].T @ bases[b]) ** 2
                subspace_angles(bases[a], bases[b])
    Ms = [scale * WQ[h] @ WK[h].T for h in range(H)]
    ops = []
    for h in range(H):
        np.linalg.svd(Ms[h], compute_uv=False)
        np.linalg.norm(Ms[h] - Ms[h].T)
        np.sum(ov[h] * Ms[h])
        ops.append(np.linalg.norm(Ms[h], 2))
    for g in range(H):
        for h in range(H):
            if g != h:
                np.linalg.norm(Ms[g] @ Ms[h], 2)


def _reference(heads, layers: int) -> float:
    t = time.perf_counter()
    for i in range(layers):
        la = heads.layers[i].to(torch.float64)
        _reference_layer(la.W_Q.numpy(), la.W_K.numpy(), la.W_V.numpy(), la.W_O.numpy(), la.scale)
    return time.perf_counter() - t


def _gpt2_small_random():
    """A GPT-2-small-sized attention state dict with random weights (12 layers x 12 heads, d 768)."""
    g = torch.Generator().manual_seed(0)
    d, L = 768, 12
    sd = {}
    for i in range(L):
        sd[f"h.{i}.attn.c_attn.weight"] = 0.02 * torch.randn(d, 3 * d, generator=g)
        sd[f"h.{i}.attn.c_attn.bias"] = 0.02 * torch.randn(3 * d, generator=g)
        sd[f"h.{i}.attn.c_proj.weight"] = 0.02 * torch.randn(d, d, generator=g)
        sd[f"h.{i}.attn.c_proj.bias"] = 0.02 * torch.randn(d, generator=g)
    cfg = {"model_type": "gpt2", "n_embd": d, "n_layer": L, "n_head": 12}
    return from_state_dict(sd, cfg, name="gpt2-small-random")


@pytest.fixture(autouse=True)
def _one_thread():
    """Both sides on one thread (torch and BLAS), so the ratio compares algorithms, not thread counts."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


def _bench(benchmark, heads, ref_layers: int) -> None:
    diagnose(heads)  # warm-up (the bulk-edge null is cached per (d, k))
    benchmark.pedantic(diagnose, args=(heads,), rounds=2, iterations=1)
    ours = benchmark.stats.stats.mean
    ref = _reference(heads, ref_layers) * heads.n_layers / ref_layers
    ratio = ref / ours
    benchmark.extra_info.update(
        {"project_s": ours, "reference_s": ref, "ratio": ratio, "reference_layers_timed": ref_layers}
    )
    print(
        f"\n{heads.name}: diagnose {ours:.2f} s, naive reference {ref:.2f} s "
        f"({ref_layers}/{heads.n_layers} layers timed, scaled), ratio {ratio:.1f}x"
    )


def test_bench_minilm_weights_only(benchmark) -> None:
    _bench(benchmark, load("minilm"), ref_layers=1)  # the naive reference is slow: one layer, scaled


def test_bench_gpt2_small_random(benchmark) -> None:
    _bench(benchmark, _gpt2_small_random(), ref_layers=1)
