"""The proximal step of the state evolution at T = 2 in the two logit differences (docs/se-accuracy.md).

With ``e0 = P z``, label probabilities ``y_a`` of column 1 and ``s_a = sigmoid(β e_a)`` the objective is
``(e − e0)ᵀ G (e − e0)/(2Σ) + 2 Σ_a (y_a − s_a)²`` (each row's two entries deviate by ±(y_a − s_a)).
:func:`newton_two` minimises it at every node by a two-dimensional Newton iteration with the 2×2 solves
written out elementwise (Gauss–Newton where the Hessian is not positive definite; Armijo backtracking per
node), on the active nodes only: a node meeting the stopping rule is written back and leaves the working
set, each coordinate a contiguous numpy vector gathered by index (boolean masks and ``where`` over randomly
mixed nodes cost several times the arithmetic); the first iterations on cache-sized blocks of nodes, the slow
rest in one batch (the same bits). Used by ``OutputChannel.prox`` at T = 2.
"""

from __future__ import annotations

import numpy as np

__all__ = ["logistic", "newton_two", "objective", "one_minimum"]


def logistic(x: np.ndarray, beta: float) -> np.ndarray:
    """The logistic function of ``β x``, overflow-free."""
    return 0.5 + 0.5 * np.tanh(0.5 * beta * x)


def objective(d0, d1, s0, s1, y0, y1, g: tuple[float, float, float]) -> np.ndarray:
    """``dᵀ G d/(2Σ) + 2 Σ_a (y_a − s_a)²`` at ``d = e − e0``; ``g`` the entries ``(g00, g01, g11)`` of
    G/Σ."""
    g00, g01, g11 = g
    r0, r1 = y0 - s0, y1 - s1
    return 0.5 * (g00 * d0 * d0 + 2 * g01 * d0 * d1 + g11 * d1 * d1) + 2 * (r0 * r0 + r1 * r1)


#: the first ``_BULK`` iterations run on blocks of ``_BLOCK`` nodes (:func:`newton_two`)
_BLOCK, _BULK = 16384, 6


def newton_two(
    en: np.ndarray,
    e0n: np.ndarray,
    yn: np.ndarray,
    g: tuple[float, float, float],
    p: tuple[float, float, float, float],
    beta: float,
    tol: float,
    max_iter: int,
) -> np.ndarray:
    """Minimise the objective at every node, in place on ``en`` (n, 2), started from it; returns the
    objective at the minimisers (n,), the value carried by the iteration (the same arithmetic as
    :func:`objective` at the final ``en``, so the same bits).

    ``e0n`` (n, 2) the centre ``P z``, ``yn`` (n, 2) the labels, ``g`` the entries of G/Σ, ``p`` the entries
    ``(p00, p01, p10, p11)`` of Σ·PB, which turn the gradient in ``e`` into the scale-free gradient in the
    row-space coordinates of ``h − z``: a node stops once its largest entry is below ``tol`` (the flat
    solver's rule).

    Every node's iteration depends on that node alone, so the nodes can be taken in any grouping with the
    same result to the bit. The first ``_BULK`` iterations, where most nodes are still active, run on blocks
    of ``_BLOCK`` nodes, whose working vectors (128 KiB each) stay in the core's cache: an addition costs
    about half what it costs on vectors of 2.4 MB (294912 nodes, the default's four scrambles). The nodes
    still active after them are gathered and finished in one batch, so the long tail of slow nodes does not
    pay the per-call cost of numpy once per block. A node's iterate, written back after the first stage, is
    where the second starts: the logistic values and the objective carried between iterations are the same
    functions of it, recomputed."""
    n = en.shape[0]
    vals = np.empty(n)
    if n <= _BLOCK or max_iter <= _BULK:
        _newton_block(en, vals, np.arange(n), e0n, yn, g, p, beta, tol, max_iter)
        return vals
    rest = [
        _newton_block(en, vals, np.arange(i, min(i + _BLOCK, n)), e0n, yn, g, p, beta, tol, _BULK)
        for i in range(0, n, _BLOCK)
    ]
    left = np.concatenate(rest)
    if left.size:
        _newton_block(en, vals, left, e0n, yn, g, p, beta, tol, max_iter - _BULK)
    return vals


def _newton_block(en, vals, rows, e0n, yn, g, p, beta, tol, max_iter) -> np.ndarray:
    """At most ``max_iter`` Newton iterations on the nodes ``rows`` of ``en`` (in place, their objective
    written to ``vals``), each node leaving once it meets the stopping rule; returns the rows still active
    at the end (those that did not meet it within ``max_iter`` iterations, unchecked after the last).

    The arithmetic is that of :func:`logistic` and :func:`objective`, operation by operation, written with
    ``out=`` buffers where a temporary would be dropped at once; the displacement ``d = e − e0``, the
    residuals ``y − s`` and the logistic values of the accepted trial point are carried into the next
    iteration (the same expressions of the same operands, so the same bits), the Armijo test's quadratic
    regime is evaluated only where the sufficient decrease fails, and the Hessian's determinant once."""
    g00, g01, g11 = g
    p00, p01, p10, p11 = p
    hb, b4, bb4 = 0.5 * beta, 4 * beta, 4 * beta**2
    tg01, bsq = 2 * g01, g01 * g01
    mul, add, sub = np.multiply, np.add, np.subtract

    def _sig(x):  # logistic(x, beta): 0.5 + 0.5 tanh((0.5 β) x)
        t = mul(hb, x)
        np.tanh(t, out=t)
        t *= 0.5
        t += 0.5
        return t

    def _value(d0, d1, r0, r1):  # objective(): 0.5 (g00 d0² + 2 g01 d0 d1 + g11 d1²) + 2 (r0² + r1²)
        v = mul(g00, d0)
        v *= d0
        t = mul(tg01, d0)
        t *= d1
        v += t
        mul(g11, d1, out=t)
        t *= d1
        v += t
        v *= 0.5
        mul(r0, r0, out=t)
        u = mul(r1, r1)
        t += u
        t *= 2
        v += t
        return v

    idx = rows
    x0, x1 = en[rows, 0], en[rows, 1]  # fancy indexing: copies
    c0, c1 = e0n[rows, 0], e0n[rows, 1]
    y0, y1 = yn[rows, 0], yn[rows, 1]
    # the displacement, logistic values, residuals and objective at the iterate, carried over from the
    # accepted trial point
    d0, d1 = x0 - c0, x1 - c1
    s0, s1 = _sig(x0), _sig(x1)
    r0, r1 = y0 - s0, y1 - s1
    val = _value(d0, d1, r0, r1)
    for _ in range(max_iter):
        ds0 = sub(1, s0)
        ds0 *= s0
        ds1 = sub(1, s1)
        ds1 *= s1
        g0 = mul(g00, d0)
        t = mul(g01, d1)
        g0 += t
        mul(b4, r0, out=t)
        t *= ds0
        g0 -= t
        g1 = mul(g01, d0)
        mul(g11, d1, out=t)
        g1 += t
        mul(b4, r1, out=t)
        t *= ds1
        g1 -= t
        gt = mul(g0, p00)
        mul(g1, p10, out=t)
        gt += t
        np.abs(gt, out=gt)
        u = mul(g0, p01)
        mul(g1, p11, out=t)
        u += t
        np.abs(u, out=u)
        np.maximum(gt, u, out=gt)
        act = np.flatnonzero(gt >= tol)
        if act.size == 0:
            en[idx, 0], en[idx, 1], vals[idx] = x0, x1, val
            return idx[:0]
        if act.size < idx.size:
            done = np.flatnonzero(gt < tol)
            en[idx[done], 0], en[idx[done], 1], vals[idx[done]] = x0[done], x1[done], val[done]
            idx = idx[act]
            x0, x1, c0, c1, y0, y1, d0, d1, s0, s1, ds0, ds1, r0, r1, g0, g1, val = (
                v.take(act) for v in (x0, x1, c0, c1, y0, y1, d0, d1, s0, s1, ds0, ds1, r0, r1, g0, g1, val)
            )
        # exact second derivatives: g00 + bb4 ds0² − bb4 r0 ds0 (1 − 2 s0) (the first two the Gauss–Newton
        # curvature of row 0's term), likewise c
        gn0 = mul(bb4, ds0)
        gn0 *= ds0
        a = add(g00, gn0)
        t = mul(bb4, r0)
        t *= ds0
        u = mul(2, s0)
        sub(1, u, out=u)
        t *= u
        a -= t
        gn1 = mul(bb4, ds1)
        gn1 *= ds1
        c = add(g11, gn1)
        mul(bb4, r1, out=t)
        t *= ds1
        mul(2, s1, out=u)
        sub(1, u, out=u)
        t *= u
        c -= t
        b = g01
        det = mul(a, c)
        det -= bsq
        bad = np.flatnonzero((a <= 0) | (det <= 0))
        if bad.size:  # Gauss–Newton there
            a[bad], c[bad] = g00 + gn0[bad], g11 + gn1[bad]
            det[bad] = a[bad] * c[bad] - bsq
        st0 = mul(b, g1)
        mul(c, g0, out=t)
        st0 -= t
        st0 /= det
        st1 = mul(b, g0)
        mul(a, g1, out=t)
        st1 -= t
        st1 /= det
        slope = mul(g0, st0)  # predicted decrease (negative)
        mul(g1, st1, out=t)
        slope += t
        # Armijo: the full step first at every node, then halving where it fails
        n0, n1 = add(x0, st0), add(x1, st1)
        ns0, ns1 = _sig(n0), _sig(n1)
        nd0, nd1 = sub(n0, c0), sub(n1, c1)
        nr0, nr1 = sub(y0, ns0), sub(y1, ns1)
        cval = _value(nd0, nd1, nr0, nr1)
        mul(1e-4, slope, out=t)
        t += val
        pend = np.flatnonzero(~(cval <= t))  # a NaN trial value fails the test, as it should
        if pend.size:
            # the quadratic regime, where the full step is taken: -slope < 1e-13 (1 + |val|)
            vp = val[pend]
            tiny = -slope[pend] < 1e-13 * (1 + np.abs(vp))
            pend = pend[~tiny]
        if pend.size:
            tt = np.ones_like(x0)
            tp = tt[pend] / 2
            for _ in range(29):
                tt[pend] = tp
                m0, m1 = x0[pend] + tp * st0[pend], x1[pend] + tp * st1[pend]
                ms0, ms1 = _sig(m0), _sig(m1)
                md0, md1 = m0 - c0[pend], m1 - c1[pend]
                mr0, mr1 = y0[pend] - ms0, y1[pend] - ms1
                cv = _value(md0, md1, mr0, mr1)
                ok = cv <= val[pend] + 1e-4 * tp * slope[pend]
                acc = pend[ok]
                ns0[acc], ns1[acc], cval[acc] = ms0[ok], ms1[ok], cv[ok]
                nd0[acc], nd1[acc], nr0[acc], nr1[acc] = md0[ok], md1[ok], mr0[ok], mr1[ok]
                if ok.all():
                    break
                pend, tp = pend[~ok], tp[~ok] / 2
            else:  # no trial accepted: the step halved once more, its values computed afresh
                tt[pend] = tp
                m0, m1 = x0[pend] + tp * st0[pend], x1[pend] + tp * st1[pend]
                ns0[pend], ns1[pend] = _sig(m0), _sig(m1)
                nd0[pend], nd1[pend] = m0 - c0[pend], m1 - c1[pend]
                nr0[pend], nr1[pend] = y0[pend] - ns0[pend], y1[pend] - ns1[pend]
                cval[pend] = _value(nd0[pend], nd1[pend], nr0[pend], nr1[pend])
            n0, n1 = x0 + tt * st0, x1 + tt * st1
            # the carried displacement is that of the accepted point (n − e0 at the halved step)
        x0, x1, s0, s1, val = n0, n1, ns0, ns1, cval
        d0, d1, r0, r1 = nd0, nd1, nr0, nr1
    en[idx, 0], en[idx, 1], vals[idx] = x0, x1, val
    return idx


def one_minimum(
    e0n: np.ndarray, vals: np.ndarray, yn: np.ndarray, g: tuple[float, float, float], beta: float
):
    """Nodes where the objective has a single local minimum below ``vals`` (a value it reaches, e.g. at the
    minimum found from ``z``): a certificate, so that a second start there cannot find a lower one.

    Every point ``e`` with objective ≤ ``F`` has ``dᵀ (G/Σ) d/2 ≤ F`` (the label term is ≥ 0), hence lies in
    the box ``|d_a| ≤ √(2F ((G/Σ)⁻¹)_aa)`` about ``e0``, and has ``2 (y_a − s_a)² ≤ F`` in each row (the
    quadratic term is ≥ 0): both are intervals of ``e_a``, so their intersection is a box. Row ``a``'s
    label term ``2 (y − s)²`` (``s`` the logistic of ``β e_a``) has second derivative
    ``4β² u (−3s² + 2(1 + y)s − y)`` with ``u = s(1 − s)``; on the box's interval of ``s`` the concave
    quadratic factor is smallest at an end and ``u`` at most its largest value there (1/4 when the interval
    holds 1/2), so ``m_a = 4β² u_max min(quadratic at the ends, 0)`` bounds that curvature from below.
    Where ``G/Σ + diag(m_0, m_1)`` is positive definite the objective is strictly convex on the (convex) box,
    which holds its whole sublevel set at ``F``: one local minimum there, the one already found.
    ``e0n`` (n, 2) the centres ``P z``, ``vals`` (n,), ``yn`` (n, 2) the labels, ``g`` the entries of G/Σ;
    returns a boolean mask (n,).

    Every node's test is its own, so the nodes are taken in blocks of ``_BLOCK`` (vectors that stay in the
    core's cache, as in :func:`newton_two`): the same mask to the bit."""
    n = e0n.shape[0]
    if n <= _BLOCK:
        return _one_minimum_block(e0n, vals, yn, g, beta)
    return np.concatenate(
        [
            _one_minimum_block(e0n[i : i + _BLOCK], vals[i : i + _BLOCK], yn[i : i + _BLOCK], g, beta)
            for i in range(0, n, _BLOCK)
        ]
    )


def _one_minimum_block(e0n, vals, yn, g, beta) -> np.ndarray:
    """:func:`one_minimum` on one block of nodes."""
    g00, g01, g11 = g
    det = g00 * g11 - g01 * g01
    F2 = 2 * np.maximum(vals, 0.0)
    m = []
    for a, inv_aa in ((0, g11 / det), (1, g00 / det)):
        r = np.sqrt(F2 * inv_aa)
        y = yn[:, a]
        # the label term alone also bounds the row's residual on the sublevel set: |y − s| ≤ √(F/2)
        band = np.sqrt(0.25 * F2)
        lo = np.maximum(logistic(e0n[:, a] - r, beta), y - band)
        hi = np.minimum(logistic(e0n[:, a] + r, beta), y + band)
        qlo = -3 * lo * lo + 2 * (1 + y) * lo - y
        qhi = -3 * hi * hi + 2 * (1 + y) * hi - y
        umax = np.where((lo <= 0.5) & (hi >= 0.5), 0.25, np.maximum(lo * (1 - lo), hi * (1 - hi)))
        m.append(4 * beta * beta * umax * np.minimum(np.minimum(qlo, qhi), 0.0))
    a0, a1 = g00 + m[0], g11 + m[1]
    return (a0 > 0) & (a0 * a1 - g01 * g01 > 0)
