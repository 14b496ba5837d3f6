"""Quadrature rules for the spectral integrals of paper C (angle-mapped Gauss–Legendre).

Integrands of the free-convolution laws have square-root behaviour at the edges of their support; the angle
map ``x = a + (b − a)(1 − cos θ)/2`` makes Gauss–Legendre exact for such edges. Composite rules split an
interval at interior break points (atoms, necks, cusps).
"""

from __future__ import annotations

import functools
import math

import numpy as np

NODES = 192  # default nodes per support interval (see ConvolvedLaw.nodes)


@functools.lru_cache(maxsize=64)
def _leggauss(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [−1, 1] (cached; treat as read-only)."""
    return np.polynomial.legendre.leggauss(n)


def _angle_nodes(a: float, b: float, n: int = NODES) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights on [a, b] for integrands with square-root behaviour at both ends."""
    gx, gw = _leggauss(n)
    theta = (gx + 1.0) * (math.pi / 2)  # (n,) in (0, π)
    x = a + (b - a) * (1.0 - np.cos(theta)) / 2
    w = gw * (math.pi / 2) * (b - a) * np.sin(theta) / 2
    return x, w


def composite_nodes(lo: float, hi: float, inner: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss–Legendre on [lo, hi] split at ``inner``; one-sided angle maps on the two end pieces
    (square-root behaviour at the outer edges, smooth at the inner break points)."""
    brk = np.unique(np.concatenate([[lo], np.asarray(inner, dtype=float), [hi]]))
    brk = brk[(brk >= lo) & (brk <= hi)]
    if brk.size == 2:
        return _angle_nodes(lo, hi, n)
    m = max(16, n // 4)
    gx, gw = np.polynomial.legendre.leggauss(m)
    xs, ws = [], []
    last = brk.size - 2
    phi = (gx + 1.0) * (math.pi / 4)  # (m,) in (0, π/2)
    for i in range(brk.size - 1):
        a, b = brk[i], brk[i + 1]
        if i == 0:
            xs.append(a + (b - a) * (1.0 - np.cos(phi)))
            ws.append(gw * (math.pi / 4) * (b - a) * np.sin(phi))
        elif i == last:
            xs.append(b - (b - a) * (1.0 - np.cos(phi)))
            ws.append(gw * (math.pi / 4) * (b - a) * np.sin(phi))
        else:
            xs.append(a + (b - a) * (gx + 1) / 2)
            ws.append(gw * (b - a) / 2)
    return np.concatenate(xs), np.concatenate(ws)


def graded_nodes(lo: float, hi: float, inner: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite quadrature on [lo, hi] split at ``inner``, every piece angle-mapped at both ends (nodes
    cluster quadratically at every break point, so square-root edges, narrow necks between support pieces
    and a break point placed close to an outer edge are all integrated accurately)."""
    brk = np.unique(np.concatenate([[lo], np.asarray(inner, dtype=float), [hi]]))
    brk = brk[(brk >= lo) & (brk <= hi)]
    if brk.size == 2:
        return _angle_nodes(lo, hi, n)
    m = max(32, n // 6)
    a, b = brk[:-1], brk[1:]
    keep = b > a
    a, b = a[keep], b[keep]
    # _angle_nodes(a, b, m) on every piece at once (the same arithmetic, in the same order)
    gx, gw = _leggauss(m)
    theta = (gx + 1.0) * (math.pi / 2)  # (m,)
    x = a[:, None] + (b - a)[:, None] * (1.0 - np.cos(theta))[None, :] / 2
    w = (gw * (math.pi / 2))[None, :] * (b - a)[:, None] * np.sin(theta)[None, :] / 2
    return x.reshape(-1), w.reshape(-1)
