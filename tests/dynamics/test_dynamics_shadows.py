"""Radial-shadow counts against a per-head central difference of E_h, and the general radial dominance."""

import numpy as np
import torch

from attnlab.diagnose import radial_dominance as diag_radial
from attnlab.dynamics import Heads, head_outputs, init, log_energy, radial_dominance, shadow_counts, velocity


def test_shadow_counts_against_central_differences():
    c = shadow_counts(2, 8, 6, 4.0, "sphere", random_within=True, draws=2, batch=64,
                      generator=torch.Generator().manual_seed(0))  # fmt: skip
    # replay the same draws and count falling per-head energies by central differences of log E_h
    g = torch.Generator().manual_seed(0)
    fell = 0
    for _ in range(2):
        spec = Heads.orthogonal_subspaces(2, 8, generator=g, random_within=True, kind="usa")
        x = init.uniform(batch=64, n=6, d=8, generator=g)
        v = velocity(spec, x, 4.0, "sphere")
        h = 1e-6
        dlog = (log_energy(spec, x + h * v, 4.0) - log_energy(spec, x - h * v, 4.0)) / (2 * h)  # (B, H)
        fell += int((dlog < -1e-7).any(-1).sum())  # margins ~1e-9 are within the FD error; none here
    assert abs(c.viol - fell) <= 1 and c.trials == 128 and c.agree == 128
    assert c.f3 <= c.f2 <= c.f1 <= c.trials
    flat = shadow_counts(2, 8, 6, 4.0, "flat", random_within=True, draws=1, batch=64,
                         generator=torch.Generator().manual_seed(1))  # fmt: skip
    assert flat.viol == 0  # flat space: per-head energy is monotone under orthogonality
    opposed = shadow_counts(2, 8, 6, 1.0, "flat", random_within=True, draws=2, batch=256,
                            generator=torch.Generator().manual_seed(1), orthogonal=False)  # fmt: skip
    assert opposed.viol > 0  # M_2 = −M_1: the cross term <f^1, f^2> makes a per-head energy fall


def test_radial_dominance_leading_dims_and_one_implementation():
    g = torch.Generator().manual_seed(3)
    f = torch.randn(2, 3, 4, 5, 6, generator=g, dtype=torch.float64)  # (L, B, H, n, d)
    x = torch.nn.functional.normalize(torch.randn(2, 3, 5, 6, generator=g, dtype=torch.float64), dim=-1)
    rd = radial_dominance(f, x)
    for i in range(2):
        one = radial_dominance(f[i], x[i])
        assert torch.equal(one.form1, rd.form1[i]) and torch.equal(one.form3, rd.form3[i])
        np.testing.assert_allclose(one.form2_tokens.numpy(), rd.form2_tokens[i].numpy())
    # the diagnose package evaluates the forms through this function: same results on a softmax field
    H, d, k = 3, 6, 2
    WQ, WK, WV = (torch.randn(H, d, k, generator=g, dtype=torch.float64) for _ in range(3))
    WO = torch.randn(H, k, d, generator=g, dtype=torch.float64)
    X = x[0, 0]  # (n, d) unit tokens
    M = 0.5 * WQ @ WK.transpose(1, 2)  # (H, d, d)
    V = (WV @ WO).transpose(1, 2)
    spec = Heads(M, V, kind="softmax")
    ref = radial_dominance(head_outputs(spec, X[None], 1.0, fused=False), X[None])
    got = diag_radial(X, WQ, WK, WV, WO, 0.5)
    assert torch.equal(got.form1, ref.form1[0]) and torch.equal(got.form3, ref.form3[0])
    np.testing.assert_allclose(got.radial.numpy(), ref.radial[0].numpy(), rtol=1e-12, atol=1e-14)
