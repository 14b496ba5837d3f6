"""Vector field against a naive per-head, per-token loop; chunking, fusion, scaling, stability."""

import math

import numpy as np
import pytest
import torch

from attnlab.dynamics import Heads, head_outputs, init, velocity


def naive_outputs(M, V, x, beta, kind):
    """Plain numpy double loop over heads and queries (docs/flow.md B1 written out)."""
    M, V, x = M.numpy(), V.numpy(), x.numpy()
    B, n, d = x.shape
    out = np.zeros((B, M.shape[0], n, d))
    for b in range(B):
        for h in range(M.shape[0]):
            for i in range(n):
                s = np.array([beta * x[b, i] @ M[h] @ x[b, j] for j in range(n)])
                if kind == "usa":
                    w = np.exp(s) / n
                elif kind == "softmax":
                    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                else:
                    w = np.maximum(s, 0) / n
                out[b, h, i] = sum(w[j] * (V[h] @ x[b, j]) for j in range(n))
    return out


@pytest.mark.parametrize("kind", ["usa", "softmax", "relu"])
def test_head_outputs_match_naive(kind):
    g = torch.Generator().manual_seed(1)
    M = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)  # non-symmetric on purpose
    V = torch.randn(3, 5, 5, generator=g, dtype=torch.float64)
    spec = Heads(M, V, kind=kind)
    x = init.uniform(batch=2, n=7, d=5, seed=3)
    ref = naive_outputs(M, V, x, 0.7, kind)
    for chunk in (None, 1, 3):
        got = head_outputs(spec, x, 0.7, chunk=chunk, fused=False).numpy()
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)  # same sums, float64 rounding
    if kind == "softmax":
        np.testing.assert_allclose(
            head_outputs(spec, x, 0.7, fused=True).numpy(), ref, rtol=1e-10, atol=1e-12
        )


def test_velocity_combine_scale_and_tangent():
    spec = Heads.random_symmetric(2, 4, generator=torch.Generator().manual_seed(0), kind="softmax")
    x = init.uniform(batch=3, n=6, d=4, seed=0)
    f = head_outputs(spec, x, 1.3)
    v = f.sum(1)
    flat = velocity(spec, x, 1.3, "flat")
    torch.testing.assert_close(flat, v, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(velocity(spec.replace(combine="mean"), x, 1.3, "flat"), v / 2)
    torch.testing.assert_close(velocity(spec.replace(scale="1/n"), x, 1.3, "flat"), v / 6)
    sph = velocity(spec, x, 1.3, "sphere")
    assert float((sph * x).sum(-1).abs().max()) < 1e-14  # tangent to the sphere
    torch.testing.assert_close(sph, v - (v * x).sum(-1, keepdim=True) * x)


def test_softmax_stable_at_large_beta():
    spec = Heads.scalar([1.0, 0.3], d=4, kind="softmax")
    x = init.uniform(batch=2, n=5, d=4, seed=2)
    for fused in (True, False):
        f = head_outputs(spec, x, 1e3, fused=fused)
        assert bool(torch.isfinite(f).all())
        # β -> ∞: softmax concentrates on the best-scoring key, which is the token itself (λ > 0)
        torch.testing.assert_close(f[:, 0], x, rtol=0, atol=1e-10)


def test_usa_overflow_is_refused():
    spec = Heads.scalar([1.0], d=3, kind="usa")
    x = init.uniform(batch=1, n=4, d=3, seed=0)
    assert bool(torch.isfinite(head_outputs(spec, x, 700.0)).all())  # e^700 < float64 max
    with pytest.raises(ValueError, match="beta"):
        head_outputs(spec, x, 720.0)
    with pytest.raises(ValueError, match="beta"):
        head_outputs(spec.to(dtype=torch.float32), x.float(), 100.0)


def test_chunking_avoids_full_score_tensor():
    # chunk=1 and chunk=n agree for the usa kind with large spread of maxima per row
    spec = Heads.random_symmetric(2, 3, generator=torch.Generator().manual_seed(5), scale_norm=30.0)
    x = init.uniform(batch=1, n=9, d=3, seed=5)
    torch.testing.assert_close(
        head_outputs(spec, x, 1.0, chunk=1), head_outputs(spec, x, 1.0, chunk=9), rtol=1e-13, atol=0
    )


@pytest.mark.parametrize(
    "args,match",
    [
        (dict(M=torch.zeros(2, 3, 4), V=torch.zeros(2, 3, 4)), "M"),
        (dict(M=torch.zeros(2, 3, 3), V=torch.zeros(1, 3, 3)), "V"),
        (dict(M=torch.zeros(2, 3, 3), V=torch.zeros(2, 3, 3), kind="gelu"), "kind"),
        (dict(M=torch.zeros(2, 3, 3), V=torch.zeros(2, 3, 3), combine="max"), "combine"),
    ],
)
def test_heads_validation(args, match):
    with pytest.raises(ValueError, match=match):
        Heads(**args)


def test_field_validation():
    spec = Heads.scalar([1.0], d=3)
    with pytest.raises(ValueError, match="x"):
        head_outputs(spec, torch.zeros(1, 4, 5, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match="beta"):
        head_outputs(spec, init.uniform(batch=1, n=2, d=3, seed=0), -1.0)
    with pytest.raises(ValueError, match="x"):
        head_outputs(spec, torch.full((1, 2, 3), math.nan, dtype=torch.float64), 1.0)


def test_head_constructors():
    g = torch.Generator().manual_seed(0)
    o = Heads.orthogonal_subspaces(4, 16, strength=2.0, generator=g)
    assert o.cross_norm() < 1e-12 and o.symmetric and o.aligned
    torch.testing.assert_close(o.M[0] @ o.M[0], 2.0 * o.M[0])  # λ P with P a projector
    for delta in (0.0, 1e-3, 0.1):
        a = Heads.approx_orthogonal(2, 8, delta, generator=torch.Generator().manual_seed(1))
        assert a.cross_norm() == pytest.approx(delta, abs=1e-10)
        assert a.symmetric
    p = o.perturb_values(0.1, generator=g)
    assert torch.linalg.matrix_norm(p.V - p.M, ord=2).max() == pytest.approx(0.2, rel=1e-12)
    s = Heads.scalar([1.0, 0.5], d=8, kind="softmax")
    assert s.H == 2 and s.d == 8 and s.kind == "softmax"
