"""The per-node terms of the output channel (attnlab.highdim.channel.node_terms) and their row products."""

from __future__ import annotations

import numpy as np
import torch

from attnlab.highdim import OutputChannel, Setting
from attnlab.highdim.channel_rows import rowdot as _rowdot


def test_rowdot_is_einsum_to_the_bit():
    # _rowdot sums a0 b0 + a1 b1 + a2 b2 left to right over numpy's column views at K = 3: the order of
    # torch's einsum nk,nk->n, so equal to the bit (another order, e.g. a0 b0 + (a1 b1 + a2 b2), differs in
    # the last bit on a fraction of rows of these data); other K go through einsum itself. The operands
    # are those of node_terms: h − z against v and w at the proximal minimisers of a T = 2 channel
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-3)
    ch = OutputChannel(s, 4096, seed=1, rule="sobol")
    z = ch.z_of(2.859, 1.748)
    h, _ = ch.prox_best(z, 14.86)
    dz = h - z
    for x in (dz, ch.v, ch.w):
        assert torch.equal(_rowdot(dz, x), torch.einsum("nk,nk->n", dz, x))
    g = torch.Generator().manual_seed(0)
    a, b = (
        torch.randn(4096, 6, dtype=torch.float64, generator=g),
        torch.randn(4096, 6, dtype=torch.float64, generator=g),
    )
    assert torch.equal(_rowdot(a, b), torch.einsum("nk,nk->n", a, b))
    # and the products themselves, against an independent sum in extended precision (1e-15: three rounded
    # products and two rounded additions of terms of order one)
    ref = (dz.numpy().astype(np.longdouble) * ch.v.numpy().astype(np.longdouble)).sum(-1)
    assert np.max(np.abs(_rowdot(dz, ch.v).numpy() - ref.astype(float))) < 1e-15 * (1 + np.abs(ref).max())


def test_two_token_terms_and_logits_are_the_general_path_to_the_bit(monkeypatch):
    # at T = 2 node_terms and z_of run numpy on row blocks; every operation is the one of the general torch
    # expressions (written out here as the former code had them), so the terms and logits are equal to the
    # bit: on all nodes and on a subset of rows, with blocks of 256 rows (16 of them on these 4096 nodes, so
    # a block that read another block's rows or a coefficient applied to the wrong product would show)
    import attnlab.highdim.channel_rows as chr_

    monkeypatch.setattr(chr_, "ROWS", 256)
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-3)
    ch = OutputChannel(s, 4096, seed=2, rule="sobol")
    q, m, sg, a = 2.859, 1.748, 14.86, 0.3
    av, sw, bv, bw = ch._coefficients(q, m)
    z = ch.z_of(q, m)
    assert torch.equal(z, av * ch.v + sw * ch.w)
    h, M = ch.prox_best(z, sg)
    q0 = s.q0
    cm = 2 * a / (sg * (q0 * q - m * m))
    for rows in (None, torch.arange(7, 4096, 3)):
        zr, hr, Mr = (z, h, M) if rows is None else (z[rows], h[rows], M[rows])
        v, w = (ch.v, ch.w) if rows is None else (ch.v[rows], ch.w[rows])
        dz = hr - zr
        dd, dv, dw = (torch.einsum("nk,nk->n", dz, x) for x in (dz, v, w))
        ref = torch.stack(
            [
                (2 * a / sg**2) * dd,
                cm * ((q * bv - m * av) * dv + (q * bw - m * sw) * dw),
                -cm * ((q0 * av - m * bv) * dv + (q0 * sw - m * bw) * dw),
                Mr,
            ],
            -1,
        )
        assert torch.equal(ch.node_terms(q, m, sg, a, zr, hr, Mr, rows=rows), ref)
