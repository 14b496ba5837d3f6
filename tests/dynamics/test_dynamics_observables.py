"""Observables: analytic rates against an independent derivative (forward-mode autograd) at the state."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import jvp

from attnlab.dynamics import (
    Heads,
    cluster_fraction,
    energy_rates,
    entropy,
    entropy_rate,
    head_outputs,
    init,
    log_energy,
    mean_gamma,
    n_clusters,
    radial_dominance,
    velocity,
)


def total_energy(spec, beta):
    return lambda x: torch.logsumexp(log_energy(spec, x, beta), -1).exp()


def directional(fn, x, v):
    return jvp(fn, (x,), (v,))[1]


@pytest.mark.parametrize("space", ["sphere", "flat"])
def test_energy_rate_matches_autograd_any_heads(space):
    g = torch.Generator().manual_seed(0)
    spec = Heads(
        torch.randn(3, 4, 4, generator=g, dtype=torch.float64),
        torch.randn(3, 4, 4, generator=g, dtype=torch.float64),
        kind="softmax",
    )
    x = init.uniform(batch=2, n=6, d=4, seed=1)
    v = velocity(spec, x, 0.8, space)
    er = energy_rates(spec, x, 0.8, v, chunk=4)  # a chunk that does not divide n
    ref = directional(lambda y: log_energy(spec, y, 0.8).exp(), x, v)  # (B, H)
    # both are float64 sums of O(n^2) positive-weighted terms: 1e-11 relative
    torch.testing.assert_close(er.rate, ref, rtol=1e-11, atol=1e-13)
    torch.testing.assert_close(er.rate_total, ref.sum(-1), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("space", ["sphere", "flat"])
@pytest.mark.parametrize("combine,scale", [("sum", "1"), ("mean", "1"), ("sum", "1/n")])
def test_energy_identity_usa(space, combine, scale):
    spec = Heads.random_symmetric(
        3, 5, generator=torch.Generator().manual_seed(2), kind="usa", combine=combine, scale=scale
    )
    x = init.uniform(batch=3, n=8, d=5, seed=4)
    beta = 1.7
    v = velocity(spec, x, beta, space)
    lhs = directional(total_energy(spec, beta), x, v)
    rhs = spec.energy_identity_factor(8) * (v * v).sum((-2, -1))
    torch.testing.assert_close(lhs, rhs, rtol=1e-12, atol=0)  # an identity: rounding only


def test_log_energy_finite_at_huge_beta():
    spec = Heads.scalar([1.0, 2.0], d=3, kind="usa")
    x = init.uniform(batch=2, n=4, d=3, seed=0)
    le = log_energy(spec, x, 1e4)
    assert bool(torch.isfinite(le).all())
    # dominant term: the diagonal s_ii = λ, so log E_h ≈ βλ + log(n) - log(2βn²)
    ref = 1e4 * torch.tensor([1.0, 2.0], dtype=torch.float64) + math.log(4) - math.log(2e4 * 16)
    torch.testing.assert_close(le, ref.expand(2, 2).double(), rtol=1e-9, atol=1e-6)


def test_entropy_rate_matches_autograd():
    g = torch.Generator().manual_seed(3)
    spec = Heads(
        torch.randn(2, 4, 4, generator=g, dtype=torch.float64),
        torch.randn(2, 4, 4, generator=g, dtype=torch.float64),
        kind="softmax",
    )
    x = init.uniform(batch=2, n=5, d=4, seed=5)
    v = velocity(spec, x, 1.2)
    ref = directional(lambda y: entropy(spec, y, 1.2), x, v)
    torch.testing.assert_close(entropy_rate(spec, x, 1.2, v), ref, rtol=1e-11, atol=1e-13)


def test_entropy_bounds():
    spec = Heads.scalar([1.0], d=4)
    x = init.uniform(batch=2, n=6, d=4, seed=0)
    Hx = entropy(spec, x, 2.0)
    assert bool((Hx > 0).all()) and bool((Hx <= math.log(6) + 1e-12).all())
    torch.testing.assert_close(entropy(spec, x, 0.0), torch.full_like(Hx, math.log(6)))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.integers(2, 9), st.floats(0.05, 6.0), st.integers(0, 10**6))
def test_radial_dominance_forms_nested(H, n, beta, seed):
    g = torch.Generator().manual_seed(seed)
    spec = Heads.orthogonal_subspaces(H, 4 * H, generator=g, random_within=True, kind="usa")
    x = init.uniform(batch=8, n=n, d=4 * H, generator=g)
    rd = radial_dominance(head_outputs(spec, x, beta), x)
    assert bool((~rd.form3 | rd.form2).all())  # form 3 => form 2
    assert bool((~rd.form2 | rd.form1).all())  # form 2 => form 1


def test_form1_margin_is_per_head_energy_rate_under_orthogonality():
    spec = Heads.orthogonal_subspaces(
        2, 8, generator=torch.Generator().manual_seed(0), random_within=True, kind="usa"
    )
    x = init.uniform(batch=4, n=6, d=8, seed=9)
    f = head_outputs(spec, x, 2.0)
    v = velocity(spec, x, 2.0, f=f)
    er = energy_rates(spec, x, 2.0, v)
    torch.testing.assert_close(radial_dominance(f, x).margin1 / 6, er.rate, rtol=1e-11, atol=1e-14)


def test_cluster_statistics():
    e = torch.eye(3, dtype=torch.float64)
    x = torch.stack([e[0], e[0], e[1], e[1], e[1], e[2]])[None]  # clusters of sizes 2, 3, 1
    assert int(n_clusters(x)[0]) == 3
    assert float(cluster_fraction(x)[0]) == pytest.approx((1 + 3) / 15)
    chain = torch.tensor([[1.0, 0.0], [math.cos(0.04), math.sin(0.04)], [math.cos(0.08), math.sin(0.08)]])[
        None
    ]
    assert int(n_clusters(chain.double())[0]) == 1  # linked through the middle token
    y = init.equiangular(batch=2, n=5, d=6, gamma=0.3, seed=0)
    torch.testing.assert_close(mean_gamma(y), torch.full((2,), 0.3, dtype=torch.float64))


@pytest.mark.parametrize("space", ["sphere", "flat"])
@pytest.mark.parametrize("combine", ["sum", "mean"])
def test_perturbation_split_matches_autograd_and_floor(space, combine):
    from attnlab.dynamics import perturbation_split

    g = torch.Generator().manual_seed(3)
    base = Heads.random_symmetric(3, 5, generator=g, kind="usa", combine=combine)
    spec = base.perturb_values(0.3, generator=g)
    x = init.uniform(batch=4, n=7, d=5, generator=g)
    s = perturbation_split(spec, x, 1.5, space)
    v = velocity(spec, x, 1.5, space)
    ref = directional(total_energy(spec, 1.5), x, v)
    assert torch.allclose(s.rate, ref, rtol=1e-10, atol=1e-14)
    assert torch.allclose(s.rate, s.dissipation - s.cross)
    assert bool((s.rate >= -s.floor - 1e-14).all())
    # aligned values: no perturbation term, the Thm 11 identity
    s0 = perturbation_split(base, x, 1.5, space)
    assert float(s0.cross.abs().max()) == 0.0 and float(s0.floor.abs().max()) == 0.0
    assert torch.allclose(s0.rate, s0.dissipation)


def test_perturbation_split_rejects_softmax():
    from attnlab.dynamics import perturbation_split

    spec = Heads.scalar([1.0], d=3, kind="softmax")
    x = init.uniform(batch=1, n=4, d=3, seed=0)
    with pytest.raises(ValueError, match="usa"):
        perturbation_split(spec, x, 1.0)
