"""The ``device`` of paper C's data generation and Adam training: on CPU the explicit device changes
nothing (bit for bit); random numbers come from the generator's device and are moved, so a CPU
generator gives the same draws whatever the target device."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.claims.highdim.interpolation_threshold import CLAIM as INTERP
from attnlab.claims.highdim.theory_vs_adam import CLAIM as TVA
from attnlab.highdim import TrainConfig, mp_target, power_law_target, sample, simulate, train_erm


def _same(a, b) -> None:
    assert torch.equal(a.S, b.S)
    np.testing.assert_array_equal(a.eigenvalues, b.eigenvalues)
    assert a.to_dict() == b.to_dict()


# ------------------------------------------------------------------------------------------- CPU
@pytest.mark.parametrize("factorised", [True, False])
def test_train_erm_on_cpu_equals_the_default_call(factorised):
    g = torch.Generator().manual_seed(3)
    S0 = mp_target(10, 0.5, g)
    tr, te = sample(S0, 60, 2, 0.1, 1.0, "seq2lab", g), sample(S0, 40, 2, 0.1, 1.0, "seq2lab", g)
    cfg = TrainConfig(max_steps=60)
    kw = dict(lam=0.01, factorised=factorised, config=cfg)
    base = train_erm(tr, te, **kw, generator=torch.Generator().manual_seed(1))
    for dev in ("cpu", torch.device("cpu")):
        r = train_erm(tr, te, **kw, generator=torch.Generator().manual_seed(1), device=dev)
        _same(base, r)
        assert r.S.device.type == "cpu"


def test_simulate_on_cpu_equals_the_default_call():
    cfg = TrainConfig(max_steps=50)
    _same(simulate(10, 0.5, seed=4, config=cfg), simulate(10, 0.5, seed=4, config=cfg, device="cpu"))
    S0 = power_law_target(10, 1.0, torch.Generator().manual_seed(2))
    a = simulate(10, 0.5, target=S0, seed=4, config=cfg, task="seq2seq")
    _same(a, simulate(10, 0.5, target=S0, seed=4, config=cfg, task="seq2seq", device="cpu"))


def test_targets_draw_on_the_generator_device_and_land_on_the_target():
    # a CPU generator with another target device ("meta": shapes only, no CUDA needed)
    for make in (
        lambda g, dev: mp_target(8, 0.5, g, device=dev),
        lambda g, dev: power_law_target(8, 1.0, g, device=dev),
    ):
        S = make(torch.Generator().manual_seed(0), "meta")
        assert S.device.type == "meta" and S.shape == (8, 8)
    # and the CPU draws themselves do not depend on the device argument
    assert torch.equal(
        mp_target(8, 0.5, torch.Generator().manual_seed(0)),
        mp_target(8, 0.5, torch.Generator().manual_seed(0), device="cpu"),
    )


def test_claim_rows_record_the_device():
    p = INTERP.points("quick", overrides={"d": 10, "max_steps": 60}, device="cpu")[0]
    res = INTERP.run(p)
    assert res.metrics["device"] == "cpu"
    # the row is the simulation run directly, bit for bit
    from attnlab.claims.highdim._common import train_config

    r = simulate(p["d"], p["alpha"], noise=p["noise"], lam=p["lam"], seed=p.seed, config=train_config(p.p))
    assert (res.metrics["train_loss"], res.metrics["data_loss"], res.metrics["steps"]) == (
        r.train_loss,
        r.data_loss,
        r.steps,
    )
    # a theory-only row says that it ran on CPU, whatever the point's device
    th = next(q for q in TVA.points("quick", device="cpu") if q["side"] == "theory")
    assert TVA.run(th).metrics["device"] == "cpu"


# ------------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
def test_adam_point_on_cuda_matches_cpu():
    # one simulation point of highdim.theory-vs-adam at d = 40, 300 Adam steps (the cap; with rtol
    # 1e-7 the run does not stop earlier, so the step count is the same on both devices)
    # the published protocol (Adam in float64), not the claim's default L-BFGS in float32
    over = {"d": 40, "max_steps": 300, "optimizer": "adam", "dtype": "float64"}
    p_cpu = next(q for q in TVA.points("quick", overrides=over, device="cpu") if q["side"] == "simulation")
    p_gpu = next(q for q in TVA.points("quick", overrides=over, device="cuda") if q["side"] == "simulation")
    cpu, gpu = TVA.run(p_cpu).metrics, TVA.run(p_gpu).metrics
    assert cpu["device"] == "cpu" and gpu["device"].startswith("cuda")
    assert cpu["steps"] == gpu["steps"] == 300 and cpu["converged"] == gpu["converged"]
    # Same draws (CPU generators) and float64 throughout: the devices differ only in the order of the
    # reductions (cuBLAS vs CPU BLAS, softmax sums), ~1e-16 relative per gradient. Adam's step
    # lr·m̂/(√v̂ + ε) is smooth in the gradient away from v̂ ≈ 0 (ε = 1e-8 ≪ the gradient scale here), and
    # the regularised loss (λ̃ > 0) is a contraction near its minimum, so 300 steps amplify rounding
    # by far less than 1e6: a few 1e-12 relative at most. 1e-7 leaves that margin, while a changed
    # random draw (another seed) moves the test error by O(1/√n) ≈ 1e-2 relative and a lost step or a
    # wrong tensor by far more.
    for key in ("sim_test_error", "sim_train_loss"):
        assert math.isclose(cpu[key], gpu[key], rel_tol=1e-7), (key, cpu[key], gpu[key])


@pytest.mark.gpu
def test_train_erm_on_cuda_matches_cpu_and_stays_there():
    g = torch.Generator().manual_seed(3)  # CPU draws, moved to the device by the functions
    S0 = mp_target(20, 0.5, g)
    tr, te = sample(S0, 200, 2, 0.5, 1.0, "seq2lab", g), sample(S0, 200, 2, 0.5, 1.0, "seq2lab", g)
    cfg = TrainConfig(max_steps=200, min_steps=200)
    kw = dict(lam=0.01, config=cfg)
    cpu = train_erm(tr, te, **kw, generator=torch.Generator().manual_seed(1))
    gpu = train_erm(tr, te, **kw, generator=torch.Generator().manual_seed(1), device="cuda")
    assert gpu.S.device.type == "cuda" and cpu.steps == gpu.steps
    # tolerance as in test_adam_point_on_cuda_matches_cpu (float64, same draws, 200 steps)
    for key in ("train_loss", "data_loss", "test_error", "test_error_clean"):
        assert math.isclose(getattr(cpu, key), getattr(gpu, key), rel_tol=1e-7), key
    np.testing.assert_allclose(gpu.eigenvalues, cpu.eigenvalues, rtol=0, atol=1e-7)
    # the data functions draw on the CPU generator and compute on the device
    S0_gpu = mp_target(20, 0.5, torch.Generator().manual_seed(3), device="cuda")
    torch.testing.assert_close(S0_gpu.cpu(), S0, rtol=1e-12, atol=1e-14)
