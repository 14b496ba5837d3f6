"""State evolution of the ERM fixed point (THEORY.md C3): order parameters, observables, stability.

The regularisation parameter of everything here is ``λ̃`` (``lam``), the coefficient of the nuclear norm in
``d λ̃ Tr S``; the weight-decay coefficient ``λ`` of ``λ‖W‖²`` is ``λ̃/√κ`` (:func:`lam_from_lam_tilde`).

The pieces live in their own modules and are re-exported here: the problem
(:mod:`~attnlab.highdim.setting`), the output channel on fixed nodes (:mod:`~attnlab.highdim.channel`) and the
predicted spectrum of the learned ``Ŝ`` (:mod:`~attnlab.highdim.learned_spectrum`). This module holds the
fixed-point iteration, the choice among several fixed points and their local stability.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.channel import OutputChannel, _one_thread, flat_to_matrix
from attnlab.highdim.channel import flat_to_matrix_map as flat_to_matrix_map
from attnlab.highdim.learned_spectrum import PredictedSpectrum, predicted_spectrum
from attnlab.highdim.setting import Setting, lam_from_lam_tilde, lam_tilde_from_lam
from attnlab.highdim.spectra import J_and_derivatives, JValue

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
    "select_fixed_point",
    "PredictedSpectrum",
    "predicted_spectrum",
]


@dataclass(frozen=True)
class FixedPoint:
    """A state-evolution fixed point and its observables (all per THEORY.md C3 conventions).

    ``test_error`` is against noisy labels (includes the irreducible part); ``train_loss`` is
    (data loss + penalty)/d²; ``s_error`` is ``‖Ŝ − S0‖_F²/d``; ``rank_fraction`` is ``μ_δ((ε, ∞))``.
    """

    alpha: float
    q: float
    m: float
    sigma: float
    q_hat: float
    m_hat: float
    sigma_hat: float
    test_error: float
    train_loss: float
    s_error: float
    rank_fraction: float
    delta: float
    eps: float
    eta: float
    iterations: int
    converged: bool
    max_rel_change: float
    #: local stability (:attr:`Stability.attracting`) when checked (multi-start solves), else None
    stable: bool | None = None
    #: the distinct fixed points a multi-start solve found (this one among them); empty for one start
    candidates: tuple[FixedPoint, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "candidates"}
        d["candidates"] = [{k: v for k, v in asdict(c).items() if k != "candidates"} for c in self.candidates]
        return d

    @property
    def params(self) -> tuple[float, float, float, float, float, float]:
        return (self.q, self.m, self.sigma, self.q_hat, self.m_hat, self.sigma_hat)


@dataclass(frozen=True)
class Stability:
    """Local stability of a fixed point of the state-evolution map (not the paper's replicon condition).

    ``radius_undamped``: spectral radius of the Jacobian of the undamped map ``(q, m, Σ) -> (q, m, Σ)``
    (finite differences, same nodes); ``radius_damped``: the same for the damped map used by the solver.
    ``stable`` means the damped iteration is locally attracting (``radius_damped < 1``); see also
    :attr:`attracting` (damping-independent).
    """

    radius_undamped: float
    radius_damped: float
    eigenvalues: tuple[complex, ...]
    stable: bool

    @property
    def attracting(self) -> bool:
        """True when some damping makes the iteration locally attracting: every eigenvalue ``λ`` of the
        undamped Jacobian has ``Re λ < 1`` (then ``|d + (1 − d) λ| < 1`` for ``d`` close enough to 1).
        This is the criterion used to choose among several fixed points; it does not depend on the
        damping a solve happened to use."""
        return all(ev.real < 1 for ev in self.eigenvalues)


def _prior(setting: Setting, qh: float, mh: float, sh: float) -> tuple[float, float, float, JValue, float]:
    """Matrix-denoising (prior) equations: ``(q, m, Σ)`` from the hats; returns also J and (δ, ε, η)."""
    delta = math.sqrt(max(qh, 1e-300)) / mh
    eps = 2 * setting.lam / mh
    eta = mh / sh
    jv = J_and_derivatives(setting.spectrum, delta, eps)
    q = eta**2 * jv.J
    m = eta * (jv.J - delta / 2 * jv.dJ_ddelta - eps / 2 * jv.dJ_deps)
    sigma = jv.dJ_ddelta / (2 * delta * sh)
    return q, m, sigma, jv, eta


def _train_loss(alpha, q, m, sigma, qh, mh, sh, EM, jv: JValue) -> float:
    return (qh * sigma - sh * q) / 4 + mh * m / 2 + alpha * EM - mh**2 / (4 * sh) * jv.J


def state_evolution(
    setting: Setting,
    alpha: float,
    *,
    init: FixedPoint | Sequence[float] | None = None,
    starts: str | Sequence[FixedPoint | Sequence[float]] | None = None,
    damping: float = 0.3,
    tol: float = 1e-6,
    max_iter: int = 500,
    nodes: int = 4096,
    seed: int = 0,
    channel: OutputChannel | None = None,
) -> FixedPoint:
    """Solve the state-evolution equations of THEORY.md C3 at sample ratio ``α = n/d²``.

    Parameters
    ----------
    setting : Setting
        The problem (``setting.lam`` is λ̃).
    alpha : float
        ``n/d²``, > 0.
    init : FixedPoint or (q, m, Σ) or None
        Warm start (e.g. the neighbouring point of a sweep).
    starts : "auto", a sequence of starts, or None
        Several fixed points (THEORY.md C3: "take the one with the lowest training loss that is
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
        Stop when the largest relative change of the six order parameters is below ``tol``.
    max_iter : int
        Iteration cap (``converged`` is False when reached).
    nodes : int
        Number of fixed quasi-random nodes of the output expectation.
    seed : int
        Scrambling seed of the nodes.
    channel : OutputChannel, optional
        Precomputed nodes for ``setting`` (sweeps share one).

    Returns
    -------
    FixedPoint
    """
    alpha = check_real("alpha", alpha, min=0.0, min_open=True)
    damping = check_real("damping", damping, min=0.0, max=1.0, max_open=True)
    tol = check_real("tol", tol, min=0.0, min_open=True)
    max_iter = check_int("max_iter", max_iter, min=1)
    start_list = _starts(setting, init, starts)
    with _one_thread():
        if start_list is None:
            return _solve_retry(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
        ch = channel if channel is not None else OutputChannel(setting, nodes, seed)
        found: list[FixedPoint] = []
        for st in start_list:
            fp = _solve_retry(setting, alpha, st, damping, tol, max_iter, nodes, seed, ch)
            if fp.converged and not any(_same_point(fp, o) for o in found):
                found.append(fp)
        if not found:  # nothing converged: report the first start's attempt, unchecked
            return _solve_retry(setting, alpha, start_list[0], damping, tol, max_iter, nodes, seed, ch)
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
    """Index of the fixed point to report among ``candidates`` (THEORY.md C3).

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


def _solve_retry(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel) -> FixedPoint:
    fp = _solve(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
    # an iteration that left the valid region (or stalled) is retried with stronger damping
    while not fp.converged and damping < 0.85:
        damping = min(0.9, damping + 0.3)
        fp = _solve(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel)
    return fp


def _solve(setting, alpha, init, damping, tol, max_iter, nodes, seed, channel) -> FixedPoint:
    ch = channel if channel is not None else OutputChannel(setting, nodes, seed)
    q0 = setting.q0
    if init is None:
        q, m, sigma = 0.5 * q0, 0.4 * q0, 1.0
    elif isinstance(init, FixedPoint):
        q, m, sigma = init.q, init.m, init.sigma
    else:
        q, m, sigma = (float(v) for v in init)
    qh = mh = sh = None
    converged, change, it = False, math.inf, 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported after the loop)
        nqh, nmh, nsh, EM = ch.hats(q, m, sigma, alpha)
        if qh is None:
            qh, mh, sh = nqh, nmh, nsh
        else:
            qh = damping * qh + (1 - damping) * nqh
            mh = damping * mh + (1 - damping) * nmh
            sh = damping * sh + (1 - damping) * nsh
        nq, nm, ns, jv, eta = _prior(setting, qh, mh, sh)
        old = np.array([q, m, sigma])
        q = damping * q + (1 - damping) * nq
        m = damping * m + (1 - damping) * nm
        sigma = damping * sigma + (1 - damping) * ns
        # keep the covariance [[Q0, m], [m, q]] positive definite
        m = max(min(m, math.sqrt(q0 * q) * (1 - 1e-12)), -math.sqrt(q0 * q) * (1 - 1e-12))
        new = np.array([q, m, sigma])
        hats_new, hats_old = np.array([nqh, nmh, nsh]), np.array([qh, mh, sh])
        change = float(
            max(
                np.max(np.abs(new - old) / np.maximum(np.abs(new), 1e-300)),
                np.max(np.abs(hats_new - hats_old) / np.maximum(np.abs(hats_new), 1e-300)),
            )
        )
        if not all(math.isfinite(v) for v in (q, m, sigma, qh, mh, sh)) or sigma <= 0 or sh <= 0:
            break
        if change < tol:
            converged = True
            break
    return _finish(setting, ch, alpha, q, m, sigma, qh, mh, sh, it, converged, change)


def _finish(setting, ch, alpha, q, m, sigma, qh, mh, sh, it, converged, change) -> FixedPoint:
    _, _, _, EM = ch.hats(q, m, sigma, alpha)
    delta = math.sqrt(max(qh, 1e-300)) / mh
    eps = 2 * setting.lam / mh
    jv = J_and_derivatives(setting.spectrum, delta, eps)
    return FixedPoint(
        alpha=alpha,
        q=q,
        m=m,
        sigma=sigma,
        q_hat=qh,
        m_hat=mh,
        sigma_hat=sh,
        test_error=ch.test_error(q, m),
        train_loss=_train_loss(alpha, q, m, sigma, qh, mh, sh, EM, jv),
        s_error=setting.q0 + q - 2 * m,
        rank_fraction=jv.mass,
        delta=delta,
        eps=eps,
        eta=mh / sh,
        iterations=it,
        converged=converged,
        max_rel_change=change,
    )


def sweep(
    setting: Setting,
    alphas: Sequence[float],
    *,
    lams: Sequence[float] | None = None,
    **kwargs,
) -> list[FixedPoint]:
    """Fixed points along a sweep of ``α`` (or of ``λ̃`` when ``lams`` is given, at ``alphas[0]``),
    each warm-started from its neighbour's fixed point and sharing one set of nodes per setting."""
    out: list[FixedPoint] = []
    prev: FixedPoint | None = None
    if lams is None:
        ch = OutputChannel(setting, kwargs.get("nodes", 4096), kwargs.get("seed", 0))
        for a in alphas:
            prev = state_evolution(setting, a, init=prev, channel=ch, **kwargs)
            out.append(prev)
        return out
    for lam in lams:
        s = replace(setting, lam=lam)
        ch = OutputChannel(s, kwargs.get("nodes", 4096), kwargs.get("seed", 0))
        prev = state_evolution(s, alphas[0], init=prev, channel=ch, **kwargs)
        out.append(prev)
    return out


def stability(
    setting: Setting,
    fp: FixedPoint,
    *,
    damping: float = 0.5,
    nodes: int = 4096,
    seed: int = 0,
    step: float = 1e-5,
    channel: OutputChannel | None = None,
) -> Stability:
    """Local stability of the fixed point ``fp`` under the state-evolution map.

    The map is ``F(q, m, Σ)``: output equations then prior equations, undamped. Its Jacobian is taken by
    central finite differences (relative step ``step``) on the same quasi-random nodes (``channel``, or
    ``nodes`` nodes with scrambling ``seed``). ``damping`` only sets ``radius_damped`` and ``stable``.
    """
    damping = check_real("damping", damping, min=0.0, max=1.0, max_open=True)
    step = check_real("step", step, min=0.0, min_open=True)
    ch = channel if channel is not None else OutputChannel(setting, nodes, seed)

    def F(x: np.ndarray) -> np.ndarray:
        qh, mh, sh, _ = ch.hats(x[0], x[1], x[2], fp.alpha)
        q, m, s, _, _ = _prior(setting, qh, mh, sh)
        return np.array([q, m, s])

    x0 = np.array([fp.q, fp.m, fp.sigma])
    Jm = np.zeros((3, 3))
    for j in range(3):
        h = step * max(abs(x0[j]), 1e-8)
        e = np.zeros(3)
        e[j] = h
        Jm[:, j] = (F(x0 + e) - F(x0 - e)) / (2 * h)
    ev = np.linalg.eigvals(Jm)
    evd = damping + (1 - damping) * ev
    r_u = float(np.max(np.abs(ev)))
    r_d = float(np.max(np.abs(evd)))
    return Stability(r_u, r_d, tuple(complex(v) for v in ev), r_d < 1)
