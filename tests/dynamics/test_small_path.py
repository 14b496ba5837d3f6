"""The small-size path (numpy, n <= 64 on CPU) computes what the general torch path computes."""

from __future__ import annotations

import pytest
import torch

from attnlab.dynamics import Heads, init, simulate, vector_field
from attnlab.dynamics.field import SMALL_SCORES


@pytest.mark.parametrize("kind", ["usa", "softmax", "relu"])
@pytest.mark.parametrize("space", ["sphere", "flat"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_small_and_general_paths_agree(kind, space, dtype):
    spec = Heads.random_symmetric(2, 3, generator=torch.Generator().manual_seed(0), kind=kind)
    x0 = init.uniform(batch=2, n=16, d=3, seed=1, dtype=dtype)
    fn = vector_field(spec.to(dtype=dtype), 1.5, space)
    assert fn.small is not None and fn.small.applies(x0)
    general = vector_field(spec.to(dtype=dtype), 1.5, space, chunk=4)  # a chunk turns the small path off
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(fn(x0), general(x0), rtol=tol, atol=tol)
    for method in ("rk4", "euler"):
        a = simulate(spec, x0, beta=1.0, t1=0.3, dt=0.05, space=space, method=method)
        b = simulate(spec, x0, beta=1.0, t1=0.3, dt=0.05, space=space, method=method, chunk=4)
        assert a.x.dtype == dtype and a.evaluations == b.evaluations
        torch.testing.assert_close(a.x, b.x, rtol=tol, atol=tol)


def test_large_problems_take_the_general_path():
    spec = Heads.random_symmetric(4, 3, generator=torch.Generator().manual_seed(0))
    x = init.uniform(batch=8, n=128, d=3, seed=0)
    assert 8 * 4 * 128 * 128 > SMALL_SCORES
    assert not vector_field(spec, 1.0).small.applies(x)
    assert not vector_field(spec, 1.0).small.applies(x[:1, :16].clone().requires_grad_())


def test_the_small_path_refuses_an_overflowing_usa_field_as_the_general_one_does():
    spec = Heads.random_symmetric(1, 3, generator=torch.Generator().manual_seed(0), kind="usa")
    x = init.uniform(batch=1, n=8, d=3, seed=0) * 40.0
    for fn in (vector_field(spec, 1000.0, "flat"), vector_field(spec, 1000.0, "flat", chunk=4)):
        with pytest.raises(ValueError, match="beta: expected beta \\* max score below"):
            fn(x)
