"""State evolution of the ERM fixed point (docs/highdim.md C3): order parameters, observables, stability.

The regularisation parameter of everything here is ``λ̃`` (``lam``), the coefficient of the nuclear norm in
``d λ̃ Tr S``; the weight-decay coefficient ``λ`` of ``λ‖W‖²`` is ``λ̃/√κ`` (:func:`lam_from_lam_tilde`).

The pieces live in their own modules and are re-exported here: the problem
(:mod:`~attnlab.highdim.setting`), the output channel on fixed nodes (:mod:`~attnlab.highdim.channel`), the
scrambled node sets and the average over them (:mod:`~attnlab.highdim.scrambles`) and the predicted spectrum
of the learned ``Ŝ`` (:mod:`~attnlab.highdim.learned_spectrum`). This module holds the
fixed-point iteration, the choice among several fixed points and their local stability.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.channel import OutputChannel, flat_to_matrix, one_thread
from attnlab.highdim.channel import flat_to_matrix_map as flat_to_matrix_map
from attnlab.highdim.channel_nodes import default_fold, default_nodes, target_grid, target_nodes
from attnlab.highdim.fixed_point import FixedPoint, Stability, solve_anderson, solve_damped
from attnlab.highdim.learned_spectrum import PredictedSpectrum, predicted_spectrum
from attnlab.highdim.local_stability import stability
from attnlab.highdim.newton import solve_newton
from attnlab.highdim.refine import refine as _refine
from attnlab.highdim.scrambles import NODES as NODES
from attnlab.highdim.scrambles import PILOT, SCRAMBLES, average_fixed_points, channels
from attnlab.highdim.se_target import TARGETED, bound_ratio, check_target, target_met
from attnlab.highdim.setting import Setting, lam_from_lam_tilde, lam_tilde_from_lam
from attnlab.highdim.spectra import J_and_derivatives

__all__ = [
    "Setting",
    "FixedPoint",
    "Stability",
    "OutputChannel",
    "lam_from_lam_tilde",
    "lam_tilde_from_lam",
    "flat_to_matrix",
    "state_evolution",
    "sweep",
    "stability",
    "channels",
    "average_fixed_points",
    "select_fixed_point",
    "PredictedSpectrum",
    "predicted_spectrum",
]


def state_evolution(
    setting: Setting,
    alpha: float,
    *,
    init: FixedPoint | Sequence[float] | None = None,
    starts: str | Sequence[FixedPoint | Sequence[float]] | None = None,
    damping: float = 0.3,
    tol: float = 1e-6,
    max_iter: int = 500,
    nodes: int | None = None,
    seed: int = 0,
    channel: OutputChannel | Sequence[OutputChannel] | None = None,
    method: str = "newton",
    scrambles: int = SCRAMBLES,
    pilot: int = PILOT,
    refine: bool = True,
    rtol: float | None = None,
    max_scrambles: int | None = None,
    fold: bool | None = None,
    progress: Callable[[int, int, float], None] | None = None,
) -> FixedPoint:
    """Solve the state-evolution equations of docs/highdim.md C3 at sample ratio ``α = n/d²``.

    Parameters
    ----------
    setting : Setting
        The problem (``setting.lam`` is λ̃).
    alpha : float
        ``n/d²``, > 0.
    init : FixedPoint or (q, m, Σ) or None
        Warm start (e.g. the neighbouring point of a sweep).
    starts : "auto", a sequence of starts, or None
        Several fixed points (docs/highdim.md C3: "take the one with the lowest training loss that is
        stable"). None (the default): one solve from ``init`` (or the default start), no stability check
        — the cost of one point. ``"auto"``: solve from well-spread starts — the warm start ``init`` when
        given, the default start ``(Q0/2, 0.4 Q0, 1)``, an uninformed one (small ``q`` and ``m``) and one
        near perfect recovery (``q ≈ m ≈ Q0``, small ``Σ``) — about four times the cost of one solve
        plus one stability check (six map evaluations) per distinct fixed point. A sequence: solve from
        each of those starts (FixedPoint or (q, m, Σ); ``init`` is added first when given). In both
        cases every converged solution is checked for local stability (:func:`stability`, criterion
        :attr:`Stability.attracting`), solutions within relative 1e-3 of each other in ``(q, m, Σ)`` are
        merged, and the stable one with the lowest training loss is returned (:func:`select_fixed_point`),
        with ``stable`` set and the distinct candidates in ``candidates``.
    damping : float
        Weight of the old value in each update, in [0, 1); a run that does not converge is retried with
        the damping raised by 0.3 (up to 0.9).
    tol : float
        ``"newton"`` and ``"anderson"``: stop when the relative fixed-point residual is below ``tol/10``
        (the distance to the fixed point is then below ``tol`` for a contraction factor up to 0.9);
        ``"damped"``: stop when
        the largest relative change of the six order parameters in one iteration is below ``tol``.
    max_iter : int
        Iteration cap (map evaluations; ``converged`` is False when reached).
    nodes : int or None
        Number of nodes of the output expectation in each scramble (:class:`OutputChannel`: at T = 2 and
        from 9216 nodes and 256 label nodes on, scrambled Sobol label nodes times an ``n × n``
        Gauss–Hermite grid, ``n`` 5 at λ̃ ≥ 1e-2, 6 at 1e-3 ≤ λ̃ < 1e-2 and 12 below, else scrambled Sobol
        nodes). The default (:func:`~attnlab.highdim.channel_nodes.default_nodes`: 2048 label nodes, at most
        73728 nodes) on each of four scrambles is the accuracy study's choice (docs/se-accuracy.md).
    seed : int
        Scrambling seed of the first set of nodes (the others: ``seed + 1``, …).
    channel : OutputChannel or a sequence of them, optional
        Precomputed nodes for ``setting`` (sweeps share them; :func:`channels`): one channel is one set of
        nodes (no error bar), a sequence is solved scramble by scramble as below.
    scrambles : int
        The fixed point is solved on ``scrambles`` independently scrambled Sobol sets of nodes (the later
        ones warm-started from the first) and the reported point is their average, with the quadrature's
        standard error (spread over √scrambles, randomised quasi-Monte Carlo) in ``FixedPoint.stderr``.
        A multi-start solve chooses its fixed point on the first set. 1: one set, no error bar.
    pilot : int
        With ``refine``: the nodes of the pilot solve (the first ``pilot`` nodes of the first scramble).
    refine : bool
        With two or more scrambles: True (the default) solves the fixed point once, on ``pilot`` nodes, and
        reaches each scramble's fixed point by chord steps of Newton's method from there, all scrambles'
        nodes in one batch (:mod:`attnlab.highdim.refine`; the test error at T = 2 by a Gauss–Hermite rule);
        the reported point and its standard errors are those of the scrambles' fixed points, as with whole
        solves, at a fraction of their cost. False: a whole solve on every scramble. A refinement whose
        map is undefined on the way falls back on whole solves; one that does not settle within six rounds
        reports its last point with ``converged`` False.
    method : "newton", "anderson" or "damped"
        The iteration: Newton's method on the order parameters with a difference Jacobian, an approach on
        an eighth of the nodes and warm-started proximal steps checked against cold starts at convergence
        (the default, :mod:`attnlab.highdim.newton`; falls back to the Anderson iteration when it fails);
        Anderson acceleration of the damped iteration (:func:`~attnlab.highdim.fixed_point.solve_anderson`);
        or the plain damped iteration. All find the same fixed point; where nodes of the proximal step
        switch minima in a cycle only the Newton solver resolves it (``FixedPoint.mixed_weight``).
    rtol : float or None
        An accuracy target in (0, 1): after the refined solve, further batches of ``scrambles`` new
        scrambles (seeds continuing from ``seed + scrambles``) are refined, each from the running mean
        (the pilot is not solved again), and all scramble points averaged, until the relative standard
        error of each of ``q``, ``m``, ``Σ``, the test error and the training loss is at most ``rtol / t``
        (``t`` the 97.5% quantile of Student's t with ``R − 1`` degrees of freedom, ``R`` the scrambles
        averaged) on at least eight scrambles (:mod:`attnlab.highdim.se_target`), or the budget
        ``max_scrambles`` is spent. ``FixedPoint.accuracy_met`` says which (False too when a batch's
        refinement fails or the point is not converged); the point is returned either way. Below
        λ̃ = 1e-2 every scramble's product rule takes a finer grid in ``w`` than the default's
        (:func:`~attnlab.highdim.channel_nodes.target_grid`: 8 × 8 down to λ̃ = 1e-3, 16 × 16 down to 1e-4,
        24 × 24 below; the default grids move ``q`` by 0.5–1e-3 there), on the default's label nodes
        (2048 instead of 512 below λ̃ = 1e-3 when ``rtol`` < 2e-3, which 1e-3 needs there within the
        budget: :func:`~attnlab.highdim.channel_nodes.target_nodes`), folded at T = 2 as every solve's
        (``fold``). Needs the refined solve (``refine`` True, two or more scrambles,
        ``channel`` None). None (the default): no target, the default solve as it is.
    max_scrambles : int or None
        With ``rtol``: the most scrambles to average (default 64, at least ``scrambles`` and 8). A batch
        holds ``scrambles`` scrambles' nodes at once, as the default solve.
    fold : bool or None
        Fold the label nodes of the scrambles the solver draws into one quadrant of the output channel's
        symmetries (T = 2; :class:`~attnlab.highdim.channel.OutputChannel`, ``fold``): the same expectation,
        about half the standard error at the same cost at λ̃ = 1e-2 and 1e-3 (docs/se-accuracy.md, "Folded
        label nodes"). None (the default): folded at T = 2
        (:func:`~attnlab.highdim.channel_nodes.default_fold`); False keeps the whole plane's nodes. Needs
        ``channel`` None.
    progress : callable(scrambles, max_scrambles, ratio), optional
        With ``rtol``: called after each batch with the scrambles averaged so far and the largest relative
        standard error over its bound ``rtol / t`` (≤ 1 once within it), e.g. to drive a progress bar.

    Returns
    -------
    FixedPoint

    Notes
    -----
    Failed steps and failed warm starts. Every iteration treats a map value that is not finite, or hats
    outside the prior equations' domain (``q̂, m̂, Σ̂ > 0``), as a failed step: Newton's method shortens the
    step or takes the damped one, the Anderson iteration halves it from the last good point, the damped
    iteration stops at its last finite iterate (unconverged, and is retried with stronger damping), and a
    refinement whose scramble points leave the domain falls back on whole solves. A single solve (``starts``
    None) warm-started from ``init`` that ends unconverged is solved again from the default start; the
    default start's point is reported when it converges (``FixedPoint.start`` ``"default"``), else the warm
    start's attempt. A warm start that converges is kept as it is (a sweep follows its branch). Near a fold
    of a branch the warm start can sit on a branch that the quadrature does not resolve (a fixed point on
    some scrambles and none near it on others); the default start then finds the point the solve reports
    without a warm start.
    """
    if fold is not None:
        if not isinstance(fold, bool):
            raise ValueError(f"fold: expected None, True or False, got {fold!r}")
        if channel is not None:
            raise ValueError(f"fold: expected None when channel is given (its nodes are drawn), got {fold!r}")
        if fold and setting.tokens != 2:
            raise ValueError(f"fold: True needs tokens = 2, got tokens = {setting.tokens}")
    folded = (default_fold(setting) and channel is None) if fold is None else fold
    target = None
    if rtol is not None:
        scrambles = check_int("scrambles", scrambles, min=1)
        if not refine or scrambles < 2 or channel is not None:
            raise ValueError(
                "rtol: expected None unless the solve is refined on scrambles it draws itself (refine=True, "
                f"scrambles >= 2, channel None), got {rtol!r}"
            )
        # the finer grid in w below λ̃ = 1e-2, whose bias is below the target (channel_nodes.target_grid); the
        # label nodes folded into a quadrant of the channel's symmetries unless asked not to (OutputChannel)
        grid = target_grid(setting) if setting.tokens == 2 else None
        target = (*check_target(rtol, max_scrambles, scrambles), progress, grid, folded)
    elif max_scrambles is not None:
        raise ValueError(f"max_scrambles: expected None without rtol, got {max_scrambles!r}")
    rest = (damping, tol, max_iter, nodes, seed, channel, method, scrambles, pilot, refine, target, folded)
    first = _state_evolution_from(setting, alpha, init, starts, *rest)
    if init is None or starts is not None or first.converged:
        return first
    again = _state_evolution_from(setting, alpha, None, None, *rest)
    return replace(again, start="default") if again.converged else first


def _state_evolution_from(
    setting,
    alpha,
    init,
    starts,
    damping,
    tol,
    max_iter,
    nodes,
    seed,
    channel,
    method,
    scrambles,
    pilot,
    refine,
    target=None,
    fold=False,
) -> FixedPoint:
    """:func:`state_evolution` from the one start ``init`` (or the starts ``starts``), without the retry."""
    scrambles = check_int("scrambles", scrambles, min=1)
    grid = None if target is None else target[3]
    if nodes is None:
        nodes = default_nodes(setting) if target is None else target_nodes(setting, target[0], grid)
    if channel is None:
        chans = channels(setting, nodes, seed, scrambles, grid, fold)
    elif isinstance(channel, OutputChannel):
        chans = [channel]
    else:
        chans = list(channel)
        if not chans or not all(isinstance(c, OutputChannel) for c in chans):
            raise ValueError("channel: expected an OutputChannel or a non-empty sequence of them")
    pilot = check_int("pilot", pilot, min=16)
    if len(chans) > 1 and refine:
        # the pilot: the first nodes of the first scramble when it is a Sobol set, else a Sobol set of its own
        # (a product rule's prefix has few label nodes, and a Newton solve on them can stall in switching)
        if chans[0].rule == "sobol":
            lead = chans[0].head(min(pilot, chans[0].N))
        else:
            lead = OutputChannel(setting, pilot, seed, rule="sobol")
        first = _state_evolution_one(
            setting, alpha, init, starts, damping, tol, max_iter, nodes, seed, lead, method
        )
        with one_thread():
            got = _refine(setting, first.alpha, first, chans, tol)
        if got is not None:
            fps, settled = got
            point = _refined_point(setting, first, fps, settled, fps[0].iterations)
            if target is None:
                return point
            return _to_target(setting, first, fps, point, settled, nodes, seed, tol, target)
    first = _state_evolution_one(
        setting, alpha, init, starts, damping, tol, max_iter, nodes, seed, chans[0], method
    )
    if len(chans) == 1:
        return first
    rest = [
        _state_evolution_one(setting, alpha, first, None, damping, tol, max_iter, nodes, seed, c, method)
        for c in chans[1:]
    ]
    avg = average_fixed_points([first, *rest])
    # the spectral mass at the averaged (δ, ε), so that the point's rank fraction is its predicted
    # spectrum's (the average of the scrambles' rank fractions differs by the curvature over their spread)
    point = replace(avg, rank_fraction=J_and_derivatives(setting.spectrum, avg.delta, avg.eps).mass)
    if target is None:
        return point
    # the refinement failed: whole solves on the first scrambles, no batches added; the rule on what is there
    return _flag(point, target[0], target_met(_values(point), point.stderr, point.scrambles, target[0]))


def _values(fp: FixedPoint) -> dict[str, float]:
    return {k: getattr(fp, k) for k in TARGETED}


def _flag(fp: FixedPoint, rtol: float, met: bool) -> FixedPoint:
    """``fp`` with its target and whether it was met: an unconverged point never meets it."""
    return replace(fp, rtol=rtol, accuracy_met=bool(met and fp.converged))


def _to_target(setting, first, fps, point, settled, nodes, seed, tol, target) -> FixedPoint:
    """The refined solve's scramble points ``fps`` extended by batches of new scrambles until the accuracy
    target is met or the budget spent (:func:`state_evolution`, ``rtol``; :mod:`attnlab.highdim.se_target`).

    Each batch is refined by :func:`~attnlab.highdim.refine.refine` like the first scrambles, from the
    running mean (the pilot ``first`` with its ``(q, m, Σ)``; the pilot is not solved again): its scramble
    points are each the linearisation of that scramble's own fixed point about the batch's mean-map fixed
    point, and all are averaged with equal weights. A batch whose refinement fails ends the solve with the
    target not met (leaving it out would select the scrambles that did not fail); so does a point that is not
    converged (the pilot's solve, or rounds that did not settle), which no further batch can change."""
    rtol, budget, progress, grid, fold = target
    batch = len(fps)
    points, iterations = list(fps), fps[0].iterations
    while True:
        met = target_met(_values(point), point.stderr, len(points), rtol)
        if progress is not None:
            progress(len(points), budget, bound_ratio(_values(point), point.stderr, len(points), rtol))
        size = min(batch, budget - len(points))
        # an unconverged point (a pilot that did not converge, rounds that did not settle) never meets the
        # target, so more scrambles would be spent in vain
        if met or size < 2 or not point.converged:
            break
        chans = channels(setting, nodes, seed + len(points), size, grid, fold)
        start = replace(first, q=point.q, m=point.m, sigma=point.sigma)
        with one_thread():
            got = _refine(setting, first.alpha, start, chans, tol)
        if got is None:  # the batch failed: stop here, the target not met (``met`` is False)
            break
        more, ok = got
        points += more
        settled = settled and ok
        iterations += more[0].iterations - first.iterations
        point = _refined_point(setting, first, points, settled, iterations)
    return _flag(point, rtol, met)


def _refined_point(setting, first, fps, settled, iterations) -> FixedPoint:
    """The average of the refined scramble points ``fps`` reached from the pilot ``first``: the spectral mass
    at the averaged ``(δ, ε)``, the pilot's convergence (and the rounds' ``settled``) and change."""
    avg = average_fixed_points(fps)
    return replace(
        avg,
        rank_fraction=J_and_derivatives(setting.spectrum, avg.delta, avg.eps).mass,
        iterations=iterations,
        converged=first.converged and settled,
        max_rel_change=first.max_rel_change,
    )


def _state_evolution_one(
    setting, alpha, init, starts, damping, tol, max_iter, nodes, seed, channel, method
) -> FixedPoint:
    """:func:`state_evolution` on one set of nodes (``channel``)."""
    alpha = check_real("alpha", alpha, min=0.0, min_open=True)
    damping = check_real("damping", damping, min=0.0, max=1.0, max_open=True)
    tol = check_real("tol", tol, min=0.0, min_open=True)
    max_iter = check_int("max_iter", max_iter, min=1)
    if method not in _METHODS:
        raise ValueError(f"method: expected one of {', '.join(_METHODS)}, got {method!r}")
    solve = _METHODS[method]
    start_list = _starts(setting, init, starts)
    with one_thread():
        if start_list is None:
            return _solve_retry(solve, setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
        ch = channel if channel is not None else OutputChannel(setting, nodes, seed)
        found: list[FixedPoint] = []
        for st in start_list:
            fp = _solve_retry(solve, setting, alpha, st, damping, tol, max_iter, nodes, seed, ch)
            if fp.converged and not any(_same_point(fp, o) for o in found):
                found.append(fp)
        if not found:  # nothing converged: report the first start's attempt, unchecked
            return _solve_retry(solve, setting, alpha, start_list[0], damping, tol, max_iter, nodes, seed, ch)
        checked = [replace(f, stable=stability(setting, f, channel=ch).attracting) for f in found]
        best = checked[select_fixed_point(checked)]
        return replace(best, candidates=tuple(checked))


def _starts(setting: Setting, init, starts) -> list | None:
    """The list of starts of a multi-start solve (None for a single solve)."""
    if starts is None:
        return None
    q0 = setting.q0
    out: list = [] if init is None else [init]
    if isinstance(starts, str):
        if starts != "auto":
            raise ValueError(f"starts: expected 'auto', a sequence of starts or None, got {starts!r}")
        out += [(0.5 * q0, 0.4 * q0, 1.0), (0.05 * q0, 0.02 * q0, 1.0), (0.98 * q0, 0.97 * q0, 0.05)]
        return out
    try:
        items = list(starts)
    except TypeError:
        raise ValueError(
            f"starts: expected 'auto', a sequence of starts or None, got {type(starts).__name__}"
        ) from None
    for i, st in enumerate(items):
        if isinstance(st, FixedPoint):
            out.append(st)
            continue
        v = np.asarray(st, dtype=float).ravel()
        if v.size != 3 or not np.all(np.isfinite(v)) or v[0] <= 0 or v[2] <= 0 or v[1] ** 2 >= q0 * v[0]:
            raise ValueError(
                f"starts[{i}]: expected a FixedPoint or (q, m, Σ) with q > 0, Σ > 0 and m² < Q0 q, got {st!r}"
            )
        out.append(tuple(float(x) for x in v))
    if not out:
        raise ValueError("starts: expected at least one start, got an empty sequence")
    return out


def _same_point(a: FixedPoint, b: FixedPoint, rtol: float = 1e-3) -> bool:
    x, y = np.array([a.q, a.m, a.sigma]), np.array([b.q, b.m, b.sigma])
    return bool(np.all(np.abs(x - y) <= rtol * np.maximum(np.abs(x), np.abs(y))))


def select_fixed_point(candidates: Sequence[FixedPoint]) -> int:
    """Index of the fixed point to report among ``candidates`` (docs/highdim.md C3).

    The rule: among converged candidates whose ``stable`` is True, the lowest ``train_loss``; when none
    is known to be stable, the lowest training loss among the converged ones whose stability is
    unknown (``stable`` None); then among all converged ones; then among all.
    """
    if not candidates:
        raise ValueError("candidates: expected at least one FixedPoint, got none")
    idx = list(range(len(candidates)))
    tiers = (
        [i for i in idx if candidates[i].converged and candidates[i].stable is True],
        [i for i in idx if candidates[i].converged and candidates[i].stable is None],
        [i for i in idx if candidates[i].converged],
        idx,
    )
    pool = next(t for t in tiers if t)
    return min(pool, key=lambda i: candidates[i].train_loss)


_METHODS = {"newton": solve_newton, "anderson": solve_anderson, "damped": solve_damped}


def _solve_retry(solve, setting, alpha, init, damping, tol, max_iter, nodes, seed, channel) -> FixedPoint:
    ch = channel if channel is not None else OutputChannel(setting, nodes, seed)
    fp = solve(setting, alpha, init, damping, tol, max_iter, ch)
    # an iteration that left the valid region (or stalled) is retried with stronger damping
    while not fp.converged and damping < 0.85 and solve is not solve_newton:
        damping = min(0.9, damping + 0.3)
        fp = solve(setting, alpha, init, damping, tol, max_iter, ch)
    cycled = fp.mixed_weight is not None and math.isnan(fp.mixed_weight)  # the other iterations cycle too
    if not fp.converged and solve is solve_newton and not cycled:  # the Anderson iteration, then damped
        return _solve_retry(solve_anderson, setting, alpha, init, 0.3, tol, max_iter, nodes, seed, ch)
    if not fp.converged and solve is solve_anderson:  # the plain damped iteration as the last resort
        return _solve_retry(solve_damped, setting, alpha, init, 0.3, tol, max_iter, nodes, seed, ch)
    return fp


def sweep(
    setting: Setting,
    alphas: Sequence[float],
    *,
    lams: Sequence[float] | None = None,
    warm: bool = True,
    **kwargs,
) -> list[FixedPoint]:
    """Fixed points along a sweep of ``α`` (or of ``λ̃`` when ``lams`` is given, at ``alphas[0]``),
    each warm-started from its neighbour's fixed point (``warm=False``: each from the default start, to
    measure what continuation saves) and sharing one set of nodes per setting (folded with ``fold=True``, as
    :func:`state_evolution`'s ``fold``)."""
    out: list[FixedPoint] = []
    prev: FixedPoint | None = None

    # the channels carry the scrambles (read before they leave kwargs); nodes and seed go on to each solve as
    # to a direct one
    scrambles, fold = kwargs.get("scrambles", SCRAMBLES), kwargs.get("fold")
    if fold is not None and not isinstance(fold, bool):
        raise ValueError(f"fold: expected None, True or False, got {fold!r}")

    def chans(s: Setting):
        folded = default_fold(s) if fold is None else fold
        return channels(s, kwargs.get("nodes"), kwargs.get("seed", 0), scrambles, fold=folded)

    kwargs = {k: v for k, v in kwargs.items() if k not in ("scrambles", "fold")}
    if lams is None:
        ch = chans(setting)
        for a in alphas:
            prev = state_evolution(setting, a, init=prev if warm else None, channel=ch, **kwargs)
            out.append(prev)
        return out
    for lam in lams:
        s = replace(setting, lam=lam)
        ch = chans(s)
        prev = state_evolution(s, alphas[0], init=prev if warm else None, channel=ch, **kwargs)
        out.append(prev)
    return out
