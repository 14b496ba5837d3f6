"""The ``device`` of a point: claims of papers A and B and the real-model claim run their heavy part
there, draw their random inputs from the point's CPU generators (so numbers do not depend on the
device beyond rounding), and say in the metric ``device`` where that part ran."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.claims.ensemble.budget_law import CLAIM as BUDGET_LAW
from attnlab.claims.ensemble.weighting import CLAIM as WEIGHTING
from attnlab.claims.flow.energy_monotone import CLAIM as ENERGY
from attnlab.claims.flow.equiangular_rates import CLAIM as EQUI
from attnlab.claims.models.minilm_diversity import CLAIM as MINILM_DIVERSITY


def _first(claim, device: str, overrides: dict | None = None):
    return claim.points("quick", overrides=overrides, device=device)[0]


# ------------------------------------------------------------------------------------------- CPU
def test_budget_claim_on_cpu_equals_the_science_run_directly():
    from attnlab.ensemble.budget import budget_sweep
    from attnlab.ensemble.data import RegressionTask

    p = _first(BUDGET_LAW, "cpu", {"reps": 3, "queries": 20, "n": 100})
    res = BUDGET_LAW.run(p)
    task = RegressionTask(d=p["d"], target=p["target"], noise=p["noise"])
    sw = budget_sweep(
        task, p["D"], p["n"], p["reps"], p["queries"], c=p["c"], seed=p.seed % 2**31, max_d_k=p["d"] - 1
    )
    assert res.metrics["device"] == "cpu"
    assert res.metrics["mse_best"] == float(sw.mse.min())  # bit for bit: same draws, same device
    np.testing.assert_array_equal(res.arrays["mse"], sw.mse)
    np.testing.assert_array_equal(res.arrays["var_part"], sw.variance_part)


def test_equiangular_claim_on_cpu_equals_the_simulation_run_directly():
    from attnlab.dynamics import Heads, Record, init, simulate

    p = next(q for q in EQUI.points("quick", device="cpu") if q["part"] == "particles")
    res = EQUI.run(p)
    spec = Heads.scalar(p["strengths"], d=p["n"], kind="softmax")
    x0 = init.equiangular(batch=2, n=p["n"], d=p["n"], gamma=0.0, generator=p.generator())
    sol = simulate(
        spec,
        x0,
        beta=p["beta"],
        t1=p["t1"],
        dt=p["dt"],
        record=Record(every=p["t1"] / 40, observables=("gamma",)),
    )
    assert res.metrics["device"] == "cpu"
    np.testing.assert_array_equal(res.arrays["gamma"], sol.observables["gamma"].numpy().mean(1))


def test_models_claim_on_cpu_equals_the_diagnosis_run_directly():
    from attnlab import diagnose as dg
    from attnlab import models

    p = _first(MINILM_DIVERSITY, "cpu", {"text": False})
    res = MINILM_DIVERSITY.run(p)
    diag = dg.diagnose(models.load("minilm", dtype=torch.float64))
    assert res.metrics["device"] == "cpu"
    assert res.metrics["hdi_k"] == [float(r["hdi_k"]) for r in diag.layers]
    assert res.metrics["qk_rank90"] == [float(r["qk_rank90"]) for r in diag.layers]
    np.testing.assert_array_equal(res.arrays["qk_sv"], diag.arrays["qk_sv"])


def test_science_draws_on_the_generator_device_and_computes_on_the_target():
    # a CPU generator with another target device ("meta": shapes only, no CUDA needed) used to fail
    from attnlab.ensemble.layouts import projection_layout

    W = projection_layout("random", 3, 8, 2, generator=torch.Generator().manual_seed(1), device="meta")
    assert W.device.type == "meta" and W.shape == (3, 8, 2)


# ------------------------------------------------------------------------------------------- GPU
def _compare(cpu: dict, gpu: dict, rel: float, abs_: dict[str, float] | None = None) -> None:
    """Every metric equal: exactly for ints, bools and strings, to ``rel`` for floats (per element)."""
    abs_ = abs_ or {}
    assert cpu["device"] == "cpu" and gpu["device"].startswith("cuda")
    assert set(cpu) == set(gpu)
    for key in cpu:
        if key == "device":
            continue
        a, b = cpu[key], gpu[key]
        flat_a = a if isinstance(a, list) else [a]
        flat_b = b if isinstance(b, list) else [b]
        assert len(flat_a) == len(flat_b), key
        for x, y in zip(flat_a, flat_b):
            if isinstance(x, float) and isinstance(y, float) and not (math.isnan(x) and math.isnan(y)):
                assert math.isclose(x, y, rel_tol=rel, abs_tol=abs_.get(key, 0.0)), (key, x, y)
            else:
                assert x == y, (key, x, y)


# float64 everywhere and the same random draws (CPU generators): the device only changes the order
# of reductions in the matmuls and sums (cuBLAS vs the CPU BLAS), ~1e-16 relative per sum. A changed
# random draw or a missed transfer would move these Monte Carlo metrics at the percent level.
_MC_REL = 1e-9


@pytest.mark.gpu
def test_weighting_point_on_cuda_matches_cpu():
    cpu = WEIGHTING.run(_first(WEIGHTING, "cpu")).metrics
    gpu = WEIGHTING.run(_first(WEIGHTING, "cuda")).metrics
    # optimal weights solve a QP on the estimated moments: a 1e-15 change of the moments moves
    # the solution by at most ~1e-12 (the KKT polish solves the support's system exactly)
    _compare(cpu, gpu, _MC_REL)


@pytest.mark.gpu
def test_energy_identity_point_on_cuda_matches_cpu():
    p_cpu = next(p for p in ENERGY.points("quick", device="cpu") if not p.control)
    p_gpu = next(p for p in ENERGY.points("quick", device="cuda") if not p.control)
    cpu, gpu = ENERGY.run(p_cpu).metrics, ENERGY.run(p_gpu).metrics
    # max_rel_err is itself rounding (~1e-14): both must meet the claim's 1e-8, not each other.
    # min_rate: float64 RK4 over t = 2 at β = 1 with ‖M_h‖_op = 1 (Lipschitz constant O(H β)):
    # rounding grows at most ~e^{2·3} ≈ 400-fold, 1e-13 relative; 1e-8 leaves a wide margin.
    assert cpu["max_rel_err"] < 1e-8 and gpu["max_rel_err"] < 1e-8
    _compare(
        {k: v for k, v in cpu.items() if k != "max_rel_err"},
        {k: v for k, v in gpu.items() if k != "max_rel_err"},
        1e-8,
    )


@pytest.mark.gpu
def test_models_point_on_cuda_matches_cpu():
    p = _first(MINILM_DIVERSITY, "cpu")
    cpu = MINILM_DIVERSITY.run(p).metrics
    gpu = MINILM_DIVERSITY.run(_first(MINILM_DIVERSITY, "cuda")).metrics
    # QR/SVD/eigen solvers differ between LAPACK and cuSOLVER only in rounding (float64, ~1e-15
    # relative on well-conditioned trained weights). The radial-dominance forms are fractions of
    # pass/fail tests: a test decided within rounding may flip, so they may differ by one
    # (head, sentence) test per layer, 1/(n_heads · sentences).
    one = 1.0 / (cpu["n_heads"] * p["sentences"]) + 1e-12
    _compare(cpu, gpu, 1e-9, {f"radial_form{i}": one for i in (1, 2, 3)})
