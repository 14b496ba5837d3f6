"""Paper-B quantities on real-shaped heads against direct d×d computations and explicit loops."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.diagnose import attention_entropy, cross_products, flow_defects, radial_dominance


def _heads(seed: int, H: int = 4, d: int = 24, k: int = 5):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    return r(H, d, k), r(H, d, k), r(H, d, k), r(H, k, d)


def test_flow_defects_against_dense() -> None:
    WQ, WK, WV, WO = _heads(0)
    s = 0.3
    fd = flow_defects(WQ, WK, WV, WO, s)
    for h in range(4):
        M = s * WQ[h].numpy() @ WK[h].numpy().T
        V = (WV[h].numpy() @ WO[h].numpy()).T
        sym = np.linalg.norm(M - M.T) / (2 * np.linalg.norm(M))
        cos = np.sum(V * M) / (np.linalg.norm(V) * np.linalg.norm(M))
        dv = np.linalg.norm(V / np.linalg.norm(V) - M / np.linalg.norm(M)) / 2
        # trace identities vs dense sums in float64: agreement to ~1e-14; 1e-10 is generous
        np.testing.assert_allclose(
            [fd.sym_defect[h], fd.value_cos[h], fd.value_defect[h]], [sym, cos, dv], rtol=1e-10
        )


def test_flow_defects_limits() -> None:
    WQ, _, _, _ = _heads(1)
    # symmetric M (W_K = W_Q) with V = M (W_V W_O = s W_Q W_Qᵀ): both defects vanish
    s = 0.5
    WO = s * WQ.transpose(-1, -2)
    fd = flow_defects(WQ, WQ, WQ, WO, s)
    np.testing.assert_allclose(fd.sym_defect.numpy(), 0.0, atol=1e-7)  # sqrt of a ~1e-16 cancellation
    np.testing.assert_allclose(fd.value_cos.numpy(), 1.0, rtol=1e-12)


def test_cross_products_against_dense() -> None:
    WQ, WK, _, _ = _heads(2)
    c = cross_products(WQ, WK)
    Ms = [WQ[h].numpy() @ WK[h].numpy().T for h in range(4)]
    op = [np.linalg.norm(M, 2) for M in Ms]
    for g in range(4):
        for h in range(4):
            ref = np.linalg.norm(Ms[g] @ Ms[h], 2) / (op[g] * op[h])
            np.testing.assert_allclose(c[g, h].item(), ref, rtol=1e-9)


def test_cross_products_orthogonal_heads_vanish() -> None:
    # heads living in mutually orthogonal coordinate blocks: M_g M_h = 0 for g ≠ h
    H, k, d = 3, 4, 12
    E = torch.eye(d, dtype=torch.float64)
    W = torch.stack([E[:, h * k : (h + 1) * k] * (h + 1.0) for h in range(H)])  # (H, d, k)
    c = cross_products(W, W)
    off = c[~torch.eye(H, dtype=torch.bool)]
    assert float(off.abs().max()) < 1e-12
    np.testing.assert_allclose(c.diagonal().numpy(), 1.0, rtol=1e-12)


def _radial_loop(x, WQ, WK, WV, WO, s):
    """Direct per-token evaluation of docs/flow.md B3 in numpy (column convention)."""
    X = x / np.linalg.norm(x, axis=1, keepdims=True)
    H, n = WQ.shape[0], X.shape[0]
    f = np.zeros((H, n, X.shape[1]))
    for h in range(H):
        M = s * WQ[h] @ WK[h].T
        V = (WV[h] @ WO[h]).T
        for i in range(n):
            sc = np.array([X[i] @ M @ X[j] for j in range(n)])
            p = np.exp(sc - sc.max())
            p /= p.sum()
            f[h, i] = sum(p[j] * (V @ X[j]) for j in range(n))
    a = np.einsum("hid,id->hi", f, X)
    perp = f - a[..., None] * X[None]
    pn = (perp**2).sum(-1)
    form1, form2, form3 = [], [], []
    for h in range(H):
        oth = [g for g in range(H) if g != h]
        form1.append(pn[h].sum() >= sum(a[h, i] * a[g, i] for i in range(n) for g in oth))
        form2.append(all(pn[h, i] >= sum(abs(a[h, i] * a[g, i]) for g in oth) for i in range(n)))
        form3.append(
            all(pn[h, i] >= np.linalg.norm(f[h, i]) * sum(abs(a[g, i]) for g in oth) for i in range(n))
        )
    return pn, a, form1, form2, form3


def test_radial_dominance_against_loop() -> None:
    WQ, WK, WV, WO = _heads(3, H=3, d=10, k=4)
    x = torch.randn(7, 10, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    # scale the values so that the forms do not all hold trivially
    for s, vs in [(0.4, 1.0), (2.0, 3.0), (1.0, 0.05)]:
        rd = radial_dominance(x, WQ, WK, WV * vs, WO, s)
        pn, a, f1, f2, f3 = _radial_loop(x.numpy(), WQ.numpy(), WK.numpy(), (WV * vs).numpy(), WO.numpy(), s)
        np.testing.assert_allclose(rd.perp_sq.numpy(), pn, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(rd.radial.numpy(), a, rtol=1e-10, atol=1e-14)
        assert rd.form1.tolist() == f1 and rd.form2.tolist() == f2 and rd.form3.tolist() == f3


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.05, 5.0), st.floats(0.01, 3.0))
def test_radial_forms_are_nested(seed: int, s: float, vs: float) -> None:
    """Form 3 implies form 2 implies form 1 (docs/flow.md B3), at every configuration."""
    WQ, WK, WV, WO = _heads(seed, H=3, d=8, k=3)
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    rd = radial_dominance(x, WQ, WK, WV * vs, WO, s)
    assert bool((~rd.form3 | rd.form2).all()) and bool((~rd.form2 | rd.form1).all())
    assert bool((rd.form3_tokens <= rd.form2_tokens + 1e-15).all())


def test_attention_entropy() -> None:
    from scipy.stats import entropy

    g = torch.Generator().manual_seed(4)
    p = torch.softmax(torch.randn(2, 3, 5, 5, generator=g, dtype=torch.float64), -1)
    e = attention_entropy(p)
    ref = np.array(
        [[np.mean([entropy(p[b, h, i].numpy()) for i in range(5)]) for h in range(3)] for b in range(2)]
    )
    np.testing.assert_allclose(e.entropy.numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(e.max_entropy.numpy(), np.log(5), rtol=1e-15)
    uniform = attention_entropy(torch.full((4, 4), 0.25, dtype=torch.float64))
    assert abs(float(uniform.ratio) - 1.0) < 1e-14
    causal = torch.tril(torch.ones(4, 4, dtype=torch.float64))
    causal = causal / causal.sum(-1, keepdim=True)  # uniform over the visible keys
    ec = attention_entropy(causal)
    assert abs(float(ec.ratio) - 1.0) < 1e-14
    assert abs(float(ec.max_entropy) - np.mean(np.log([1, 2, 3, 4]))) < 1e-14
