"""Nuclear-norm PSD ERM by proximal gradient: the objective against a direct evaluation, the minimum
against closed-form optimality (soft-thresholded eigenvalues: the prox fixed point), and the
factorised student's loss equal to the objective at its S."""

from __future__ import annotations

import pytest
import torch

from attnlab.highdim import mp_target, nuclear_objective, nuclear_psd_erm, sample, train_erm
from attnlab.highdim.train import TrainConfig, predict


def _data(d=8, n=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    S0 = mp_target(d, 0.5, g)
    return sample(S0, n, 2, 0.3, 1.0, "seq2lab", g)


def test_objective_is_data_plus_trace_penalty():
    tr = _data()
    S = torch.eye(8, dtype=torch.float64) * 0.3
    direct = float(((tr.y - predict(tr.X, S, 1.0, "seq2lab")) ** 2).sum() + 8 * 0.05 * torch.trace(S)) / 64
    assert nuclear_objective(S, tr, 0.05) == pytest.approx(direct, rel=1e-14)


def test_solution_is_a_fixed_point_of_the_prox_map_and_psd():
    # first-order optimality for F = f + dλ̃ Tr S + [S ⪰ 0]: S = prox(S − t ∇f(S)) for any step t > 0;
    # with t small the residual measures stationarity (it is ~t × the gradient's size when not optimal)
    tr = _data()
    lam = 0.05
    r = nuclear_psd_erm(tr, lam=lam, max_steps=3000, rtol=1e-12)
    assert r.converged and torch.linalg.eigvalsh(r.S).min() >= -1e-12
    S = r.S.clone().requires_grad_(True)
    f = ((tr.y - predict(tr.X, S, 1.0, "seq2lab")) ** 2).sum()
    (g,) = torch.autograd.grad(f, S)
    g = (g + g.T) / 2
    t = 1e-3
    w, U = torch.linalg.eigh(r.S - t * g)
    fixed = (U * torch.clamp(w - t * 8 * lam, min=0)) @ U.T
    assert float((fixed - r.S).norm() / r.S.norm()) < 1e-5
    assert r.objective == pytest.approx(nuclear_objective(r.S, tr, lam), rel=1e-12)


def test_factorised_adam_reports_the_same_objective_and_reaches_it():
    tr = _data(d=10, n=200, seed=1)
    a = train_erm(
        tr, None, lam=0.05, config=TrainConfig(max_steps=3000), generator=torch.Generator().manual_seed(2)
    )
    # the factorised loss λ‖W‖² + data is the objective at S = WᵀW/√(pd) (λ = λ̃/√κ, κ = 1)
    assert a.train_loss == pytest.approx(nuclear_objective(a.S, tr, 0.05), rel=1e-10)
    r = nuclear_psd_erm(tr, lam=0.05)
    assert abs(a.train_loss - r.objective) / r.objective < 1e-3
