"""State evolution (THEORY.md C3): reference point, proximal solver, stability, conventions."""

import math

import pytest
import torch

from attnlab.highdim import (
    OutputChannel,
    Setting,
    flat_to_matrix,
    lam_from_lam_tilde,
    lam_tilde_from_lam,
    predicted_spectrum,
    stability,
    state_evolution,
    sweep,
)

REF = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)


@pytest.fixture(scope="module")
def ref_fp():
    return state_evolution(REF, 0.3016)


def test_reference_fixed_point(ref_fp):
    # THEORY.md C3: published values from 1000-sample evaluations (±1–2%); we allow 2%
    assert ref_fp.converged
    assert ref_fp.test_error == pytest.approx(0.174, rel=0.02)
    assert ref_fp.train_loss == pytest.approx(0.0120, rel=0.02)


def test_fixed_point_is_a_fixed_point(ref_fp):
    # one more undamped map application moves the order parameters by less than the solver tolerance scale
    again = state_evolution(REF, 0.3016, init=ref_fp, damping=0.0, max_iter=1)
    assert again.q == pytest.approx(ref_fp.q, rel=1e-4)
    assert again.m == pytest.approx(ref_fp.m, rel=1e-4)
    assert again.sigma == pytest.approx(ref_fp.sigma, rel=1e-4)


def test_observables_are_consistent(ref_fp):
    assert ref_fp.s_error == pytest.approx(REF.q0 + ref_fp.q - 2 * ref_fp.m)
    assert ref_fp.m**2 < REF.q0 * ref_fp.q  # a valid covariance
    assert 0 < ref_fp.rank_fraction < 1
    # the test error includes the irreducible noise part, so it exceeds the clean error at the same (q, m)
    ch = OutputChannel(REF, 4096)
    assert ch.test_error(ref_fp.q, ref_fp.m) > ch.clean_test_error(ref_fp.q, ref_fp.m)


def test_prox_stationarity_against_autograd():
    # the batched proximal solution has zero gradient of ‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖² (autograd check)
    s = Setting(kappa0=0.5, noise=0.5, tokens=3, lam=0.01, beta=2.0)
    ch = OutputChannel(s, 256)
    z = ch.z_of(1.2, 0.9)
    h, _ = ch.prox(z, 2.0)
    hh = h.clone().requires_grad_(True)
    A = flat_to_matrix(hh, 3)
    P = torch.softmax(2.0 * A, dim=-1).reshape(-1, 9)
    obj = ((hh - z) ** 2).sum() / (2 * 2.0) + ((ch.y - P) ** 2).sum()
    (g,) = torch.autograd.grad(obj, hh)
    assert float(g.abs().max()) < 1e-9


def test_prox_is_global_for_a_brute_force_grid():
    # T = 2, K = 3: compare the prox value with a dense grid search around z for a few nodes
    ch = OutputChannel(REF, 32)
    z = ch.z_of(1.4, 1.2)[:4]
    h, M = ch.prox(ch.z_of(1.4, 1.2), 5.0)
    g = torch.linspace(-6, 6, 61, dtype=torch.float64)
    grid = torch.cartesian_prod(g, g, g)  # (61³, 3)
    for i in range(4):
        A = flat_to_matrix(z[i] + grid, 2)
        P = torch.softmax(A, dim=-1).reshape(-1, 4)
        val = (grid**2).sum(-1) / 10 + ((ch.y[i] - P) ** 2).sum(-1)
        # the grid spacing 0.2 bounds how far below the prox value a grid point can be: ~ spacing² / Σ
        assert float(M[i]) <= float(val.min()) + 1e-9


def test_flat_to_matrix_convention():
    v = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    A = flat_to_matrix(v, 2)
    assert torch.allclose(
        A, torch.tensor([[math.sqrt(2), 2.0], [2.0, 3 * math.sqrt(2)]], dtype=torch.float64)
    )


def test_lam_conversion_round_trip():
    assert lam_from_lam_tilde(0.02, 4.0) == pytest.approx(0.01)
    assert lam_tilde_from_lam(lam_from_lam_tilde(0.3, 2.0), 2.0) == pytest.approx(0.3)


@pytest.mark.slow
def test_node_count_convergence():
    # 16× more nodes change the test error by less than 0.5% (the speed target of the issue)
    a = state_evolution(REF, 0.5, nodes=2048)
    b = state_evolution(REF, 0.5, nodes=32768)
    assert a.test_error == pytest.approx(b.test_error, rel=5e-3)


def test_sweep_warm_start_and_stability():
    fps = sweep(REF, [0.5, 0.6], nodes=1024)
    assert all(f.converged for f in fps)
    assert fps[1].iterations <= fps[0].iterations  # warm start from the neighbour
    # more data, lower test error
    assert fps[1].test_error < fps[0].test_error
    st = stability(REF, fps[1], nodes=1024)
    assert st.stable and st.radius_damped < 1


def test_predicted_spectrum(ref_fp):
    ps = predicted_spectrum(REF, ref_fp)
    assert ps.atom + ps.rank_fraction == pytest.approx(1.0)
    assert ps.rank_fraction == pytest.approx(ref_fp.rank_fraction, abs=1e-6)
    assert ps.cdf_nonzero(ps.x[-1] + 1) == pytest.approx(1.0)


def test_bad_inputs():
    with pytest.raises(ValueError, match="alpha"):
        state_evolution(REF, -1.0)
    with pytest.raises(ValueError, match="tokens"):
        Setting(tokens=1)
    with pytest.raises(ValueError, match="noise"):
        Setting(noise=-0.1)
