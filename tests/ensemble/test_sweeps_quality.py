"""The controlled-overlap sweep, the quality-graded heads and the equal-moment predictions, each held
against an independent computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import equicorrelated_check, equicorrelated_predictions
from attnlab.ensemble.quality import quality_graded_projections, split_half_scheme_mse
from attnlab.ensemble.sweeps import controlled_overlap_sweep
from attnlab.ensemble.weights import fibonacci_numbers


def test_equicorrelated_predictions_have_exactly_the_stated_moments():
    P = equicorrelated_predictions(40, 4, 0.7, 0.35, torch.Generator().manual_seed(0)).numpy()
    C = np.cov(P.T, bias=True)  # population moments, computed by numpy
    # QR-orthonormalised columns: the moments are exact up to float64 rounding (~1e-15)
    np.testing.assert_allclose(np.diag(C), 0.7, rtol=1e-12)
    np.testing.assert_allclose(C[~np.eye(4, dtype=bool)], 0.35 * 0.7, rtol=1e-12)
    assert equicorrelated_check(40, 4, 0.7, 0.35, torch.Generator().manual_seed(0)) < 1e-13
    with pytest.raises(ValueError, match="reps"):
        equicorrelated_predictions(3, 4, 0.7, 0.35)


def test_controlled_sweep_hdi_identical_heads_and_mse_bookkeeping():
    task = RegressionTask(d=8, target="sine", noise=1.0)
    sw = controlled_overlap_sweep(task, 3, 2, 60, 1.5, [0.0, 45.0, 90.0], 12, 20, (1, 2, 3))
    # the layout's HDI is sin² φ by construction (angles computed from the frames by SVD)
    np.testing.assert_allclose(sw.hdi, np.sin(np.radians([0.0, 45.0, 90.0])) ** 2, atol=1e-12)
    # identical heads: the ensemble's variance part is one head's variance and ρ = 1 (rounding only)
    assert sw.var_part[0] == pytest.approx(sw.mean_var[0], rel=1e-10)
    assert sw.mean_corr[0] == pytest.approx(1.0, abs=1e-10)
    # the integrated MSE is the mean over replications of each replication's integrated error
    np.testing.assert_allclose(sw.mse, sw.rep_err.mean(axis=1), rtol=1e-12)
    assert sw.rep_err.shape == (3, 12)
    # common random numbers: a second call with the same seeds gives the same numbers bit for bit
    sw2 = controlled_overlap_sweep(task, 3, 2, 60, 1.5, [45.0], 12, 20, (1, 2, 3))
    assert sw2.mse[0] == sw.mse[1]
    with pytest.raises(ValueError, match="angles"):
        controlled_overlap_sweep(task, 3, 2, 60, 1.5, [95.0], 12, 20, (1, 2, 3))


def test_quality_graded_projections_follow_the_bandwidth_schedule():
    W = quality_graded_projections([0.2, 0.05], d=3, n=800, n0=50, s0=4.0)
    assert W.shape == (2, 3, 1)
    # inverse temperature |W_h|² = s0 (n/n0)^{2κ}: 4·16^{0.4} and 4·16^{0.1}
    np.testing.assert_allclose(W[:, 0, 0].square().numpy(), [4 * 16**0.4, 4 * 16**0.1], rtol=1e-14)
    assert float(W[:, 1:].abs().sum()) == 0.0
    with pytest.raises(ValueError, match="kappas"):
        quality_graded_projections([], d=3, n=10, n0=5, s0=1)


def test_split_half_scheme_mse_against_a_plain_loop():
    g = torch.Generator().manual_seed(4)
    err = torch.randn(10, 3, 7, generator=g, dtype=torch.float64) * torch.tensor([0.5, 1.0, 2.0]).view(
        1, 3, 1
    )
    mse, w = split_half_scheme_mse(err, ["uniform", "geometric", "fibonacci", "optimal"], rho=0.5)
    e = err.numpy()
    fib = np.array(fibonacci_numbers(3)[::-1], dtype=float)
    refs = {
        "uniform": np.ones(3) / 3,
        "geometric": np.array([1, 0.5, 0.25]) / 1.75,
        "fibonacci": fib / fib.sum(),
    }
    for s, a in refs.items():
        want = np.mean(
            [(sum(a[h] * e[r, h, q] for h in range(3))) ** 2 for r in range(5, 10) for q in range(7)]
        )
        assert mse[s] == pytest.approx(want, rel=1e-12)
    # the optimal weights minimise the first half's quadratic form: no vertex or uniform does better
    M = np.einsum("rhm,rgm->hg", e[:5], e[:5]) / 35
    a = w["optimal"].numpy()
    for b in [np.eye(3)[i] for i in range(3)] + [np.ones(3) / 3]:
        assert a @ M @ a <= b @ M @ b + 1e-12


def test_radial_and_zero_targets():
    task = RegressionTask(d=6, target="radial", noise=0.0)
    X = task.sample_x(200_000, torch.Generator().manual_seed(5))
    f = task.f(X).numpy()
    np.testing.assert_allclose(f[:5], (np.sum(X[:5].numpy() ** 2, axis=1) - 6) / math.sqrt(12), rtol=1e-13)
    # ‖x‖² ~ χ²_6 (mean 6, variance 12): f has mean 0 and variance 1; 200k samples, se 0.0022 / 0.006
    assert abs(f.mean()) < 0.012 and abs(f.var() - 1) < 0.03
    zero = RegressionTask(d=3, target="zero", noise=1.0)
    assert float(zero.f(X[:, :3]).abs().max()) == 0.0


def test_aligned_frames_put_the_first_axis_in_the_shared_part():
    from attnlab.ensemble.layouts import projection_layout
    from attnlab.ensemble.sweeps import _reflection_to_axis

    R = _reflection_to_axis(8, 3, 2, 11)
    np.testing.assert_allclose((R @ R.T).numpy(), np.eye(8), atol=1e-14)  # orthogonal
    U0 = (
        R @ projection_layout("controlled", 3, 8, 2, 1.0, 0.0, generator=torch.Generator().manual_seed(11))[0]
    )
    assert float(torch.linalg.vector_norm(U0[0])) == pytest.approx(1.0, abs=1e-12)  # e_1 ∈ span U_0
    W90 = R @ projection_layout("controlled", 3, 8, 2, 1.0, 90.0, generator=torch.Generator().manual_seed(11))
    # orthogonal heads do not see e_1: the layout keeps √cos(90°) = √(6e-17) ≈ 8e-9 of the shared part
    assert float(W90[:, 0].abs().max()) < 1e-8
    # an aligned sweep on the one-direction target: identical heads beat orthogonal ones by far
    task = RegressionTask(d=8, target="sine", noise=0.5)
    sw = controlled_overlap_sweep(task, 3, 2, 80, 1.5, [0.0, 90.0], 6, 30, (1, 11, 3), align=True)
    assert sw.bias2[1] > 2 * sw.bias2[0]


def test_budget_splits_below_the_input_dimension():
    from attnlab.ensemble.budget import budget_splits, budget_sweep

    assert budget_splits(16, 15) == [1, 2, 4, 8] and budget_splits(12) == [1, 2, 3, 4, 6, 12]
    task = RegressionTask(d=6, target="radial", noise=0.5)
    full = budget_sweep(task, 6, 30, 2, 10, c=2.0, seed=3)
    part = budget_sweep(task, 6, 30, 2, 10, c=2.0, seed=3, max_d_k=5)
    assert part.d_k.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(part.mse, full.mse[:3])  # the same splits see the same draws
