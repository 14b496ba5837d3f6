"""The accurate state evolution: a pilot fixed point refined on independent scrambles (docs/se-accuracy.md).

The fixed point ``x = F(x)`` of :mod:`attnlab.highdim.fixed_point` depends on the nodes of the output
expectation through ``F``. Solving it on ``R`` independently scrambled node sets and averaging (what
:func:`~attnlab.highdim.scrambles.average_fixed_points` does) costs ``R`` whole solves. Here the
solve is done once, on a small pilot set of nodes, and each scramble's fixed point is then reached by
Newton steps on ``G(y) = Y(F(x(y))) − y`` (the unconstrained coordinates of
:func:`~attnlab.highdim.fixed_point.to_y`) with the Jacobian ``J`` of the mean map (all scrambles):

    ``y_r = ȳ − J⁻¹ G_r(ȳ)``,  ``ȳ ← mean_r y_r``,

every scramble evaluated at the same ``ȳ``, all scrambles' nodes in one batch of proximal steps: cold (the
two starts of :meth:`~attnlab.highdim.channel.OutputChannel.prox_best`) at the pilot point, then each of
the two branches followed from its previous solution, the lower taken at every node. ``J`` is a forward
difference of the mean map over a step of 2e-3 (:func:`_mean_jacobians`), updated by Broyden's formula
between rounds. A difference with a small step, or on the pilot's nodes with each branch followed, misses
the motion of the set where the two minima tie: near the small-λ̃ peak (λ̃ = 1e-4, α = 0.25) that motion
flattens the map several-fold, and a Jacobian without it made the standard error four times too small.
Each round's step is shortened (halved up to three times) until it lowers ``‖mean G‖`` (:func:`_line_search`):
where the map is nearly singular the full chord step from a distant pilot overshoots and the rounds oscillate.
The rounds stop when the mean moves by less than a fifth of its standard error (or than ``tol``); the
scramble points ``y_r`` of the last round are the linearisations of each scramble's own fixed point about
``ȳ``, so their spread over ``√R`` is the randomised quasi-Monte Carlo standard error of the fixed point
itself (the quadrature error carried through the fixed-point map), and their mean is the reported point.
Being linear in ``G_r``, their mean is the linearisation of the mean map's fixed point: no bias from
averaging nonlinear solves. The hats and ``E[M]`` of each scramble are linearised alike (their Jacobian
from the same differences), so the training loss and the spectral parameters of each scramble point follow
from its own hats; the test error at T = 2 is the Gauss–Hermite rule of
:func:`~attnlab.highdim.two_token.two_token_test_error` at each scramble's ``(q, m)`` (its own quadrature
error ~1e-8; its standard error is the fixed point's, propagated).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from attnlab.highdim.channel import OutputChannel
from attnlab.highdim.fixed_point import MAX_STEP, FixedPoint, _train_loss, prior_equations, to_x, to_y
from attnlab.highdim.setting import Setting
from attnlab.highdim.spectra import J_and_derivatives
from attnlab.highdim.two_token import two_token_test_error

__all__ = ["refine", "stack_channels"]

_FD_STEP = 2e-3  # forward-difference step of the mean map in y (module docstring, :func:`_mean_jacobians`)
_JAC_SHARE = 4  # the difference Jacobian on a quarter of each scramble at λ̃ ≥ 1e-3 (:func:`_jacobian_nodes`)
_JAC_MIN = 8192  # … but on at least this many of them (all of a smaller scramble)
_MAX_ROUNDS = 6
_BACKTRACK = 3  # halvings of a round's step that does not lower ‖mean G‖ (:func:`_line_search`)
_SETTLE = 0.2  # the rounds stop once the mean moves by less than this many of its standard errors


def stack_channels(chans: list[OutputChannel]) -> tuple[OutputChannel, list[int]]:
    """One channel holding the nodes of all ``chans`` (same setting) and the node count of each."""
    first = chans[0]
    out = object.__new__(OutputChannel)
    out.__dict__.update(first.__dict__)
    for k in ("v", "w", "u", "y", "_target"):
        setattr(out, k, torch.cat([getattr(c, k) for c in chans]))
    sizes = [c.N for c in chans]
    # each scramble's weights (or 1/N each): the stacked weights sum to 1 on each scramble's block
    out.weights = torch.cat(
        [
            c.weights if c.weights is not None else torch.full((c.N,), 1.0 / c.N, dtype=c.v.dtype)
            for c in chans
        ]
    )
    out.N = sum(sizes)
    return out, sizes


def _hats_per_scramble(ch, sizes, x, alpha, starts=None, weights=None):
    """``(q̂, m̂, Σ̂, E[M])`` of each scramble at ``x``, (R, 4), and the two branches' solutions.

    ``starts`` None: the two cold starts of :meth:`OutputChannel.prox_best` (``z`` and the interpolating
    point); else the two branches' solutions of the previous round, each followed from where it was (the
    same local minima a little further on, a few Newton steps instead of a solve). Either way the lower of
    the two is taken at every node. Where the two branches sit at the same point (to 1e-9), following them
    is one proximal step, done once: away from the small-λ̃ peak almost every node has a single minimum, so
    this halves the cost of a followed evaluation. ``weights``: the nodes' weights in their scramble's sum
    (default the channel's)."""
    q, m, sg = (float(v) for v in x)
    z = ch.z_of(q, m)
    if starts is None:
        hA, vA, hB, vB = ch.prox_two_starts(z, sg)
    else:
        a0, b0 = starts
        hA, vA = ch.prox(z, sg, h0=a0)
        apart = (a0 - b0).abs().amax(-1) > 1e-9 * (1 + a0.abs().amax(-1))
        rows = torch.nonzero(apart).flatten()
        hB, vB = hA.clone(), vA.clone()
        if rows.numel():
            hB[rows], vB[rows] = ch.prox(z[rows], sg, h0=b0[rows], rows=rows)
    low = vB < vA
    h, M = torch.where(low.unsqueeze(-1), hB, hA), torch.where(low, vB, vA)
    w = ch.weights if weights is None else weights
    terms = ch.node_terms(q, m, sg, alpha, z, h, M)  # (N, 4)
    return _sums(w[:, None] * terms, sizes), (hA, hB), terms


def _sums(t, sizes) -> np.ndarray:
    """Per-scramble sums of weighted node values ``t`` (N, 4): (R, 4)."""
    return np.array([p.sum(0).numpy() for p in torch.split(t, sizes)])


def _g(setting, hats, y) -> np.ndarray | None:
    """``G(y)`` from the hats at ``x(y)``, or None outside the prior equations' domain."""
    qh, mh, sh = hats[:3]
    if not (qh > 0 and mh > 0 and sh > 0):
        return None
    try:
        fq, fm, fs, _, _ = prior_equations(setting, qh, mh, sh)
    except ValueError:
        return None
    fx = np.array([fq, fm, fs])
    if not np.all(np.isfinite(fx)) or fx[0] <= 0 or fx[2] <= 0:
        return None
    return to_y(setting.q0, fx) - y


def _jacobian_nodes(setting: Setting, chans: list[OutputChannel], sizes: list[int]):
    """The nodes of the difference Jacobian, stacked, with their rows in the stacked channel of all
    scrambles: at λ̃ ≥ 1e-3 the first quarter of each scramble's nodes, at least ``_JAC_MIN`` (whole label
    nodes; a prefix of a scrambled Sobol sequence is itself a balanced set); below, where the motion of the
    tie between the two proximal minima shapes the Jacobian and a quarter of the nodes moved the error bar
    of Σ by a quarter (docs/se-accuracy.md), all of them."""
    share = _JAC_SHARE if setting.lam >= 1e-3 else 1
    heads = [c.head(max(c.N // share, min(c.N, _JAC_MIN))) for c in chans]
    sub, sub_sizes = stack_channels(heads)
    offsets = np.cumsum([0, *sizes[:-1]])
    rows = torch.cat([torch.arange(h.N) + int(o) for h, o in zip(heads, offsets)])
    return sub, sub_sizes, rows


def _mean_jacobians(setting, alpha, chans, sizes, y0, terms0, branches):
    """Forward-difference Jacobians of the mean map's ``G`` (3, 3) and of its hats with ``E[M]`` (4, 3) at
    ``y0``, each branch followed from its solution at ``y0`` and the lower taken at every node; None where
    the map fails. The step is large enough (``_FD_STEP``) that the nodes crossing the tie between the two
    minima within it sample the motion of that set, which the derivative of either branch misses and which
    flattens the map near the small-λ̃ peak. The differences are taken on the nodes of
    :func:`_jacobian_nodes` (at λ̃ ≥ 1e-3 a quarter of every scramble's): the Jacobian steers the steps and
    scales the error bar, it does not enter the point (a settled solve has ``mean G ≈ 0``), and a quarter of
    the nodes moves the point by ≤ 0.02 and the error bars by ≤ 4% (docs/se-accuracy.md). ``terms0``: the
    per-node terms at ``y0`` on all nodes."""
    q0 = setting.q0
    sub, sub_sizes, rows = _jacobian_nodes(setting, chans, sizes)
    H0 = _sums(sub.weights[:, None] * terms0[rows], sub_sizes)
    G0 = [_g(setting, h, y0) for h in H0]
    if any(g is None for g in G0):
        return None
    G0, H0 = np.mean(G0, 0), H0.mean(0)
    sub_branches = (branches[0][rows], branches[1][rows])
    JG, JH = np.empty((3, 3)), np.empty((4, 3))
    for j in range(3):
        y = y0.copy()
        y[j] += _FD_STEP
        H, _, _ = _hats_per_scramble(sub, sub_sizes, to_x(q0, y), alpha, sub_branches)
        G = [_g(setting, h, y) for h in H]
        if any(g is None for g in G):
            return None
        JG[:, j] = (np.mean(G, 0) - G0) / _FD_STEP
        JH[:, j] = (H.mean(0) - H0) / _FD_STEP
    return JG, JH


def refine(
    setting: Setting,
    alpha: float,
    pilot_fp: FixedPoint,
    chans: list[OutputChannel],
    tol: float,
) -> tuple[list[FixedPoint], bool] | None:
    """The fixed points of the scrambles ``chans`` reached from ``pilot_fp`` (module docstring), one per
    scramble, each with its own hats, training loss and test error, and whether the rounds settled (within
    ``_MAX_ROUNDS``; else the last round's points); None when the steps fail (the map undefined on the way,
    a singular Jacobian) or a scramble's linearised point cannot be reported (its hats outside the prior
    equations' domain ``q̂, m̂, Σ̂ > 0`` or a field not finite: the linearisation about ``ȳ`` does not reach
    it), for the caller to fall back on whole solves."""
    q0 = setting.q0
    ybar = to_y(q0, np.array([pilot_fp.q, pilot_fp.m, pilot_fp.sigma]))
    big, sizes = stack_channels(chans)
    r = len(chans)
    H, branches, terms = _hats_per_scramble(big, sizes, to_x(q0, ybar), alpha)  # (R, 4), cold starts
    Gs = [_g(setting, h, ybar) for h in H]
    if any(g is None for g in Gs):
        return None
    Gs = np.array(Gs)  # (R, 3)
    jac = _mean_jacobians(setting, alpha, chans, sizes, ybar, terms, branches)
    if jac is None:
        return None
    JG, JH = jac
    settled, rounds = False, 1
    while True:
        try:
            Jinv = np.linalg.inv(JG)
        except np.linalg.LinAlgError:
            return None
        ys = ybar - Gs @ Jinv.T  # (R, 3): each scramble's fixed point, linearised about ybar
        new = ys.mean(0)
        se = ys.std(0, ddof=1) / math.sqrt(r)
        if not np.all(np.isfinite(new)):
            return None
        if np.all(np.abs(new - ybar) <= np.maximum(_SETTLE * se, tol)):
            settled = True
            break
        if rounds >= _MAX_ROUNDS:
            break
        last = (ybar, Gs.mean(0), H.mean(0))
        got = _line_search(setting, alpha, big, sizes, ybar, new - ybar, Gs, branches)
        if got is None:
            return None
        ybar, H, branches, Gs = got
        rounds += 1
        # Broyden's update of both Jacobians from the secant of the mean map between rounds
        dy = ybar - last[0]
        den = float(dy @ dy)
        if den > 0:
            JG = JG + np.outer(Gs.mean(0) - last[1] - JG @ dy, dy) / den
            JH = JH + np.outer(H.mean(0) - last[2] - JH @ dy, dy) / den
    out = []
    for k in range(r):
        dy = ys[k] - ybar
        hats = H[k] + JH @ dy  # the scramble's hats and E[M] at its own fixed point, linearised
        if not (np.all(np.isfinite(hats)) and np.all(hats[:3] > 0)):
            # the linearisation left the prior equations' domain (q̂, m̂, Σ̂ > 0): far from ȳ, no point to report
            return None
        x = to_x(q0, ys[k])
        try:
            fp = _point(setting, alpha, chans[k], x, hats, pilot_fp, rounds)
        except ValueError:  # hats that put δ below the convolution's resolution floor: no point to report
            return None
        if not all(math.isfinite(v) for v in (*fp.params, fp.test_error, fp.train_loss, fp.rank_fraction)):
            return None
        out.append(fp)
    return out, settled


def _line_search(setting, alpha, big, sizes, ybar, step, Gs, branches):
    """The next round's point ``ȳ + t·step`` (``t`` = 1, 1/2, 1/4, 1/8; ``step`` capped at ``MAX_STEP`` in
    every coordinate) with its hats, branches and ``G`` per scramble: the first ``t`` that lowers ``‖mean G‖``
    (Armijo), else the shortest one where the map is defined. Where the map is nearly singular (an eigenvalue
    of ``F`` near 1, as at β = β0 = 2, α = 1, λ̃ = 1e-2) the full chord step from a pilot that the
    quadrature error puts far from the scrambles' fixed points overshoots by half the pilot's offset and
    the rounds oscillate; the shortened step keeps them on the way down. None when the map is undefined at
    every trial."""
    step = step * min(1.0, MAX_STEP / max(float(np.max(np.abs(step))), 1e-300))
    g0, t, best = float(np.linalg.norm(Gs.mean(0))), 1.0, None
    for _ in range(_BACKTRACK + 1):
        y = ybar + t * step
        H, br, _ = _hats_per_scramble(big, sizes, to_x(setting.q0, y), alpha, branches)
        G = [_g(setting, h, y) for h in H]
        if not any(g is None for g in G):
            G = np.array(G)
            best = (y, H, br, G)
            if float(np.linalg.norm(G.mean(0))) < (1 - 1e-4 * t) * g0:
                break
        t /= 2
    return best


def _point(setting, alpha, ch: OutputChannel, x, hats, pilot_fp: FixedPoint, rounds: int) -> FixedPoint:
    q, m, sg = (float(v) for v in x)
    qh, mh, sh, EM = (float(v) for v in hats)
    delta = math.sqrt(max(qh, 1e-300)) / mh
    eps = 2 * setting.lam / mh
    jv = J_and_derivatives(setting.spectrum, delta, eps)
    te = two_token_test_error(setting, q, m) if setting.tokens == 2 else ch.test_error(q, m)
    return replace(
        pilot_fp,
        q=q,
        m=m,
        sigma=sg,
        q_hat=qh,
        m_hat=mh,
        sigma_hat=sh,
        test_error=te,
        train_loss=_train_loss(alpha, q, m, sg, qh, mh, sh, EM, jv),
        s_error=setting.q0 + q - 2 * m,
        rank_fraction=jv.mass,
        delta=delta,
        eps=eps,
        eta=mh / sh,
        iterations=pilot_fp.iterations + 3 + rounds,
        mixed_weight=None,  # the pilot's mixing of a switching cycle is not carried to the scrambles' points
    )
