"""Benchmarks of paper C: the state-evolution solver against a per-sample scipy reference, and J.

Run: .venv/bin/pytest bench/bench_highdim.py --benchmark-only -s
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from scipy import integrate, optimize

from attnlab.highdim import J_and_derivatives, MarchenkoPastur, Setting, state_evolution
from attnlab.highdim.state_evolution import _prior, flat_to_matrix_map

SETTING = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
ALPHA = 0.5


def _reference_se(target, budget_s: float = 90.0, samples: int = 1000, damping: float = 0.8, seed: int = 0):
    """Published-style iteration: fresh Monte Carlo samples each iteration, one scipy minimise per sample.

    Returns the time at which all six order parameters first came within 5% of ``target`` (or None).
    """
    rng = np.random.default_rng(seed)
    s = SETTING
    q0, T, K = s.q0, 2, 3
    L = flat_to_matrix_map(T).numpy()

    def sm(v, beta):
        A = (L @ v).reshape(T, T) * beta
        A = A - A.max(-1, keepdims=True)
        e = np.exp(A)
        return (e / e.sum(-1, keepdims=True)).ravel()

    q, m, sigma = 0.5 * q0, 0.4 * q0, 1.0
    hats = None
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < budget_s:
        g = rng.standard_normal((samples, 3 * K))
        zs = math.sqrt(q0) * g[:, :K]
        z = (m / math.sqrt(q0)) * g[:, :K] + math.sqrt(max(q - m * m / q0, 0)) * g[:, K : 2 * K]
        y = np.array([sm(zs[i] + math.sqrt(s.noise / 2) * g[i, 2 * K :], s.beta0) for i in range(samples)])
        dz = np.empty_like(z)
        for i in range(samples):
            f = lambda h, zi=z[i], yi=y[i], sg=sigma: (
                ((h - zi) ** 2).sum() / (2 * sg) + ((yi - sm(h, s.beta)) ** 2).sum()
            )
            dz[i] = optimize.minimize(f, z[i], method="BFGS").x - z[i]
        C = q0 * q - m * m
        new = np.array(
            [
                2 * ALPHA * (dz**2).sum(-1).mean() / sigma**2,
                2 * ALPHA * (dz * (q * zs - m * z)).sum(-1).mean() / (sigma * C),
                -2 * ALPHA * (dz * (q0 * z - m * zs)).sum(-1).mean() / (sigma * C),
            ]
        )
        hats = new if hats is None else damping * hats + (1 - damping) * new
        nq, nm, ns, _, _ = _prior(s, *hats)
        q, m, sigma = (
            damping * q + (1 - damping) * nq,
            damping * m + (1 - damping) * nm,
            damping * sigma + (1 - damping) * ns,
        )
        cur = np.array([q, m, sigma, *hats])
        if np.all(np.abs(cur - target) <= 0.05 * np.abs(target)):
            return time.perf_counter() - t0
    return None


@pytest.mark.benchmark(group="highdim")
def test_state_evolution_vs_per_sample_reference(benchmark):
    torch.set_num_threads(1)
    fp = benchmark.pedantic(lambda: state_evolution(SETTING, ALPHA), rounds=1, iterations=1)
    ours = benchmark.stats.stats.mean
    fine = state_evolution(SETTING, ALPHA, nodes=16 * 4096)
    target = np.array(fp.params)
    ref = _reference_se(target)
    ratio = (ref / ours) if ref is not None else math.inf
    benchmark.extra_info.update(
        {
            "ours_s": ours,
            "converged": fp.converged,
            "iterations": fp.iterations,
            "reference_s_to_5pct": ref,
            "ratio": ratio,
            "test_error": fp.test_error,
            "test_error_16x_nodes": fine.test_error,
            "rel_diff_16x": abs(fp.test_error - fine.test_error) / fine.test_error,
        }
    )
    print(
        f"\nSE converged to 1e-6 in {ours:.2f} s ({fp.iterations} it); per-sample scipy reference within 5% "
        f"after {ref} s; ratio {ratio:.1f}; test error {fp.test_error:.5f} vs 16x nodes {fine.test_error:.5f}"
    )


@pytest.mark.benchmark(group="highdim")
def test_J_vs_scipy_quad(benchmark):
    mp = MarchenkoPastur(0.5)
    jv = benchmark(lambda: J_and_derivatives(mp, 0.5, 0.4))
    ours = benchmark.stats.stats.mean
    from attnlab.highdim import semicircle_convolution

    law = semicircle_convolution(mp, 0.5)
    t0 = time.perf_counter()
    ref = sum(
        integrate.quad(lambda x: (x - 0.4) ** 2 * law.density(np.array([x]))[0], max(a, 0.4), b, limit=200)[0]
        for a, b in law.intervals
        if b > 0.4
    )
    t_ref = time.perf_counter() - t0
    benchmark.extra_info.update({"ratio": t_ref / ours, "J": jv.J, "J_quad": ref})
    print(
        f"\nJ: ours {ours * 1e3:.2f} ms, adaptive scipy quad of the cubic density {t_ref * 1e3:.1f} ms, "
        f"ratio {t_ref / ours:.1f}; |diff| {abs(ref - jv.J):.2e}"
    )


@pytest.mark.benchmark(group="highdim")
def test_state_evolution_multistart_cost(benchmark):
    # the cost of `starts="auto"` (four spread starts + a stability check per distinct fixed point)
    # against one solve from the default start, same nodes, same run
    torch.set_num_threads(1)
    fp = benchmark.pedantic(lambda: state_evolution(SETTING, ALPHA, starts="auto"), rounds=1, iterations=1)
    multi = benchmark.stats.stats.mean
    t0 = time.perf_counter()
    one = state_evolution(SETTING, ALPHA)
    single = time.perf_counter() - t0
    rel = max(abs(a - b) / abs(b) for a, b in zip(fp.params, one.params))
    benchmark.extra_info.update(
        {"multi_s": multi, "single_s": single, "ratio": multi / single, "candidates": len(fp.candidates)}
    )
    print(
        f"\nmulti-start {multi:.2f} s ({len(fp.candidates)} distinct fixed point(s), stable={fp.stable}) "
        f"vs one start {single:.2f} s: ratio {multi / single:.1f}; max relative gap {rel:.1e}"
    )
