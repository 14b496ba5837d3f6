"""Newton's method for the state-evolution fixed point (docs/highdim.md C3, "Solving").

The map ``x = (q, m, Σ) -> F(x)`` of :mod:`attnlab.highdim.fixed_point` is solved as ``G(y) = 0`` with
``G(y) = Y(F(x(y))) − y`` in the unconstrained coordinates ``y = (log q, atanh(m/√(Q0 q)), log Σ)`` of
:func:`~attnlab.highdim.fixed_point.solve_anderson`. The Jacobian of ``G`` is taken by forward differences;
the three extra evaluations start their proximal steps from the solution at ``y``, so they cost a few
Newton steps of the proximal problem each, and one Newton iteration costs about two map evaluations.

Branches of the proximal step. For large ``Σ`` (small λ̃) the proximal objective
``‖h − z‖²/(2Σ) + ‖y − σ_β(h)‖²`` can have two local minima at a node; the theory takes the lower. A
warm-started proximal step follows one minimum continuously (a smooth map Newton can solve); at
convergence every node is checked against the two-start cold step
(:meth:`~attnlab.highdim.channel.OutputChannel.prox_best`), the nodes found in the higher minimum switch,
and the solve is repeated from there. On fixed nodes the map with the lower minimum everywhere is
discontinuous: a node whose two minima swap order jumps. Near the small-λ̃ interpolation peak a few nodes
(3 of 4096 at λ̃ = 1e-4, α = 0.1988) swap back and forth — their switch moves the fixed point across their
own tie — so no fixed point of the discontinuous map exists and the switching cycles (Σ alternating between
191.9 and 196.0 there). A cycle is recognised when only nodes that switched in an earlier round switch
again (or the point comes back to an earlier one); the re-solves between switches run to ``_ROUND_TOL``
only, and the round in which no node is left in its higher minimum is finished to ``tol`` and checked again.
Such a cycle is resolved as the continuum (N → ∞) limit resolves it, where the
expectation over a tie set of measure zero is continuous: the cycling nodes ``D`` contribute
``(1 − w)·(one minimum) + w·(the other)``, and ``w ∈ [0, 1]`` is chosen so that at the fixed point of
that map the two minima of ``D`` tie on average (the sum of their value differences is 0; regula falsi on
``w``, each step a warm Newton solve). That is the fixed point reported, converged, with the weight in
``FixedPoint.mixed_weight`` (None for an ordinary fixed point). When no weight resolves the cycle (a
minimum that vanishes between the two states, not a tie) the point is reported unconverged with
``mixed_weight`` NaN, and :func:`~attnlab.highdim.state_evolution.state_evolution` does not retry it with the
other iterations, which cycle alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from attnlab.highdim.channel import OutputChannel
from attnlab.highdim.fixed_point import MAX_STEP, FixedPoint, finish, prior_equations, start_point, to_x, to_y
from attnlab.highdim.setting import Setting

__all__ = ["solve_newton"]

_FD_STEP = 1e-6  # forward-difference step in y: truncation ~1e-6 relative, proximal tolerance 1e-11 / 1e-6
_MAX_ROUNDS = 12  # re-solves after nodes switched to the lower minimum of their proximal step
_MIX_STEPS = 12  # regula-falsi steps on the weight of a cycling node set
_ROUND_TOL = 1e-3  # re-solves after a switch of nodes run to this tolerance before the next check
_COARSE_MIN = 128  # the coarse approach runs on N/8 >= this many nodes
_COARSE_TOL = 0.5  # the coarse approach hands over at a relative change below _COARSE_TOL/10 ...
_COARSE_EVALS = 60  # ... or after this many evaluations


@dataclass(frozen=True)
class _Mix:
    """Nodes ``rows`` weighted ``w`` on the other minimum ``hB`` (k, K), ``1 − w`` on the followed one."""

    rows: torch.Tensor
    hB: torch.Tensor
    w: float


@dataclass(frozen=True)
class _Eval:
    y: np.ndarray
    x: np.ndarray
    fx: np.ndarray
    r: np.ndarray  # G(y)
    hats: tuple[float, float, float]
    EM: float
    jv: object
    h: torch.Tensor  # (N, K) the followed minima
    M: torch.Tensor  # (N,) their values
    hB: torch.Tensor | None  # (k, K) the other minima of a mixed node set
    gap: float  # Σ_D (value at hB − value at h), 0 without a mix

    @property
    def change(self) -> float:
        return float(np.max(np.abs(self.fx - self.x) / np.maximum(np.abs(self.fx), 1e-300)))


class _Map:
    """``G`` on fixed nodes, counting evaluations."""

    def __init__(self, setting: Setting, alpha: float, ch: OutputChannel):
        self.s, self.alpha, self.ch, self.evals = setting, alpha, ch, 0
        self.jac: np.ndarray | None = None  # the last Jacobian of a converged Newton solve

    def __call__(self, y: np.ndarray, h0: torch.Tensor | None, mix: _Mix | None) -> _Eval | None:
        self.evals += 1
        ch, q0 = self.ch, self.s.q0
        x = to_x(q0, y)
        q, m, sg = (float(v) for v in x)
        z = ch.z_of(q, m)  # (N, K)
        h, M = ch.prox_best(z, sg) if h0 is None else ch.prox(z, sg, h0=h0)
        terms = ch.node_terms(q, m, sg, self.alpha, z, h, M)  # (N, 4)
        hB, gap = None, 0.0
        if mix is not None:
            zD = z[mix.rows]  # (k, K)
            hB, MB = ch.prox(zD, sg, h0=mix.hB, rows=mix.rows)
            tB = ch.node_terms(q, m, sg, self.alpha, zD, hB, MB, rows=mix.rows)  # (k, 4)
            terms = terms.clone()
            terms[mix.rows] = (1 - mix.w) * terms[mix.rows] + mix.w * tB
            d = MB - M[mix.rows]
            gap = float(d.sum() if ch.weights is None else (ch.weights[mix.rows] * d).sum())
        qh, mh, sh, EM = (float(v) for v in ch.average(terms))
        if not (qh > 0 and mh > 0 and sh > 0 and all(map(math.isfinite, (qh, mh, sh)))):
            return None
        try:
            fq, fm, fs, jv, _ = prior_equations(self.s, qh, mh, sh)
        except ValueError:
            return None
        fx = np.array([fq, fm, fs])
        if not np.all(np.isfinite(fx)):
            return None
        return _Eval(y, x, fx, to_y(q0, fx) - y, (qh, mh, sh), EM, jv, h, M, hB, gap)


def _jacobian(F: _Map, cur: _Eval, mx: _Mix | None) -> np.ndarray | None:
    """Forward-difference Jacobian of ``G`` at ``cur`` (proximal steps warm from ``cur``), (3, 3)."""
    Jr = np.empty((3, 3))
    for j in range(3):
        e = np.zeros(3)
        e[j] = _FD_STEP
        ev = F(cur.y + e, cur.h, mx)
        if ev is None:
            return None
        Jr[:, j] = (ev.r - cur.r) / _FD_STEP
    return Jr


def _newton(
    F: _Map, cur: _Eval, mix: _Mix | None, tol: float, beta: float, budget: int, J0: np.ndarray | None = None
) -> tuple[_Eval, bool]:
    """Newton iterations on ``G`` from the evaluated point ``cur`` (proximal steps warm from it) until the
    relative change ``max |F(x) − x|/|F(x)|`` is below ``tol/10``; (last point, converged).

    The Jacobian (by forward differences) is kept for the next step while a step shrinks ``‖G‖`` fourfold
    or more (a chord step costs one evaluation instead of four), and taken afresh otherwise; ``J0`` is a
    Jacobian to start from (the coarse approach's), tried once. The last one is left in ``F.jac``."""
    Jr = J0
    while F.evals < budget:
        if cur.change < tol / 10:
            F.jac = Jr
            return cur, True
        mx = None if mix is None else _Mix(mix.rows, cur.hB, mix.w)
        fresh = Jr is None
        if fresh:
            Jr = _jacobian(F, cur, mx)
        step = None
        if Jr is not None:
            try:
                step = np.linalg.solve(Jr, -cur.r)
            except np.linalg.LinAlgError:
                step = None
        if step is None or not np.all(np.isfinite(step)):
            step, Jr = beta * cur.r, None
        step = step * min(1.0, MAX_STEP / max(float(np.max(np.abs(step))), 1e-300))
        rn, t, nxt = float(np.linalg.norm(cur.r)), 1.0, None
        for _ in range(5 if fresh else 1):  # backtracking on ‖G‖ (a kept Jacobian: one try)
            trial = F(cur.y + t * step, cur.h, mx)
            if trial is not None and float(np.linalg.norm(trial.r)) < (1 - 1e-4 * t) * rn:
                nxt = trial
                break
            t /= 2
        if nxt is None and not fresh:  # the kept Jacobian misled: take it afresh
            Jr = None
            continue
        if nxt is None:  # no decrease along the Newton direction: the damped step
            d = beta * cur.r
            d = d * min(1.0, MAX_STEP / max(float(np.max(np.abs(d))), 1e-300))
            nxt, Jr = F(cur.y + d, cur.h, mx), None
            if nxt is None:
                return cur, False
        elif float(np.linalg.norm(nxt.r)) > rn / 4:  # slow contraction: a fresh Jacobian next time
            Jr = None
        cur = nxt
    F.jac = Jr
    return cur, False


def _lower_elsewhere(ch: OutputChannel, cur: _Eval) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(mask of nodes whose cold two-start proximal step lands elsewhere, its solutions and values)."""
    hc, Mc = ch.prox_best(ch.z_of(float(cur.x[0]), float(cur.x[1])), float(cur.x[2]))
    off = (hc - cur.h).abs().amax(-1) > 1e-7 * (1 + hc.abs().amax(-1))  # (N,)
    return off, hc, Mc


def _mixed(F: _Map, cur: _Eval, rows, hB, tol, beta, budget) -> tuple[_Eval, bool, float]:
    """The fixed point of the map with the cycling nodes ``rows`` mixed at the weight where their two
    minima tie on average (module docstring); regula falsi (Illinois) on ``w`` between 0 and 1. The solves
    at each ``w`` run to ``tol/10``: the gap varies with the order parameters much faster than with ``w``,
    so the weight is only as accurate as the fixed points it is found on (at ``tol`` itself the reported
    point would miss the tight one by ~1e-6, at ``λ̃ = 1e-4, α = 0.1988``)."""
    tol = tol / 10
    e0 = F(cur.y, cur.h, _Mix(rows, hB, 0.0))  # the fixed point at w = 0, its gap
    s1 = F(cur.y, cur.h, _Mix(rows, hB, 1.0))
    if e0 is None or s1 is None:
        return cur, False, 0.0
    e1, ok = _newton(F, s1, _Mix(rows, hB, 1.0), tol, beta, budget, F.jac)
    if not ok:
        return cur, False, 0.0
    a, ga, ea = 0.0, e0.gap, e0
    b, gb, eb = 1.0, e1.gap, e1
    if not (ga < 0 <= gb):  # no sign change: not a two-state cycle (0: the other minimum vanished there)
        return cur, False, 0.0
    side = 0
    for _ in range(_MIX_STEPS):
        w = (a * gb - b * ga) / (gb - ga)
        start = F(ea.y + (w - a) / (b - a) * (eb.y - ea.y), ea.h, _Mix(rows, ea.hB, w))
        if start is None:
            return cur, False, w
        ew, ok = _newton(F, start, _Mix(rows, hB, w), tol, beta, budget, F.jac)
        if not ok:
            return ew, False, w
        if abs(ew.gap) <= 1e-12 * (1 + float(ew.M[rows].abs().sum())) or b - a < 1e-9:
            return ew, True, w
        if ew.gap < 0:
            a, ga, ea = w, ew.gap, ew
            if side == -1:
                gb /= 2
            side = -1
        else:
            b, gb, eb = w, ew.gap, ew
            if side == 1:
                ga /= 2
            side = 1
        if float(np.max(np.abs(eb.y - ea.y))) < tol / 10:  # the bracket no longer moves the fixed point
            return ew, True, w
    return ew, False, w


def solve_newton(
    setting: Setting,
    alpha: float,
    init,
    damping: float,
    tol: float,
    max_iter: int,
    ch: OutputChannel,
) -> FixedPoint:
    """Newton's method on the order parameters (module docstring).

    Safeguards: the step is capped at 1 in every coordinate of ``y`` (a factor e on ``q`` or ``Σ``); a
    backtracking line search on ``‖G‖`` halves it up to four times; when no shortened step lowers ``‖G‖``
    (or the Jacobian is singular) the damped step ``(1 − damping)·G`` is taken instead. Converged: the
    relative change ``max |F(x) − x|/|F(x)|`` is below ``tol/10`` with every node in the lower minimum of
    its proximal step (or a cycling node set mixed, module docstring). ``iterations`` counts map
    evaluations, the difference evaluations included; ``max_iter`` caps them.
    """
    q0 = setting.q0
    beta = 1.0 - damping
    y0 = to_y(q0, np.array(start_point(setting, init), dtype=float))
    coarse_evals = 0
    if ch.N >= 8 * _COARSE_MIN:  # the approach on an eighth of the nodes, then the solve on all
        Fc = _Map(setting, alpha, ch.head(ch.N // 8))
        c0 = Fc(y0, None, None)
        if c0 is not None:
            cc, _ = _newton(Fc, c0, None, _COARSE_TOL, beta, min(_COARSE_EVALS, max_iter // 2))
            if cc.change < c0.change:
                y0 = cc.y
        coarse_evals = Fc.evals
    F = _Map(setting, alpha, ch)
    F.evals = coarse_evals
    J0 = Fc.jac if coarse_evals else None
    first = F(y0, None, None)
    if first is None:
        x = np.array(start_point(setting, init), dtype=float)
        qh, mh, sh, *_ = ch.hats_and_prox(x[0], x[1], x[2], alpha)
        return finish(setting, ch, alpha, x[0], x[1], x[2], qh, mh, sh, 1, False, math.inf)
    cur, ok = _newton(F, first, None, tol, beta, max_iter, J0)
    converged, weight, seen, cycled = False, None, [], False
    switched = torch.zeros(ch.N, dtype=torch.bool)  # nodes switched to the lower minimum in a past round
    # after a switch the re-solve runs to ``_ROUND_TOL`` only (the next switch moves the point more than
    # that); the last round, where no node is in the higher minimum, is finished to ``tol`` and checked again
    loose = _ROUND_TOL
    for _ in range(_MAX_ROUNDS):
        if not ok:
            break
        off, hc, Mc = _lower_elsewhere(ch, cur)
        if not bool(off.any()):
            if cur.change >= tol / 10:  # a round solved loosely: to tol, then checked again
                cur, ok = _newton(F, cur, None, tol, beta, max_iter, F.jac)
                loose = tol
                continue
            converged = True
            break
        rows = torch.nonzero(off).flatten()
        back = any(np.all(np.abs(cur.x - v) <= 1e-6 * np.abs(v)) for v in seen)  # back where it was
        if back or bool(switched[rows].all()):  # or only nodes that switched before switch back: a cycle
            cycled = True
            if cur.change >= tol / 10:  # a round solved loosely: the end w = 0 of the bracket to tol
                cur, ok = _newton(F, cur, None, tol, beta, max_iter, F.jac)
                if not ok:
                    break
            mixed, converged, weight = _mixed(F, cur, rows, hc[rows], tol, beta, max_iter)
            if converged:
                cur = mixed
                break
            # no tie between this state and the next: try again from the next state of the cycle
        seen.append(cur.x.copy())
        switched[rows] = True
        nxt = F(cur.y, hc, None)  # follow the lower minima from here
        if nxt is None:
            break
        cur, ok = _newton(F, nxt, None, max(tol, loose), beta, max_iter, F.jac)
    x = cur.x
    fp = finish(
        setting, ch, alpha, x[0], x[1], x[2], *cur.hats, F.evals, converged, cur.change, cur.EM, cur.jv
    )
    if converged:
        return fp if weight is None else replace(fp, mixed_weight=float(weight))
    return replace(fp, mixed_weight=math.nan) if cycled else fp
