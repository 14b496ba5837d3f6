"""Elementwise work of the output channel at T = 2 on cache-sized row blocks (numpy), each operation the one
of the general torch expression in :mod:`attnlab.highdim.channel` in the same order, so the same bits: the
logits ``z``, the per-node terms of the output equations and their row products."""

from __future__ import annotations

import numpy as np
import torch

#: rows per block of the elementwise work at T = 2 (:func:`terms_two`, :func:`combine_two`): vectors that stay
#: in the core's cache, as in :mod:`attnlab.highdim.prox_two`
ROWS = 16384


def terms_two(h, z, v, w, M, c0, c1, k1, c2, k2) -> torch.Tensor:
    """:meth:`~attnlab.highdim.channel.OutputChannel.node_terms` at T = 2 (K = 3), (n, 4): with
    ``dz = h − z``, ``(c0·dz·dz, c1·(k1[0]·dz·v + k1[1]·dz·w), c2·(k2[0]·dz·v + k2[1]·dz·w), M)``, every row
    product summed left to right as :func:`rowdot` (torch's einsum order) and every operation the one of the
    general path, on cache-sized row blocks: the same bits."""
    hn, zn, vn, wn, Mn = h.numpy(), z.numpy(), v.numpy(), w.numpy(), M.numpy()
    n = hn.shape[0]
    out = np.empty((n, 4))
    for i in range(0, n, ROWS):
        sl = slice(i, i + ROWS)
        hb, zb, vb, wb = hn[sl], zn[sl], vn[sl], wn[sl]
        d0, d1, d2 = hb[:, 0] - zb[:, 0], hb[:, 1] - zb[:, 1], hb[:, 2] - zb[:, 2]
        dd = d0 * d0
        dd += d1 * d1
        dd += d2 * d2
        dv = d0 * vb[:, 0]
        dv += d1 * vb[:, 1]
        dv += d2 * vb[:, 2]
        dw = d0 * wb[:, 0]
        dw += d1 * wb[:, 1]
        dw += d2 * wb[:, 2]
        o = out[sl]
        o[:, 0] = c0 * dd
        o[:, 1] = c1 * (k1[0] * dv + k1[1] * dw)
        o[:, 2] = c2 * (k2[0] * dv + k2[1] * dw)
        o[:, 3] = Mn[sl]
    return torch.from_numpy(out)


def rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise dot products of two (n, K) tensors, (n,). At K = 3 (T = 2) the sum ``a0 b0 + a1 b1 + a2 b2``
    over numpy's column views, left to right: the same sum in the same order as torch's einsum
    ``nk,nk->n`` (so the same bits) at about half its cost (einsum, in turn, costs 0.4 of
    ``(a * b).sum(-1)``); other K by einsum."""
    if a.shape[-1] != 3:
        return torch.einsum("nk,nk->n", a, b)
    an, bn = a.numpy(), b.numpy()
    out = an[:, 0] * bn[:, 0]
    out += an[:, 1] * bn[:, 1]
    out += an[:, 2] * bn[:, 2]
    return torch.from_numpy(out)


def combine_two(a: float, v: torch.Tensor, b: float, w: torch.Tensor) -> torch.Tensor:
    """``a·v + b·w`` elementwise for (N, K) tensors, on row blocks of :data:`ROWS` (the same bits)."""
    vn, wn = v.numpy(), w.numpy()
    out = np.empty_like(vn)
    for i in range(0, vn.shape[0], ROWS):
        o = out[i : i + ROWS]
        np.multiply(a, vn[i : i + ROWS], out=o)
        o += b * wn[i : i + ROWS]
    return torch.from_numpy(out)
