"""The per-node terms of the output channel (attnlab.highdim.channel.node_terms) and their row products."""

from __future__ import annotations

import numpy as np
import torch

from attnlab.highdim import OutputChannel, Setting
from attnlab.highdim.channel import _rowdot


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
