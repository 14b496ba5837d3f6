"""State evolution (docs/highdim.md C3): reference point, proximal solver, stability, conventions."""

import math

import pytest
import torch

from attnlab.highdim import (
    FixedPoint,
    OutputChannel,
    Setting,
    Stability,
    flat_to_matrix,
    lam_from_lam_tilde,
    lam_tilde_from_lam,
    predicted_spectrum,
    select_fixed_point,
    stability,
    state_evolution,
    sweep,
)
from attnlab.highdim.state_evolution import average_fixed_points

REF = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)


@pytest.fixture(scope="module")
def ref_fp():
    return state_evolution(REF, 0.3016)


def test_reference_fixed_point(ref_fp):
    # docs/highdim.md C3: published values from 1000-sample evaluations (±1–2%); we allow 2%
    assert ref_fp.converged
    assert ref_fp.test_error == pytest.approx(0.174, rel=0.02)
    assert ref_fp.train_loss == pytest.approx(0.0120, rel=0.02)


def test_fixed_point_is_a_fixed_point():
    # on one set of nodes (the default averages four scrambles, each point a fixed point of its own map):
    # one more undamped map application moves the order parameters by less than the solver tolerance scale
    one = state_evolution(REF, 0.3016, scrambles=1, nodes=4096)
    again = state_evolution(REF, 0.3016, init=one, damping=0.0, max_iter=1, scrambles=1, nodes=4096)
    assert one.stderr is None and one.scrambles == 1
    assert again.q == pytest.approx(one.q, rel=1e-4)
    assert again.m == pytest.approx(one.m, rel=1e-4)
    assert again.sigma == pytest.approx(one.sigma, rel=1e-4)


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
    # 8× more nodes change the test error by less than 0.5% (the 16× check at 4096 nodes,
    # the solver's default, runs in bench/bench_highdim.py; 8× keeps this test under ~15 s)
    a = state_evolution(REF, 0.5, nodes=2048)
    b = state_evolution(REF, 0.5, nodes=16384)
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


def _fp(**kw):
    base = dict(
        alpha=0.5,
        q=1.0,
        m=0.9,
        sigma=1.0,
        q_hat=1.0,
        m_hat=1.0,
        sigma_hat=1.0,
        test_error=0.2,
        train_loss=0.02,
        s_error=0.5,
        rank_fraction=0.5,
        delta=1.0,
        eps=0.02,
        eta=1.0,
        iterations=10,
        converged=True,
        max_rel_change=1e-7,
    )
    return FixedPoint(**(base | kw))


def test_selection_rule_on_constructed_candidates():
    # docs/highdim.md C3: the stable fixed point with the lowest training loss, not the lowest overall
    c = [
        _fp(train_loss=0.010, stable=False),  # lowest loss but unstable
        _fp(train_loss=0.030, stable=True),
        _fp(train_loss=0.020, stable=True),  # <- the answer
        _fp(train_loss=0.001, stable=True, converged=False),  # not a fixed point
    ]
    assert select_fixed_point(c) == 2
    # no stable one: fall back to converged ones of unknown stability, then to any converged one
    assert select_fixed_point([_fp(train_loss=0.1, stable=False), _fp(train_loss=0.2)]) == 1
    assert select_fixed_point([_fp(train_loss=0.1, stable=False), _fp(train_loss=0.05, stable=False)]) == 1
    with pytest.raises(ValueError, match="candidates"):
        select_fixed_point([])


def test_attracting_is_damping_independent():
    # eigenvalue −1.5 of the undamped map: unstable undamped, attracting once damped (Re λ < 1);
    # eigenvalue 1.2: no damping helps (d + (1 − d)·1.2 > 1 for every d < 1)
    assert Stability(1.5, 0.25, (complex(-1.5), complex(0.2)), True).attracting
    assert not Stability(1.2, 1.1, (complex(1.2),), False).attracting


def test_multistart_single_fixed_point_same_from_every_start():
    # REF at α = 0.5 has one fixed point: the well-spread starts (default, uninformed, near perfect
    # recovery) all land on it. Each solve stops when an iteration moves the parameters by < 1e-6
    # (relative); with a contraction factor ≲ 0.9 the distance to the fixed point is ≲ 1e-5, so
    # separate solves agree to 1e-4 and are merged into one candidate.
    fp = state_evolution(REF, 0.5, starts="auto", nodes=1024)
    assert fp.converged and fp.stable is True
    assert len(fp.candidates) == 1
    for start in ((0.05 * REF.q0, 0.02 * REF.q0, 1.0), (0.98 * REF.q0, 0.97 * REF.q0, 0.05)):
        one = state_evolution(REF, 0.5, init=start, nodes=1024)
        assert one.converged
        for a, b in zip(one.params, fp.params):
            assert a == pytest.approx(b, rel=1e-4)
        assert one.train_loss == pytest.approx(fp.train_loss, rel=1e-6)
    d = fp.to_dict()
    assert len(d["candidates"]) == 1 and "candidates" not in d["candidates"][0]


def test_starts_validation():
    with pytest.raises(ValueError, match="starts"):
        state_evolution(REF, 0.5, starts="many")
    with pytest.raises(ValueError, match="starts"):
        state_evolution(REF, 0.5, starts=[])
    with pytest.raises(ValueError, match=r"starts\[0\]"):
        state_evolution(REF, 0.5, starts=[(1.0, 5.0, 1.0)])  # m² ≥ Q0 q: not a covariance


def test_setting_dict_round_trip():
    import json

    from attnlab.highdim import power_law_spectrum

    for s in (
        Setting(kappa0=0.3, noise=0.1, tokens=3, lam=0.02, beta=2.0, beta0=0.5, kappa=1.5),
        Setting(noise=0.1, lam=1e-3, target=power_law_spectrum(20, 1.0)),
    ):
        d = json.loads(json.dumps(s.to_dict()))  # through JSON, as a point's parameters are stored
        back = Setting.from_dict(d)
        assert back.to_dict() == s.to_dict()
        assert back.q0 == s.q0 and back.spectrum.__class__ is s.spectrum.__class__
    assert Setting.from_dict({}).to_dict() == Setting().to_dict()
    with pytest.raises(ValueError, match="unknown key 'alpha'"):
        Setting.from_dict({"alpha": 0.5})
    with pytest.raises(ValueError, match="target"):
        Setting.from_dict({"target": "power-law"})
    with pytest.raises(ValueError, match="noise"):
        Setting.from_dict({"noise": -1.0})


# ---------------------------------------------------------------------------------------------------------
# the Newton solver (attnlab.highdim.newton) against the Anderson and damped iterations


def test_newton_matches_anderson_at_tight_tolerance():
    # the same map, two solvers at tol 1e-9: their fixed points agree to 1e-7 (ten times the tolerance of
    # each; the Anderson solve is the independent computation)
    s = Setting(lam=1e-3)
    ch = OutputChannel(s, 512)
    a = state_evolution(s, 0.3016, channel=ch, tol=1e-9, method="anderson")
    n = state_evolution(s, 0.3016, channel=ch, tol=1e-9)
    assert a.converged and n.converged and n.mixed_weight is None
    for x, y in zip(n.params, a.params):
        assert x == pytest.approx(y, rel=1e-7)
    assert n.train_loss == pytest.approx(a.train_loss, rel=1e-7)
    # the Newton point is a fixed point of the damped map: one undamped application moves it by < 1e-8
    again = state_evolution(s, 0.3016, init=n, channel=ch, damping=0.0, max_iter=1, method="damped")
    assert again.q == pytest.approx(n.q, rel=1e-8) and again.sigma == pytest.approx(n.sigma, rel=1e-8)


def test_switching_cycle_is_mixed_at_the_tie():
    # λ̃ = 1e-4, α = 0.19 on 1024 nodes: a node's two proximal minima swap order between the two fixed
    # points of the followed branches, so the map on fixed nodes has no fixed point; the mixed one lies
    # between the two, and the mixed node's two minima tie there (the sum of value differences is 0)
    from attnlab.highdim.newton import _Map, _Mix, to_y

    s = Setting(lam=1e-4)
    ch = OutputChannel(s, 1024)
    fp = state_evolution(s, 0.19, channel=ch)
    assert fp.converged and fp.mixed_weight is not None and 0 < fp.mixed_weight < 1
    # at the reported point: the cold two-start step and the followed minima differ at a few nodes only
    # (the mixed set), and the map itself, cold-started, moves the point by less than one node's weight
    hc, Mc = ch.prox_best(ch.z_of(fp.q, fp.m), fp.sigma)
    qh, mh, sh, _ = ch.hats(fp.q, fp.m, fp.sigma, 0.19)
    assert abs(qh / fp.q_hat - 1) < 5.0 / ch.N and abs(sh / fp.sigma_hat - 1) < 5.0 / ch.N
    del hc, Mc, _Map, _Mix, to_y


def test_switching_cycle_solve_matches_the_tight_solve():
    # the cycle is found as soon as only nodes that switched before switch back, the re-solves between
    # the switches run to 1e-3 only, and the weight is found on fixed points solved to tol/10: the point
    # at tol 1e-6 must lie within 1e-6 (relative, all six order parameters) of the one at tol 1e-10, the
    # promise of ``tol`` (solving the mixed fixed points to tol itself missed it by 1.4e-6 here; on 1024
    # nodes, α = 0.19, both are within 1e-8, so the published point on 4096 nodes is the one tested)
    s = Setting(lam=1e-4)
    ch = OutputChannel(s, 4096)
    fp = state_evolution(s, 0.1988, channel=ch)
    tight = state_evolution(s, 0.1988, channel=ch, tol=1e-10)
    assert fp.converged and tight.converged and fp.mixed_weight is not None and tight.mixed_weight is not None
    assert max(abs(a / b - 1) for a, b in zip(fp.params, tight.params)) < 1e-6
    assert abs(fp.mixed_weight - tight.mixed_weight) < 1e-3


def test_min_norm_limit_above_the_threshold():
    # above α_interp the λ̃ → 0 limit exists (Σ stays finite): λ̃ = 0 itself converges, and λ̃ = 1e-5, 1e-6
    # approach it, ten times closer for ten times smaller λ̃ (a first-order approach in λ̃)
    from attnlab.highdim.se_thresholds import lam_scan

    rows = lam_scan(Setting(lam=0.0), [0.3016], [1e-5, 1e-6, 0.0], nodes=256)
    (f5,), (f6,), (f0,) = rows
    assert f0.converged and f0.eps == 0.0 and math.isfinite(f0.sigma)
    d5, d6 = abs(f5.q - f0.q), abs(f6.q - f0.q)
    assert d6 < d5 / 5 and d6 < 0.02 * f0.q


# ---------------------------------------------------------------------------------------------------------
# the output expectation on the row space of the logit differences, z* by its conditional mean; error bars


def test_reduced_integrand_against_full_gaussian_monte_carlo():
    # The channel integrates over (ζ, z) in the row space of C with z* replaced by E[z* | ζ, z]. The
    # independent computation: plain Monte Carlo over all 3K = 9 Gaussian coordinates (g1, g2, ξ) of
    # docs/highdim.md C3, z* = √Q0 g1, z = (m/√Q0) g1 + √(q − m²/Q0) g2, ζ = z* + √(Δ/2) ξ, the node terms
    # written out here from the output equations. Tolerance: 4 standard errors of the difference (the
    # Monte Carlo's, 2^14 pseudo-random samples, dominate; the channel's 2^14 nodes, 455 Sobol label nodes
    # times the 36-node Gauss–Hermite grid of the product rule, are ~10× better).
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
    q, m, sg, a = 1.46, 1.38, 2.3, 0.5
    ch = OutputChannel(s, 2**14, seed=3)
    z = ch.z_of(q, m)
    h, M = ch.prox_best(z, sg)
    mine = ch.average(ch.node_terms(q, m, sg, a, z, h, M))  # the product rule's weighted mean
    n, K, q0 = 2**14, s.K, s.q0
    gen = torch.Generator().manual_seed(11)
    g1, g2, xi = torch.randn(3, n, K, generator=gen, dtype=torch.float64)
    zs = math.sqrt(q0) * g1
    zf = (m / math.sqrt(q0)) * g1 + math.sqrt(q - m * m / q0) * g2
    mc = OutputChannel(s, 16)  # its proximal solver, on labels from the full coordinates
    mc.y = mc._softmax(zs + math.sqrt(s.noise / 2) * xi, s.beta0)
    mc._target = (s.beta0 / s.beta) * (zs + math.sqrt(s.noise / 2) * xi)
    hf, Mf = mc.prox_best(zf, sg)
    dz = hf - zf
    C = q0 * q - m * m
    terms = torch.stack(
        [
            2 * a * (dz**2).sum(-1) / sg**2,
            2 * a * (dz * (q * zs - m * zf)).sum(-1) / (sg * C),
            -2 * a * (dz * (q0 * zf - m * zs)).sum(-1) / (sg * C),
            Mf,
        ],
        -1,
    )
    se = terms.std(0) / math.sqrt(n)
    assert torch.all((mine - terms.mean(0)).abs() < 4 * se), (mine, terms.mean(0), se)
    # the test error likewise (labels from the noisy logits, the student's softmax at z)
    te = ((mc.y - mc._softmax(zf, s.beta)) ** 2).sum(-1)
    assert abs(ch.test_error(q, m) - float(te.mean())) < 4 * float(te.std()) / math.sqrt(n)
    # the clean test error draws z* given (ζ, z) from its conditional law: same check
    ce = ((mc._softmax(zs, s.beta0) - mc._softmax(zf, s.beta)) ** 2).sum(-1)
    assert abs(ch.clean_test_error(q, m) - float(ce.mean())) < 4 * float(ce.std()) / math.sqrt(n)


def test_error_bar_covers_independent_scrambles():
    # two default solves on disjoint scrambles (seeds 0-3 and 4-7, 1024 nodes each): their difference is
    # within 5 of its standard errors (the standard error from three degrees of freedom is itself uncertain
    # by ~40%, so 5 rather than 3), and each carries its error bar for every reported quantity
    a = state_evolution(REF, 0.5, nodes=1024, seed=0)
    b = state_evolution(REF, 0.5, nodes=1024, seed=4)
    assert a.scrambles == b.scrambles == 4
    for k in ("q", "m", "sigma", "test_error", "train_loss", "s_error"):
        se = math.hypot(a.stderr[k], b.stderr[k])
        assert 0 < se < 0.05 * abs(getattr(a, k)), k
        assert abs(getattr(a, k) - getattr(b, k)) < 5 * se, k
    with pytest.raises(ValueError, match="fps"):
        average_fixed_points([a])
    with pytest.raises(ValueError, match="scrambles"):
        state_evolution(REF, 0.5, scrambles=0)
