"""Initialisations: shapes, norms, Gram structure, reproducibility."""

import pytest
import torch

from attnlab.dynamics import init


def test_uniform_seeded_and_unit():
    a = init.uniform(batch=3, n=5, d=4, seed=7)
    b = init.uniform(batch=3, n=5, d=4, seed=7)
    assert a.shape == (3, 5, 4) and torch.equal(a, b)
    torch.testing.assert_close(a.norm(dim=-1), torch.ones(3, 5, dtype=torch.float64))


@pytest.mark.parametrize("gamma", [-0.2, 0.0, 0.5, 0.99])
def test_equiangular_gram(gamma):
    x = init.equiangular(batch=2, n=6, d=9, gamma=gamma, seed=1)
    G = x @ x.transpose(1, 2)
    ref = (1 - gamma) * torch.eye(6, dtype=torch.float64) + gamma
    torch.testing.assert_close(G, ref.expand(2, 6, 6), rtol=0, atol=1e-13)


def test_orthogonal():
    x = init.orthogonal(batch=2, n=4, d=6, seed=0)
    torch.testing.assert_close(
        x @ x.transpose(1, 2), torch.eye(4, dtype=torch.float64).expand(2, 4, 4), rtol=0, atol=1e-13
    )


@pytest.mark.parametrize(
    "fn,kw,match",
    [
        (init.equiangular, dict(batch=1, n=5, d=4, gamma=0.1), "d"),
        (init.equiangular, dict(batch=1, n=5, d=5, gamma=-0.5), "gamma"),
        (init.orthogonal, dict(batch=1, n=5, d=4), "d"),
        (init.uniform, dict(batch=0, n=5, d=4), "batch"),
    ],
)
def test_validation(fn, kw, match):
    with pytest.raises(ValueError, match=match):
        fn(**kw)
