"""Benchmarks of the dynamics simulator (run: pytest bench/bench_dynamics.py --benchmark-only -s).

Each benchmark runs the project's code and a plain reference in the same run and reports the ratio
(printed and stored in ``benchmark.extra_info``):

1. one RK4 step at B=64, n=256, d=64, H=8 (softmax, float32): achieved FLOP rate against a 4096^2
   float32 matrix product, and against a naive evaluation (full scores, explicit softmax);
2. accuracy per cost at B=64, n=32, d=8, H=2, β=1, t=5: wall time to reach error 1e-6 for RK4 vs
   Euler with renormalisation (torch, and a plain numpy loop over heads), from fitted error laws;
3. one RK4 step at n=32768, H=4, d=64, B=1 (softmax, float32): peak resident memory growth over the
   process's baseline (in a fresh subprocess), against the 16 GiB of naive (H, n, n) scores.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import torch

from attnlab.dynamics import Heads, init, rk4_step, simulate, vector_field
from attnlab.dynamics.space import Sphere


def _best(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def test_rk4_flop_rate(benchmark):
    B, n, d, H = 64, 256, 64, 8
    g = torch.Generator().manual_seed(0)
    spec = Heads.random_symmetric(H, d, generator=g, kind="softmax", dtype=torch.float32)
    x = init.uniform(batch=B, n=n, d=d, seed=0, dtype=torch.float32)
    fn = vector_field(spec, 1.0, "sphere")
    sp = Sphere()
    flops_eval = 4 * B * H * n * n * d + 2 * 2 * B * H * n * d * d  # scores + aggregation + M_h, V_h products
    flops_step = 4 * flops_eval

    a = torch.randn(4096, 4096)
    b = torch.randn(4096, 4096)
    t_mm = _best(lambda: a @ b)
    mm_rate = 2 * 4096**3 / t_mm

    def naive_eval(x):
        q = torch.einsum("bnd,hde->bhne", x, spec.M)
        y = torch.einsum("bnd,hed->bhne", x, spec.V)
        s = q @ x.transpose(1, 2)[:, None]  # (B, H, n, n) at once
        p = torch.exp(s - s.amax(-1, keepdim=True))
        f = (p / p.sum(-1, keepdim=True)) @ y
        v = f.sum(1)
        return v - (v * x).sum(-1, keepdim=True) * x

    t_naive = _best(lambda: rk4_step(naive_eval, sp, x, 0.05))
    benchmark.pedantic(lambda: rk4_step(fn, sp, x, 0.05), rounds=3, iterations=1, warmup_rounds=1)
    t_step = benchmark.stats.stats.min
    rate, naive_rate = flops_step / t_step, flops_step / t_naive
    info = {
        "flops_per_step": flops_step,
        "step_s": t_step,
        "gflops": rate / 1e9,
        "matmul_gflops": mm_rate / 1e9,
        "fraction_of_matmul": rate / mm_rate,
        "naive_fraction_of_matmul": naive_rate / mm_rate,
        "speedup_over_naive": t_naive / t_step,
        "threads": torch.get_num_threads(),
    }
    benchmark.extra_info.update(info)
    print("\n[rk4 flop rate]", json.dumps(info, indent=1))


def _numpy_euler(M, V, x, beta, dt, steps):
    """Published practice: Euler with renormalisation, plain numpy, a loop over heads."""
    x = x.copy()
    for _ in range(steps):
        v = np.zeros_like(x)
        for h in range(M.shape[0]):
            s = beta * np.einsum("bid,de,bje->bij", x, M[h], x)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            v += p @ (x @ V[h].T)
        v -= (v * x).sum(-1, keepdims=True) * x
        x = x + dt * v
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
    return x


def test_accuracy_per_cost(benchmark):
    B, n, d, H, beta, t1 = 64, 32, 8, 2, 1.0, 5.0
    spec = Heads.random_symmetric(H, d, generator=torch.Generator().manual_seed(1), kind="softmax")
    x0 = init.uniform(batch=B, n=n, d=d, seed=1)
    rk_dts = [0.25, 0.125, 0.0625]
    ref = simulate(spec, x0, beta=beta, t1=t1, dt=rk_dts[-1] / 16).x

    def err_time(method, dt):
        t0 = time.perf_counter()
        x = simulate(spec, x0, beta=beta, t1=t1, dt=dt, method=method).x
        return float((x - ref).norm(dim=-1).max()), time.perf_counter() - t0, t1 / dt

    rk = [err_time("rk4", dt) for dt in rk_dts]
    eu_dts = [0.02, 0.01, 0.005]
    eu = [err_time("euler", dt) for dt in eu_dts]

    def fit(dts, res):
        p, logc = np.polyfit(np.log(dts), np.log([r[0] for r in res]), 1)
        per_step = np.median([r[1] / r[2] for r in res])
        dt_star = (1e-6 / np.exp(logc)) ** (1 / p)
        return float(p), float(dt_star), float(per_step * t1 / dt_star)

    p_rk, dt_rk, cost_rk = fit(rk_dts, rk)
    p_eu, dt_eu, cost_eu = fit(eu_dts, eu)
    # numpy loop-over-heads Euler: time per step, same error law as torch Euler (same scheme)
    M, V, xn = spec.M.numpy(), spec.V.numpy(), x0.numpy()
    t_np = _best(lambda: _numpy_euler(M, V, xn, beta, 0.01, 20), reps=2) / 20
    xe = _numpy_euler(M, V, xn, beta, 0.01, 500)
    np_err = float(np.linalg.norm(xe - ref.numpy(), axis=-1).max())
    cost_np = t_np * t1 / dt_eu
    benchmark.pedantic(lambda: simulate(spec, x0, beta=beta, t1=t1, dt=dt_rk), rounds=1, iterations=1)
    info = {
        "rk4_order": p_rk,
        "euler_order": p_eu,
        "rk4_dt_for_1e-6": dt_rk,
        "euler_dt_for_1e-6": dt_eu,
        "rk4_seconds_for_1e-6": cost_rk,
        "euler_torch_seconds_for_1e-6 (extrapolated)": cost_eu,
        "euler_numpy_seconds_for_1e-6 (extrapolated)": cost_np,
        "numpy_euler_err_dt0.01": np_err,
        "torch_euler_err_dt0.01": eu[1][0],
        "ratio_euler_torch_over_rk4": cost_eu / cost_rk,
        "ratio_euler_numpy_over_rk4": cost_np / cost_rk,
    }
    benchmark.extra_info.update(info)
    print("\n[accuracy per cost]", json.dumps(info, indent=1))


_MEM_SCRIPT = r"""
import json, time, torch
from attnlab.dynamics import Heads, init, rk4_step, vector_field
from attnlab.dynamics.space import Sphere
n, H, d = 32768, 4, 64
g = torch.Generator().manual_seed(0)
spec = Heads.random_symmetric(H, d, generator=g, kind="softmax", dtype=torch.float32)
x = init.uniform(batch=1, n=n, d=d, seed=0, dtype=torch.float32)
fn = vector_field(spec, 1.0, "sphere")
def status(key):  # kB; VmHWM is this process's own peak (ru_maxrss can inherit the parent's at fork)
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
base = status("VmRSS")
t0 = time.perf_counter()
y = rk4_step(fn, Sphere(), x, 0.05)
dt = time.perf_counter() - t0
peak = status("VmHWM")
print(json.dumps({"baseline_mib": base / 1024, "peak_mib": peak / 1024, "growth_mib": (peak - base) / 1024,
                  "step_s": dt, "finite": bool(torch.isfinite(y).all())}))
"""


def test_large_n_memory(benchmark):
    def run():
        out = subprocess.run([sys.executable, "-c", _MEM_SCRIPT], capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    res = benchmark.pedantic(run, rounds=1, iterations=1)
    naive_gib = 4 * 32768 * 32768 * 4 / 2**30
    res.update(
        {"naive_scores_gib": naive_gib, "growth_fraction_of_naive": res["growth_mib"] / 1024 / naive_gib}
    )
    benchmark.extra_info.update(res)
    print("\n[n=32768 memory]", json.dumps(res, indent=1))
    assert res["finite"]


_SMALL_SCRIPT = r"""
import json, sys, time
import numpy as np
import torch

torch.set_num_threads(1)
from attnlab.dynamics import Heads, init, simulate

n, d, H, steps, dt = int(sys.argv[1]), 3, 1, 2000, 0.01
spec = Heads.random_symmetric(H, d, generator=torch.Generator().manual_seed(0), kind="usa")
x0 = init.uniform(batch=1, n=n, d=d, seed=0)
simulate(spec, x0, beta=1.0, t1=dt * 10, dt=dt)  # warm up (first calls load code paths)
t0 = time.process_time()
sol = simulate(spec, x0, beta=1.0, t1=dt * steps, dt=dt)
t_sim = (time.process_time() - t0) / sol.evaluations

M, V, x = spec.M[0].numpy(), spec.V[0].numpy(), x0[0].numpy().copy()


def field(x):  # the plain loop's field: one head, usa, on the sphere
    s = x @ M @ x.T
    f = (np.exp(s) @ (x @ V.T)) / n
    return f - (f * x).sum(axis=1, keepdims=True) * x


t0 = time.process_time()
for _ in range(steps):
    k1 = field(x)
    k2 = field(x + 0.5 * dt * k1)
    k3 = field(x + 0.5 * dt * k2)
    k4 = field(x + dt * k3)
    x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
t_np = (time.process_time() - t0) / (4 * steps)
err = float(np.abs(x - sol.x[0].numpy()).max())
print(json.dumps({"n": n, "sim_us_per_eval": t_sim * 1e6, "numpy_us_per_eval": t_np * 1e6,
                  "ratio": t_sim / t_np, "max_state_difference": err}))
"""


def test_small_problem_overhead(benchmark):
    """Per-evaluation cost of a whole RK4 run at n <= 64 (d = 3, one head): the simulator (its
    small-size path) against a plain numpy RK4 loop, each in a fresh single-threaded process."""

    def run() -> list[dict]:
        out = []
        for n in (8, 32, 64):
            res = subprocess.run(
                [sys.executable, "-c", _SMALL_SCRIPT, str(n)], capture_output=True, text=True
            )
            out.append(json.loads(res.stdout.strip().splitlines()[-1]))
        return out

    rows = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update({f"ratio_n{r['n']}": r["ratio"] for r in rows})
    print("\n[small problems: simulator / numpy loop, per evaluation]", json.dumps(rows, indent=1))
