"""Data model, Adam training and the error decomposition (docs/highdim.md C1, C2, C6)."""

import math

import pytest
import torch

from attnlab.core.seeding import generator
from attnlab.highdim import (
    TrainConfig,
    decompose_error,
    logits,
    mp_target,
    power_law_target,
    sample,
    simulate,
    train_erm,
)


def test_target_normalisations():
    S0 = mp_target(300, 0.5, generator(0))
    # Tr S0²/d → 1 + κ0; fluctuations O(1/d)
    assert float((S0**2).sum() / 300) == pytest.approx(1.5, rel=0.03)
    assert int((torch.linalg.eigvalsh(S0) > 1e-8).sum()) == 150
    P = power_law_target(50, 1.0, generator(1))
    assert float((P**2).sum() / 50) == pytest.approx(1.0, rel=1e-10)


def test_logit_and_noise_variances():
    # Z_ab has variance Tr S²/d off the diagonal and 2 Tr S²/d on it; the noise Δ/2 and Δ
    d = 60
    S0 = mp_target(d, 0.5, generator(2))
    q0 = float((S0**2).sum() / d)
    data = sample(S0, 20000, 2, 0.0, 1.0, "seq2lab", generator(3))
    Z = logits(data.X, S0)
    # 20000 samples: relative standard error of a variance ≈ √(2/20000) = 1%, 5% is ~5 sigma
    assert float(Z[:, 0, 1].var()) == pytest.approx(q0, rel=0.05)
    assert float(Z[:, 0, 0].var()) == pytest.approx(2 * q0, rel=0.05)
    assert torch.allclose(data.A.sum(-1), torch.ones(20000, 2, dtype=torch.float64))


def test_penalty_is_nuclear_norm_in_the_loss():
    # train_loss = (data loss + λ‖W‖²)/d² with λ = λ̃/√κ equals data/d² + λ̃ Tr S / d
    d = 12
    g = generator(4)
    S0 = mp_target(d, 0.5, g)
    tr = sample(S0, 100, 2, 0.5, 1.0, "seq2lab", g)
    r = train_erm(tr, None, lam=0.05, kappa=2.0, config=TrainConfig(max_steps=30), generator=generator(5))
    assert r.train_loss == pytest.approx(r.data_loss + 0.05 * float(torch.trace(r.S)) / d, rel=1e-10)


def test_adam_matches_theory_small_d():
    # d = 30 at the reference setting: the finite-d gap to the state evolution is a few % (10% margin)
    r = simulate(30, 0.5, lam=0.01, seed=0, config=TrainConfig(max_steps=1500))
    assert r.converged
    assert r.test_error == pytest.approx(0.1366, rel=0.1)
    assert r.train_loss == pytest.approx(0.02307, rel=0.1)
    assert r.test_error > r.test_error_clean


def test_seq2seq_close_to_seq2lab():
    # X Xᵀ/d → I_T, so seq2seq losses (divided by d) approach seq2lab ones; at d = 30 within 25%
    a = simulate(30, 0.3, noise=0.0, lam=0.01, seed=1, config=TrainConfig(max_steps=800))
    b = simulate(30, 0.3, noise=0.0, lam=0.01, seed=1, task="seq2seq", config=TrainConfig(max_steps=800))
    assert b.test_error == pytest.approx(a.test_error, rel=0.25)


def test_unfactorised_runs_and_is_symmetric():
    g = generator(6)
    S0 = mp_target(15, 0.5, g)
    tr = sample(S0, 200, 2, 0.1, 1.0, "seq2lab", g)
    r = train_erm(tr, tr, lam=0.01, factorised=False, config=TrainConfig(max_steps=200))
    assert torch.allclose(r.S, r.S.T)
    assert math.isfinite(r.test_error)


def test_decomposition_parts_sum_and_blocks():
    g = generator(7)
    S0 = mp_target(20, 0.5, g)
    E = torch.randn(20, 20, generator=g, dtype=torch.float64)
    Sh = S0 + 0.1 * (E + E.T)
    dec = decompose_error(Sh, S0)
    assert dec.parts_sum == pytest.approx(dec.total, rel=1e-12)
    assert dec.n_null == 10
    # Ŝ = S0 exactly: all parts vanish
    z = decompose_error(S0, S0)
    assert z.total == pytest.approx(0.0, abs=1e-20) and z.over == pytest.approx(0.0, abs=1e-20)
    # a student that learns nothing: everything is under-fitting
    u = decompose_error(torch.zeros(20, 20, dtype=torch.float64), S0)
    assert u.under == pytest.approx(u.total) and u.n_recovered == 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="task"):
        sample(mp_target(5, 0.5), 10, task="nope")
    with pytest.raises(ValueError, match="S0"):
        sample(torch.zeros(3, 4, dtype=torch.float64), 10)
