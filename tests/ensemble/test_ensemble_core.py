"""Paper A science: heads, layouts, weights, data, decomposition, estimators, training, budget."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from attnlab.core.geometry import diversity, principal_angles
from attnlab.ensemble import nw_estimate
from attnlab.ensemble.budget import (
    averaging_floor,
    budget_splits,
    budget_sweep,
    combine_heads,
    continuous_optimum,
    fit_power_law,
    limit_mse,
    pooled_optimum,
    radial_limit,
)
from attnlab.ensemble.data import RegressionTask
from attnlab.ensemble.decomposition import (
    decompose,
    decompose_predictions,
    equicorrelated_variance,
    monte_carlo_predictions,
)
from attnlab.ensemble.estimators import NWEnsemble, NWHead
from attnlab.ensemble.heads import head_predictions
from attnlab.ensemble.layouts import controlled_hdi, projection_layout
from attnlab.ensemble.training import (
    ensemble_loss,
    kept_path_slope,
    train_projections,
    weight_overlap_penalty,
)
from attnlab.ensemble.weights import fibonacci_numbers, head_weights, optimal_weights

DT = torch.float64


def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------------------------- heads


def test_dot_kernel_heads_match_nw_estimate_per_head():
    g = _g(0)
    Q, X = torch.randn(7, 5, generator=g, dtype=DT), torch.randn(3, 11, 5, generator=g, dtype=DT)
    y = torch.randn(3, 11, generator=g, dtype=DT)
    W = torch.randn(4, 5, 2, generator=g, dtype=DT)
    P = head_predictions(Q, X, y, W, kernel="dot")  # (3, 4, 7)
    for h in range(4):
        ref = nw_estimate(Q.expand(3, 7, 5), X, y.unsqueeze(-1), W[h], W[h])[..., 0]  # (3, 7)
        torch.testing.assert_close(P[:, h], ref, rtol=1e-13, atol=1e-14)  # same sums, reordered


def test_gaussian_kernel_and_loo_match_plain_loops():
    g = _g(1)
    X = torch.randn(9, 3, generator=g, dtype=DT)
    y = torch.randn(9, generator=g, dtype=DT)
    W = torch.randn(2, 3, 2, generator=g, dtype=DT)
    sc = 0.7
    P = head_predictions(X, X, y, W, scale=sc, kernel="gaussian")
    L = head_predictions(X, X, y, W, scale=sc, kernel="gaussian", loo=True)
    Xn, yn, Wn = X.numpy(), y.numpy(), W.numpy()
    for h in range(2):
        for i in range(9):
            k = np.exp(-sc * ((Xn[i] @ Wn[h] - Xn @ Wn[h]) ** 2).sum(1) / 2)
            assert float(P[h, i]) == pytest.approx((k @ yn) / k.sum(), rel=1e-12)
            k[i] = 0.0
            assert float(L[h, i]) == pytest.approx((k @ yn) / k.sum(), rel=1e-12)


def test_chunking_does_not_change_results_and_huge_scales_stay_finite():
    g = _g(2)
    Q, X = torch.randn(13, 4, generator=g, dtype=DT), torch.randn(5, 17, 4, generator=g, dtype=DT)
    y = torch.randn(5, 17, generator=g, dtype=DT)
    W = torch.randn(3, 4, 2, generator=g, dtype=DT)
    a = head_predictions(Q, X, y, W, max_elems=1 << 20)
    b = head_predictions(Q, X, y, W, max_elems=7)  # one query at a time
    torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-15)
    big = head_predictions(Q, X, y, W, scale=1e6)  # scores ~1e6: far beyond exp's range
    assert bool(torch.isfinite(big).all())
    assert float(big.min()) >= float(y.min()) - 1e-12 and float(big.max()) <= float(y.max()) + 1e-12


def test_gaussian_kernel_chunking_shares_the_keys_and_does_not_change_results():
    g = _g(21)
    Q, X = torch.randn(13, 4, generator=g, dtype=DT), torch.randn(5, 17, 4, generator=g, dtype=DT)
    y = torch.randn(5, 17, generator=g, dtype=DT)
    W = torch.randn(3, 4, 2, generator=g, dtype=DT)
    for keys, vals in ((X, y), (X[0], y[0])):  # per-replication keys and one shared key set
        a = head_predictions(Q, keys, vals, W, kernel="gaussian", max_elems=1 << 20)
        b = head_predictions(Q, keys, vals, W, kernel="gaussian", max_elems=7)  # one query at a time
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-15)


def test_head_predictions_validation():
    W = torch.randn(2, 3, 1, dtype=DT)
    with pytest.raises(ValueError, match="queries"):
        head_predictions(
            torch.randn(4, 2, dtype=DT), torch.randn(5, 3, dtype=DT), torch.randn(5, dtype=DT), W
        )
    with pytest.raises(ValueError, match="values"):
        head_predictions(
            torch.randn(4, 3, dtype=DT), torch.randn(5, 3, dtype=DT), torch.randn(4, dtype=DT), W
        )
    with pytest.raises(ValueError, match="kernel"):
        head_predictions(
            torch.randn(4, 3, dtype=DT),
            torch.randn(5, 3, dtype=DT),
            torch.randn(5, dtype=DT),
            W,
            kernel="laplace",
        )
    with pytest.raises(ValueError, match="leave-one-out"):
        head_predictions(
            torch.randn(4, 3, dtype=DT), torch.randn(5, 3, dtype=DT), torch.randn(5, dtype=DT), W, loo=True
        )


# ------------------------------------------------------------------------------------- layouts


@pytest.mark.parametrize("angle", [0.0, 20.0, 55.0, 90.0])
def test_controlled_layout_has_the_angles_it_was_built_with(angle):
    W = projection_layout("controlled", 3, 12, 2, c=2.0, angle_deg=angle, generator=_g(3))
    # every pairwise principal angle is φ; HDI = sin²φ (tolerance: sine/cosine branch accuracy ~1e-12 rad)
    for a, b in itertools.combinations(range(3), 2):
        th = torch.rad2deg(principal_angles(W[a], W[b]))
        torch.testing.assert_close(th, torch.full_like(th, angle), atol=1e-6, rtol=0)
    assert diversity(W).hdi == pytest.approx(controlled_hdi(angle), abs=1e-12)
    # each head is c times an orthonormal frame
    torch.testing.assert_close(W[0].T @ W[0], 4.0 * torch.eye(2, dtype=DT), atol=1e-12, rtol=0)


def test_layouts_reference_values_and_errors():
    assert diversity(projection_layout("orthogonal", 4, 16, 4, generator=_g(4))).hdi == pytest.approx(
        1.0, abs=1e-12
    )
    assert diversity(projection_layout("shared", 4, 16, 4, generator=_g(4))).hdi == pytest.approx(
        0.0, abs=1e-12
    )
    W = projection_layout("random", 3, 2, 5, c=1.5, generator=_g(5))  # d_k > d: orthonormal rows
    torch.testing.assert_close(W[1] @ W[1].T, 2.25 * torch.eye(2, dtype=DT), atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="H·d_k <= d"):
        projection_layout("orthogonal", 5, 8, 2)
    with pytest.raises(ValueError, match="angle_deg"):
        projection_layout("controlled", 2, 8, 2)
    with pytest.raises(ValueError, match="layout"):
        projection_layout("diagonal", 2, 8, 2)


# ------------------------------------------------------------------------------------- weights


def test_fixed_weight_schemes():
    assert fibonacci_numbers(6) == [1, 1, 2, 3, 5, 8]
    torch.testing.assert_close(head_weights("fibonacci", 4), torch.tensor([3, 2, 1, 1], dtype=DT) / 7)
    torch.testing.assert_close(head_weights("geometric", 3, rho=0.5), torch.tensor([4, 2, 1], dtype=DT) / 7)
    torch.testing.assert_close(head_weights("uniform", 5), torch.full((5,), 0.2, dtype=DT))
    torch.testing.assert_close(
        head_weights("given", 2, given=[1.0, 3.0]), torch.tensor([0.25, 0.75], dtype=DT)
    )
    with pytest.raises(ValueError, match="given"):
        head_weights("given", 2, given=[1.0, -1.0])
    with pytest.raises(ValueError, match="M:"):
        head_weights("optimal", 2)


def test_optimal_weights_two_heads_closed_form():
    M = np.array([[2.0, 0.5], [0.5, 1.0]])
    a1 = (M[1, 1] - M[0, 1]) / (M[0, 0] + M[1, 1] - 2 * M[0, 1])  # interior minimiser on the segment
    got = optimal_weights(M).numpy()
    np.testing.assert_allclose(got, [a1, 1 - a1], atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(H=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_optimal_weights_satisfy_kkt_and_beat_a_grid(H, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(H, H + 1))
    M = A @ A.T
    a = optimal_weights(M).numpy()
    assert a.min() >= 0 and a.sum() == pytest.approx(1.0, abs=1e-12)
    g = M @ a
    lam = a @ g
    # KKT: (Mα)_h >= αᵀMα everywhere, equality on the support (relative 1e-7 of the scale of M)
    tol = 1e-7 * np.abs(M).max()
    assert (g >= lam - tol).all()
    assert np.all(np.abs(g[a > 1e-8] - lam) < tol)
    # no random simplex point does better
    P = rng.dirichlet(np.ones(H), size=2000)
    assert lam <= np.einsum("ph,hg,pg->p", P, M, P).min() + tol


# ------------------------------------------------------------------------------------- data


def test_tasks():
    t = RegressionTask(d=5, target="bump", noise=0.0, inputs="sphere")
    X, y = t.sample(50, _g(6), batch=(3,))
    assert X.shape == (3, 50, 5) and y.shape == (3, 50)
    torch.testing.assert_close(
        torch.linalg.vector_norm(X, dim=-1), torch.full((3, 50), math.sqrt(5), dtype=DT)
    )
    torch.testing.assert_close(y, 2 * torch.exp(-(X[..., 0] ** 2 + X[..., 1] ** 2) / 2) - 1)
    with pytest.raises(ValueError, match="d: expected an integer >= 2"):
        RegressionTask(d=1, target="ridge")
    assert RegressionTask.from_dict(t.to_dict()) == t


# ------------------------------------------------------------------------------------- decomposition


@settings(max_examples=40, deadline=None)
@given(R=st.integers(2, 30), H=st.integers(1, 5), m=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_decomposition_sums_to_the_mse(R, H, m, seed):
    g = _g(seed)
    preds = torch.randn(R, H, m, generator=g, dtype=DT) * 3 + 1
    truth = torch.randn(m, generator=g, dtype=DT)
    alpha = torch.rand(H, generator=g, dtype=DT) + 0.01
    alpha = alpha / alpha.sum()
    dec = decompose_predictions(preds, truth, alpha)
    # population moments make it algebraic; cancellation costs at most a few hundred eps
    assert dec.identity_rel_error < 1e-12
    # independent direct computation of the MSE
    direct = ((preds * alpha[None, :, None]).sum(1) - truth).square().mean(0)
    torch.testing.assert_close(dec.mse, direct, rtol=1e-13, atol=0)


def test_decomposition_needs_simplex_weights():
    with pytest.raises(ValueError, match="alpha: expected weights summing to 1"):
        decompose_predictions(
            torch.zeros(3, 2, 1, dtype=DT), torch.zeros(1, dtype=DT), torch.ones(2, dtype=DT)
        )


def test_equicorrelated_closed_form_exact():
    R, H, V, rho = 40, 5, 2.0, 0.3
    Z = torch.randn(R, H + 1, generator=_g(7), dtype=DT)
    Z = Z - Z.mean(0)
    Qz = torch.linalg.qr(Z)[0] * math.sqrt(R)  # sample covariance exactly I
    preds = math.sqrt(V) * (math.sqrt(rho) * Qz[:, :1] + math.sqrt(1 - rho) * Qz[:, 1:])
    dec = decompose_predictions(
        preds.unsqueeze(-1), torch.zeros(1, dtype=DT), torch.full((H,), 1 / H, dtype=DT)
    )
    got = float(dec.variance_term[0] + dec.covariance_term[0])
    assert got == pytest.approx(equicorrelated_variance(V, rho, H), rel=1e-12)
    assert dec.mean_correlation == pytest.approx(rho, rel=1e-12)
    assert equicorrelated_variance(V, 1.0, H) == V and equicorrelated_variance(V, 0.0, H) == V / H


def test_monte_carlo_predictions_match_a_plain_loop_and_are_seeded():
    t = RegressionTask(d=3, target="sine", noise=0.3)
    W = projection_layout("random", 2, 3, 2, generator=_g(8))
    Q = t.sample_x(5, _g(9))
    P = monte_carlo_predictions(t, W, 20, Q, 4, _g(10), rep_chunk=3)
    g = _g(10)
    for r0, r1 in [(0, 3), (3, 4)]:  # same draws in the same chunks
        X, y = t.sample(20, g, batch=(r1 - r0,))
        for r in range(r1 - r0):
            for h in range(2):
                ref = head_predictions(Q, X[r], y[r], W[h : h + 1], kernel="gaussian")[0]
                torch.testing.assert_close(P[r0 + r, h], ref, rtol=1e-13, atol=1e-15)


def test_identical_heads_have_no_variance_reduction():
    t = RegressionTask(d=6, target="ridge", noise=1.0)
    W = projection_layout("shared", 3, 6, 2, c=1.5, generator=_g(11))
    dec = decompose(t, W, torch.full((3,), 1 / 3, dtype=DT), 60, 20, 30, _g(12))
    vpart = dec.variance_term + dec.covariance_term
    torch.testing.assert_close(vpart, dec.variance.mean(0), rtol=1e-12, atol=0)  # = V exactly
    assert dec.mean_correlation == pytest.approx(1.0, abs=1e-12)


# ------------------------------------------------------------------------------------- estimators


def test_estimator_contract_and_prediction():
    t = RegressionTask(d=4, target="sine", noise=0.2)
    X, y = (a.numpy() for a in t.sample(80, _g(13)))
    est = NWEnsemble(n_heads=2, d_k=2, layout="orthogonal", c=2.0, weights="geometric", random_state=3)
    clone(est)
    assert est.set_params(rho=0.25) is est and est.get_params()["rho"] == 0.25
    assert est.fit(X, y) is est
    Xq = X[:7]
    P = est.predict_heads(Xq)
    assert P.shape == (2, 7)
    np.testing.assert_allclose(est.predict(Xq), est.alpha_.numpy() @ P, rtol=1e-14)
    manual = head_predictions(torch.as_tensor(Xq), est.X_train_, est.y_train_, est.W_, kernel="gaussian")
    np.testing.assert_allclose(P, manual.numpy(), rtol=1e-13)
    assert est.diversity_.hdi == pytest.approx(1.0, abs=1e-12)
    assert -1.0 < est.score(X, y) <= 1.0
    h = NWHead(d_k=2, random_state=1).fit(X, y)
    assert h.predict(Xq).shape == (7,) and clone(h).get_params()["d_k"] == 2


def test_estimator_optimal_weights_use_leave_one_out():
    t = RegressionTask(d=3, target="sine", noise=0.3)
    X, y = (a.numpy() for a in t.sample(120, _g(14)))
    # head 0 sees the relevant coordinate, head 1 a useless one: optimal weights favour head 0
    W = np.zeros((2, 3, 1))
    W[0, 0, 0], W[1, 2, 0] = 2.0, 2.0
    est = NWEnsemble(n_heads=2, d_k=1, projections=W, weights="optimal").fit(X, y)
    assert float(est.alpha_[0]) > 0.8
    with pytest.raises(ValueError, match="y: expected"):
        NWEnsemble().fit(X, y[:5])
    with pytest.raises(ValueError, match="projections"):
        NWEnsemble(n_heads=3, d_k=1, projections=W).fit(X, y)


# ------------------------------------------------------------------------------------- training


def test_loo_loss_and_penalty_match_definitions():
    g = _g(15)
    X, y = torch.randn(10, 3, generator=g, dtype=DT), torch.randn(10, generator=g, dtype=DT)
    W = torch.randn(2, 3, 1, generator=g, dtype=DT)
    a = torch.tensor([0.3, 0.7], dtype=DT)
    ref = ((a @ head_predictions(X, X, y, W, kernel="gaussian", loo=True)) - y).square().mean()
    assert float(ensemble_loss(W, X, y, a)) == pytest.approx(float(ref), rel=1e-12)
    assert float(weight_overlap_penalty(projection_layout("orthogonal", 3, 6, 2))) == pytest.approx(
        0.0, abs=1e-14
    )
    assert float(weight_overlap_penalty(projection_layout("shared", 3, 6, 2))) == pytest.approx(
        1.0, abs=1e-14
    )


def test_training_lowers_its_objective_and_the_penalty_raises_hdi():
    t = RegressionTask(d=6, target="bump", noise=0.3)
    X, y = t.sample(50, _g(16))
    W0 = projection_layout("shared", 2, 6, 2, c=1.5, generator=_g(17)) + 0.05 * torch.randn(
        2, 6, 2, generator=_g(18), dtype=DT
    )
    res = train_projections(W0, X, y, steps=25, lr=0.03)
    assert res.loss_history[-1] < res.loss_history[0]
    pen = train_projections(W0, X, y, penalty=2.0, steps=25, lr=0.05)
    assert diversity(pen.W).hdi > diversity(W0).hdi + 0.1


def test_early_stopping_returns_the_best_validation_step():
    t = RegressionTask(d=6, target="bump", noise=0.3)
    X, y = t.sample(60, _g(22))
    Xv, yv = t.sample(30, _g(23))
    W0 = projection_layout("random", 2, 6, 2, c=1.5, generator=_g(24))
    a = torch.full((2,), 0.5, dtype=DT)

    def val(W):
        return float(((a @ head_predictions(Xv, X, y, W, kernel="gaussian")) - yv).square().mean())

    for obj in ("loo", "holdout"):
        res = train_projections(W0, X, y, objective=obj, steps=20, lr=0.05, X_val=Xv, y_val=yv)
        assert len(res.val_history) == len(res.loss_history) + 1 == 21  # before each step, after the last
        assert res.best_step == int(torch.argmin(res.val_history))
        assert val(res.W) == pytest.approx(float(res.val_history.min()), rel=1e-10)
        assert float(res.val_history[0]) == pytest.approx(val(W0), rel=1e-10)
    # steps far too large: validation MSE stops improving and patience ends training early
    wild = train_projections(W0, X, y, steps=50, lr=5.0, X_val=Xv, y_val=yv, patience=2)
    assert len(wild.loss_history) < 50 and len(wild.val_history) == len(wild.loss_history) + 1
    assert wild.best_step == int(torch.argmin(wild.val_history))
    plain = train_projections(W0, X, y, steps=3)
    assert plain.val_history is None and plain.best_step is None
    with pytest.raises(ValueError, match="X_val"):
        train_projections(W0, X, y, steps=3, patience=2)
    with pytest.raises(ValueError, match="y_val"):
        train_projections(W0, X, y, steps=3, X_val=Xv)


def test_checkpoints_are_the_projections_a_shorter_run_ends_at():
    t = RegressionTask(d=6, target="radial", noise=0.3)
    X, y = t.sample(40, _g(31))
    Xv, yv = t.sample(20, _g(32))
    W0 = projection_layout("random", 2, 6, 2, c=1.5, generator=_g(33))
    res = train_projections(W0, X, y, steps=7, lr=0.05, checkpoint_every=3)
    assert res.checkpoint_steps == (0, 3, 6, 7)  # every 3 steps from the start, and after the last
    assert res.checkpoints.shape == (4, 2, 6, 2)
    assert torch.equal(res.checkpoints[0], W0) and torch.equal(res.checkpoints[-1], res.W)
    # independent computation: a separate run of k steps ends exactly where the checkpoint at k is
    # (full-batch Adam is deterministic; the same operations in the same order give the same bits)
    for k, Wc in zip(res.checkpoint_steps[1:3], res.checkpoints[1:3]):
        assert torch.equal(train_projections(W0, X, y, steps=k, lr=0.05).W, Wc)
    # an early stop: the last checkpoint is where training stopped, not the early-stopped best
    wild = train_projections(W0, X, y, steps=50, lr=5.0, X_val=Xv, y_val=yv, patience=2, checkpoint_every=1)
    assert wild.checkpoint_steps[-1] == len(wild.loss_history) < 50
    assert wild.checkpoint_steps == tuple(range(len(wild.loss_history) + 1))
    assert torch.equal(wild.checkpoints[wild.best_step], wild.W)
    assert train_projections(W0, X, y, steps=2).checkpoints is None
    with pytest.raises(ValueError, match="checkpoint_every"):
        train_projections(W0, X, y, steps=2, checkpoint_every=0)


def test_kept_path_slope_is_the_closed_form_slope_up_to_the_kept_step():
    steps = np.array([0.0, 10, 20, 30, 40])
    vals = np.array([0.70, 0.72, 0.71, 0.60, 0.50])
    # kept part: steps 0, 10, 20 and the early-stopped step 25 with its own value 0.75
    x, y = np.array([0.0, 10, 20, 25]), np.array([0.70, 0.72, 0.71, 0.75])
    xc, yc = x - x.mean(), y - y.mean()
    assert kept_path_slope(steps, vals, 25, 0.75) == pytest.approx(100 * (xc @ yc) / (xc @ xc), rel=1e-12)
    # a kept step that is a checkpoint enters once, with the value given for it
    x2, y2 = np.array([0.0, 10, 20]), np.array([0.70, 0.72, 0.71])
    xc, yc = x2 - x2.mean(), y2 - y2.mean()
    assert kept_path_slope(steps, vals, 20, 0.71) == pytest.approx(100 * (xc @ yc) / (xc @ xc), rel=1e-12)
    assert np.isnan(kept_path_slope(steps, vals, 0, 0.7))
    with pytest.raises(ValueError, match="values"):
        kept_path_slope(steps, vals[:3], 20, 0.7)


# ------------------------------------------------------------------------------------- budget


def test_budget_helpers():
    assert budget_splits(12) == [1, 2, 3, 4, 6, 12]
    dk = np.array([1, 2, 4, 8, 16])
    mse = (np.log(dk) - math.log(3.0)) ** 2 + 1  # exact parabola in log d_k with vertex at 3
    assert continuous_optimum(dk, mse) == pytest.approx(3.0, rel=1e-9)
    n = np.array([1e2, 1e3, 1e4, 1e5])
    fit = fit_power_law(n, 2.0 * n**0.3)
    assert fit["p"] == pytest.approx(0.3, abs=1e-12) and fit["r2"] == pytest.approx(1.0, abs=1e-12)
    assert fit_power_law(n, 2.0 * n**0.3, exponent=0.3)["rss"] == pytest.approx(0.0, abs=1e-20)


def test_pooled_optimum_is_the_vertex_of_the_seed_averaged_curve():
    dk = np.array([1, 2, 4, 8, 16])
    # seeds' parabolas in log d_k with vertices 2 and 4.5: their mean is a parabola whose vertex is the
    # geometric mean 3 (the mean of (x − a)² and (x − b)² is centred at (a + b)/2)
    curves = [(np.log(dk) - math.log(v)) ** 2 + 1 for v in (2.0, 4.5)]
    star, edge = pooled_optimum(dk, curves)
    assert star == pytest.approx(3.0, rel=1e-9) and not edge
    # a pooled curve falling to the grid's end: the end itself, flagged as unresolved
    assert pooled_optimum(dk, [-np.log(dk)]) == (16.0, True)
    with pytest.raises(ValueError, match="MSEs by split"):
        pooled_optimum(dk, [[1.0, 2.0]])


def test_budget_sweep_shapes():
    sw = budget_sweep(RegressionTask(d=2, target="sine"), 4, 30, 3, 10, c=2.0)
    assert list(sw.d_k) == [1, 2, 4] and list(sw.heads) == [4, 2, 1]
    np.testing.assert_allclose(sw.mse, sw.bias2 + sw.variance_part, rtol=1e-12)
    assert sw.best_d_k in (1, 2, 4)


def test_budget_sweep_averaged_is_the_decomposition_of_the_uniform_ensemble():
    # independent computation: decompose() on the same layout, queries and samples as the sweep draws them
    task = RegressionTask(d=6, target="radial", noise=0.5)
    sw = budget_sweep(task, 6, 40, 3, 12, c=2.0, seed=5, max_d_k=5)
    k = 2
    W = projection_layout("random", 3, 6, k, 2.0, generator=_g(5 + 7919 * k))
    dec = decompose(task, W, torch.full((3,), 1 / 3, dtype=DT), 40, 12, 3, _g(5))
    it = dec.integrated()
    i = list(sw.d_k).index(k)
    assert sw.mse[i] == pytest.approx(it["mse"], rel=1e-12)
    assert sw.variance_part[i] == pytest.approx(it["variance"] + it["covariance"], rel=1e-10)


def test_combine_heads_weightings():
    g = _g(11)
    truth = torch.randn(40, generator=g, dtype=DT)  # (m,)
    preds = torch.randn(6, 3, 40, generator=g, dtype=DT)  # (R, H, m)
    avg = combine_heads(preds, truth, "averaged")
    dec = decompose_predictions(preds, truth, torch.full((3,), 1 / 3, dtype=DT)).integrated()
    assert avg["mse"] == pytest.approx(dec["mse"], rel=1e-12)
    assert avg["bias2"] == pytest.approx(dec["bias2"], rel=1e-12)
    assert avg["variance"] == pytest.approx(dec["variance"] + dec["covariance"], rel=1e-10)
    summed = combine_heads(preds, truth, "summed")
    assert summed["mse"] == pytest.approx(float((preds.sum(1) - truth).square().mean()), rel=1e-12)
    # planted: the truth is exactly 2·head 0 − head 2 at every replication and query; fitted weights
    # found on the other replications and queries recover it (MSE 0 to rounding), averaging cannot
    planted = preds.clone()
    planted[:, 0] = truth + 0.3 * torch.randn(6, 40, generator=g, dtype=DT)
    planted[:, 2] = 2 * planted[:, 0] - truth
    fit = combine_heads(planted, truth, "fitted")
    assert fit["mse"] < 1e-20 and combine_heads(planted, truth, "averaged")["mse"] > 0.01
    assert fit["mse"] == pytest.approx(fit["bias2"] + fit["variance"], abs=1e-24)


def test_averaging_floor_against_monte_carlo_and_the_limit_of_vanishing_width():
    # independent computation: Monte Carlo of f − mean_h E[f | U_hᵀx] for orthogonal frames
    d, H, k = 12, 3, 4
    U = projection_layout("orthogonal", H, d, k, 1.0, generator=_g(2))  # (H, d, k)
    X = torch.randn(400_000, d, generator=_g(3), dtype=DT)
    f = (X.square().sum(1) - d) / math.sqrt(2 * d)
    z = torch.einsum("nd,hdk->hnk", X, U)
    g = ((z.square().sum(-1) - k) / math.sqrt(2 * d)).mean(0)
    err = (f - g).square()
    floor = averaging_floor(d, k, H)  # 1 − 8/12 + 4/36 = 0.4444
    assert floor == pytest.approx(1 - 2 * k / d + k / (d * H))
    # Monte Carlo tolerance: 4 standard errors of the mean squared error over 4e5 draws
    assert float(err.mean()) == pytest.approx(floor, abs=4 * float(err.std()) / math.sqrt(err.numel()))
    # the limit's closed form at a vanishing kernel width reaches the floor (to the width 1e-9)
    G, b = radial_limit(U, 1e9)
    assert limit_mse(G, b, "averaged") == pytest.approx(floor, abs=1e-7)
    assert limit_mse(G, b, "summed") == pytest.approx(
        averaging_floor(d, k, 1) * 0 + (d - H * k) / d, abs=1e-7
    )
    with pytest.raises(ValueError, match="H·d_k"):
        averaging_floor(8, 4, 3)


def test_radial_limit_is_the_large_sample_nw_estimate_and_its_moments():
    # per query: the NW estimate at n = 2e5 noise-free samples against m_h(q) from (G, b)'s formula
    d, H, k, c = 4, 2, 1, 1.5
    task = RegressionTask(d=d, target="radial", noise=0.0)
    W = projection_layout("random", H, d, k, c, generator=_g(4))  # (H, d, k)
    scale = 1 / math.sqrt(k)
    Q = torch.randn(8, d, generator=_g(5), dtype=DT)
    X, y = task.sample(200_000, _g(6))
    nw = head_predictions(Q, X.unsqueeze(0), y.unsqueeze(0), W, scale=scale, kernel="gaussian")[0]  # (H, m)
    eye = torch.eye(d, dtype=DT)
    Sig = torch.linalg.inv(eye + scale * W @ W.transpose(-1, -2))
    M2 = (eye - Sig) @ (eye - Sig)
    m = torch.einsum("qi,hij,qj->hq", Q, M2, Q) + torch.diagonal(Sig, dim1=-2, dim2=-1).sum(-1)[:, None] - d
    m = m / math.sqrt(2 * d)
    # tolerance: the NW estimate's sampling sd at n = 2e5, d_k = 1 is about 1e-2 (Var f = 1 over ~1e4
    # effective points); 0.05 is five of them
    assert torch.allclose(nw, m, atol=0.05)
    # the moments: sample averages of m_h(q) and f(q) over 2e5 queries against G and b
    Z = torch.randn(200_000, d, generator=_g(7), dtype=DT)
    mz = torch.einsum("qi,hij,qj->hq", Z, M2, Z) + torch.diagonal(Sig, dim1=-2, dim2=-1).sum(-1)[:, None] - d
    mz = mz / math.sqrt(2 * d)
    fz = task.f(Z)
    G, b = radial_limit(W, scale)
    # tolerance: 4 standard errors of each sample mean over 2e5 queries
    se = float((mz[0] * mz[1]).std()) / math.sqrt(2e5)
    assert float((mz[0] * mz[1]).mean()) == pytest.approx(G[0, 1], abs=4 * se)
    assert float((fz * mz[0]).mean()) == pytest.approx(
        b[0], abs=4 * float((fz * mz[0]).std()) / math.sqrt(2e5)
    )
    alpha = np.linalg.solve(G, b)
    direct = float((fz - torch.einsum("h,hq->q", torch.from_numpy(alpha), mz)).square().mean())
    assert limit_mse(G, b, "fitted") == pytest.approx(direct, abs=0.02)
    assert limit_mse(G, b, "fitted") <= min(limit_mse(G, b, "averaged"), limit_mse(G, b, "summed")) + 1e-12


def test_gaussian_underflow_fallback_matches_a_stabilised_loop():
    g = _g(30)
    Q = torch.randn(5, 3, generator=g, dtype=DT)
    X = 50 * torch.randn(20, 3, generator=g, dtype=DT)  # every key far away: exp(−scale·dist²/2) underflows
    y = torch.randn(20, generator=g, dtype=DT)
    W = torch.randn(2, 3, 2, generator=g, dtype=DT)
    P = head_predictions(Q, X, y, W, scale=100.0, kernel="gaussian")
    for h in range(2):
        for i in range(5):
            s = -100.0 * ((Q[i] @ W[h] - X @ W[h]) ** 2).sum(1) / 2
            k = torch.exp(s - s.max())
            assert float(P[h, i]) == pytest.approx(float((k @ y) / k.sum()), rel=1e-10)
