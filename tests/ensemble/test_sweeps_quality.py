"""The controlled-overlap sweep, the quality-graded heads and the equal-moment predictions, each held
against an independent computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import (
    decompose_predictions,
    equicorrelated_check,
    equicorrelated_predictions,
)
from attnlab.ensemble.quality import (
    quality_graded_projections,
    size_graded_projections,
    size_rates,
    split_half_scheme_mse,
)
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


def test_per_query_closed_form_is_exact_for_equicorrelated_heads_the_averaged_one_off_by_a_covariance():
    # queries whose heads are equicorrelated with their own V(q) and ρ(q): the per-query form is exact
    H, R = 3, 40
    V = torch.tensor([0.2, 0.5, 1.0, 2.0], dtype=torch.float64)
    rho = torch.tensor([0.8, 0.5, 0.3, 0.1], dtype=torch.float64)
    g = torch.Generator().manual_seed(3)
    preds = torch.stack(
        [equicorrelated_predictions(R, H, float(v), float(r), g) for v, r in zip(V, rho)], dim=-1
    )  # (R, H, m)
    alpha = torch.full((H,), 1 / H, dtype=torch.float64)
    dec = decompose_predictions(preds, torch.zeros(4, dtype=torch.float64), alpha)
    var_part = dec.variance_term + dec.covariance_term  # (m,)
    want = V * (rho + (1 - rho) / H)  # closed form by hand at each query
    assert torch.allclose(dec.equicorrelated_form(), want, rtol=1e-12, atol=0)
    assert torch.allclose(var_part, want, rtol=1e-12, atol=0)
    # at the query-averaged V and ρ the form misses the integrated variance part by (1 − 1/H)·Cov_q(V, ρ)
    Vm, rm = float(V.mean()), float(rho.mean())
    averaged = Vm * (rm + (1 - rm) / H)
    cov = float(((V - Vm) * (rho - rm)).mean())
    assert float(var_part.mean()) - averaged == pytest.approx((1 - 1 / H) * cov, rel=1e-10)
    assert dec.mean_correlation == pytest.approx(rm, rel=1e-12) and cov < 0


def test_sweep_at_the_origin_has_exchangeable_heads_where_the_closed_form_holds():
    # radial target, q = 0: an orthogonal map fixing the shared frame permutes the heads, so they share one
    # variance and one correlation in law; with 150 samples the closed form misses the variance part only by
    # the spread of the estimated variances between heads (second order: a few 0.1%, inside 1%)
    task = RegressionTask(d=8, target="radial", noise=1.0)
    sw = controlled_overlap_sweep(task, 3, 2, 100, 1.5, [0.0, 45.0, 90.0], 150, 10, (1, 2, 3), at_origin=True)
    assert np.all(np.abs(sw.var_part / sw.closed_form - 1) < 0.01)
    # drawn queries instead: the heads are not exchangeable at a query, and the form is off by more
    drawn = controlled_overlap_sweep(task, 3, 2, 100, 1.5, [0.0, 45.0, 90.0], 150, 40, (1, 2, 3))
    assert abs(drawn.var_part[1] / drawn.closed_form[1] - 1) > abs(sw.var_part[1] / sw.closed_form[1] - 1)


def test_size_graded_heads_smooth_their_first_coordinates_at_the_classical_bandwidth():
    from attnlab.ensemble.heads import head_predictions

    W = size_graded_projections([1, 3], d=4, n=800, n0=50, s0=4.0)  # (2, 4, 3)
    s1, s3 = 4.0 * 16 ** (2 / 5), 4.0 * 16 ** (2 / 7)  # s_0 (n/n_0)^{2/(4+m)}
    assert torch.allclose(W[0].T @ W[0], torch.diag(torch.tensor([s1, 0.0, 0.0], dtype=torch.float64)))
    assert torch.allclose(W[1].T @ W[1], s3 * torch.eye(3, dtype=torch.float64))
    assert size_rates([1, 2, 3, 4]) == pytest.approx([0.8, 4 / 6, 4 / 7, 0.5])
    # independent computation: the NW estimate of each head written out in numpy on its own coordinates
    rng = np.random.default_rng(0)
    X, y, Q = rng.standard_normal((50, 4)), rng.standard_normal(50), rng.standard_normal((5, 4))
    got = head_predictions(
        torch.tensor(Q), torch.tensor(X), torch.tensor(y), W, scale=1.0, kernel="gaussian"
    ).numpy()
    for h, (m, s) in enumerate([(1, s1), (3, s3)]):
        d2 = ((Q[:, None, :m] - X[None, :, :m]) ** 2).sum(-1)  # (5, 50)
        w = np.exp(-s * (d2 - d2.min(axis=1, keepdims=True)) / 2)
        assert got[h] == pytest.approx((w @ y) / w.sum(axis=1), rel=1e-10)
    with pytest.raises(ValueError):
        size_graded_projections([5], d=4, n=100, n0=50, s0=4.0)
