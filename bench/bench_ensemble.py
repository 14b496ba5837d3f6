"""Benchmarks of paper A's hot path: the Monte Carlo MSE decomposition.

Run: ``.venv/bin/pytest bench/bench_ensemble.py --benchmark-only -s``.
``BENCH_REPS`` (default 200, the issue's size) sets the replications of the big benchmark.
Each benchmark reports, from the same run: kernel evaluations per second against the machine's
own float64 ``torch.exp`` throughput on cache-sized chunks, and the ratio to a plain reference
(Python loops over replications and heads, numpy for each head's kernel matrix).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import decompose_predictions, monte_carlo_predictions
from attnlab.ensemble.layouts import projection_layout

N, M, D, H, DK = 2000, 500, 16, 16, 4
R = int(os.environ.get("BENCH_REPS", "200"))
REF_REPS = 4  # the reference is timed on a few replications and scaled (its cost is linear in R)


def _exp_throughput(chunk: int = 1 << 15, calls: int = 300, repeats: int = 5) -> float:
    """float64 exps per second on a cache-sized chunk (best of ``repeats`` timings)."""
    x = torch.randn(chunk, dtype=torch.float64)
    out = torch.empty_like(x)
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.exp(x, out=out)
        best = max(best, calls * chunk / (time.perf_counter() - t0))
    return best


def _reference(task, W, Q, reps, seed):
    """Plain loops: one numpy kernel matrix per replication and head (log-sum-exp stabilised)."""
    g = torch.Generator().manual_seed(seed)
    Qn, Wn = Q.numpy(), W.numpy()
    out = np.empty((reps, W.shape[0], Q.shape[0]))
    sc = 1.0 / np.sqrt(W.shape[-1])
    for r in range(reps):
        X, y = task.sample(N, g)
        Xn, yn = X.numpy(), y.numpy()
        for h in range(W.shape[0]):
            pq, pk = Qn @ Wn[h], Xn @ Wn[h]
            s = sc * (pq @ pk.T) - 0.5 * sc * (pk**2).sum(1)[None, :]
            s -= s.max(axis=1, keepdims=True)
            k = np.exp(s)
            out[r, h] = (k @ yn) / k.sum(axis=1)
    return out


def test_bench_mc_decomposition(benchmark):
    task = RegressionTask(d=D, target="ridge", noise=0.5)
    W = projection_layout("random", H, D, DK, c=1.5, generator=torch.Generator().manual_seed(0))
    Q = task.sample_x(M, torch.Generator().manual_seed(1))
    alpha = torch.full((H,), 1.0 / H, dtype=torch.float64)
    exp_rate = _exp_throughput()

    def run():
        P = monte_carlo_predictions(task, W, N, Q, R, torch.Generator().manual_seed(2))
        return decompose_predictions(P, task.f(Q), alpha)

    dec = benchmark.pedantic(run, rounds=1, iterations=1)
    wall = benchmark.stats.stats.min
    evals = R * H * M * N
    t0 = time.perf_counter()
    ref = _reference(task, W, Q, REF_REPS, 2)
    ref_wall = (time.perf_counter() - t0) * R / REF_REPS
    # the same first replications agree with the reference
    P4 = monte_carlo_predictions(task, W, N, Q, REF_REPS, torch.Generator().manual_seed(2), rep_chunk=1)
    agree = float(np.abs(P4.numpy() - ref).max())
    rate = evals / wall
    info = {
        "threads": torch.get_num_threads(),
        "reps": R,
        "kernel_evals": evals,
        "wall_s": wall,
        "evals_per_s": rate,
        "exp_per_s": exp_rate,
        "fraction_of_exp_throughput": rate / exp_rate,
        "reference_wall_s_scaled": ref_wall,
        "speedup_vs_reference": ref_wall / wall,
        "max_abs_diff_vs_reference": agree,
        "identity_rel_error": dec.identity_rel_error,
    }
    benchmark.extra_info.update(info)
    print(
        "\n"
        + "\n".join(f"  {k}: {v:.4g}" if isinstance(v, float) else f"  {k}: {v}" for k, v in info.items())
    )
    assert agree < 1e-10
