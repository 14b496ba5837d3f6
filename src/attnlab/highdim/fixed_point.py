"""Fixed points of the state evolution (docs/highdim.md C3): the map, its damped and accelerated iterations.

The map acts on ``x = (q, m, Σ)``: the output equations give the hats from ``x`` (expectations on fixed
nodes, :class:`~attnlab.highdim.channel.OutputChannel`), the prior (matrix-denoising) equations give the next
``x`` from the hats. A fixed point ``x = F(x)`` is found either by the damped iteration
``x ← d·x + (1 − d)·F(x)`` (hats damped alike; :func:`solve_damped`) or by Anderson acceleration of that
iteration (:func:`solve_anderson`, the default): the next iterate is the combination of the last few
iterates whose residuals ``F(x) − x`` cancel best in least squares, a multisecant quasi-Newton step on the
three order parameters. On a 3-dimensional map it converges superlinearly where the damped iteration
contracts by a factor close to 1 (small λ̃, near the interpolation peak).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from attnlab.highdim.channel import OutputChannel
from attnlab.highdim.setting import Setting
from attnlab.highdim.spectra import J_and_derivatives, JValue

__all__ = [
    "FixedPoint",
    "Stability",
    "MAX_STEP",
    "finish",
    "prior_equations",
    "solve_anderson",
    "solve_damped",
    "start_point",
    "to_x",
    "to_y",
]


@dataclass(frozen=True)
class FixedPoint:
    """A state-evolution fixed point and its observables (all per docs/highdim.md C3 conventions).

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
    #: weight of the second minimum on nodes whose proximal minima swap order at the fixed point (a
    #: switching cycle on fixed nodes resolved by mixing, :mod:`attnlab.highdim.newton`); NaN when such a
    #: cycle was not resolved (then ``converged`` is False); None otherwise
    mixed_weight: float | None = None
    #: number of independently scrambled node sets the point averages (``scrambles`` of
    #: :func:`~attnlab.highdim.state_evolution.state_evolution`); 1 for a solve on one set of nodes
    scrambles: int = 1
    #: standard errors of the quadrature (randomised quasi-Monte Carlo: the spread of the solves on the
    #: independent scrambles over √scrambles) of ``q``, ``m``, ``sigma``, ``test_error``, ``train_loss`` and
    #: ``s_error``; None for a solve on one set of nodes
    stderr: dict[str, float] | None = None
    #: ``"default"`` when a warm start (``init``) ended unconverged and the point was solved again from the
    #: default start (:func:`~attnlab.highdim.state_evolution.state_evolution`); None when the point comes
    #: from the start asked for
    start: str | None = None
    #: the relative accuracy asked for (``rtol`` of :func:`~attnlab.highdim.state_evolution.state_evolution`),
    #: None when none was
    rtol: float | None = None
    #: with ``rtol``: whether the relative standard errors of ``q``, ``m``, ``sigma``, ``test_error`` and
    #: ``train_loss`` met it by the rule of :mod:`attnlab.highdim.se_target` (False when the budget of
    #: scrambles ran out first, a batch's refinement failed, or the point is not converged); None without
    #: ``rtol``
    accuracy_met: bool | None = None

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


def prior_equations(
    setting: Setting, qh: float, mh: float, sh: float
) -> tuple[float, float, float, JValue, float]:
    """Matrix-denoising (prior) equations: ``(q, m, Σ)`` from the hats; returns also J and (δ, ε, η).

    ``m̂ <= 0`` is outside their domain (a ValueError, which the solvers treat as a failed step): it is where
    the penalty switches every direction off and the estimator collapses to zero, a point the equations in
    ``(δ, ε)`` cannot represent."""
    if not mh > 0:
        raise ValueError(f"m_hat: expected a positive hat, got {mh!r} (the estimator collapses to zero)")
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


def start_point(setting: Setting, init) -> tuple[float, float, float]:
    """``(q, m, Σ)`` to start a solve from: ``init`` (a FixedPoint or a triple), or ``(Q0/2, 0.4 Q0, 1)``."""
    if init is None:
        q0 = setting.q0
        return 0.5 * q0, 0.4 * q0, 1.0
    if isinstance(init, FixedPoint):
        return init.q, init.m, init.sigma
    q, m, sigma = (float(v) for v in init)
    return q, m, sigma


def solve_damped(
    setting: Setting, alpha: float, init, damping: float, tol: float, max_iter: int, ch: OutputChannel
) -> FixedPoint:
    """The damped iteration: stop when the largest relative change of the six order parameters in one
    iteration is below ``tol``. A step to a value that is not finite (or to ``Σ`` or ``Σ̂`` ≤ 0) is
    rejected: the iteration stops unconverged at its last iterate."""
    q0 = setting.q0
    q, m, sigma = start_point(setting, init)
    qh = mh = sh = None
    converged, change, it = False, math.inf, 0
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported after the loop)
        nqh, nmh, nsh, EM = ch.hats(q, m, sigma, alpha)
        last = (q, m, sigma, qh, mh, sh)
        if qh is None:
            qh, mh, sh = nqh, nmh, nsh
        else:
            qh = damping * qh + (1 - damping) * nqh
            mh = damping * mh + (1 - damping) * nmh
            sh = damping * sh + (1 - damping) * nsh
        try:
            nq, nm, ns, jv, eta = prior_equations(setting, qh, mh, sh)
        except ValueError:  # hats outside the prior equations' domain (δ not finite): a failed step
            nq = nm = ns = math.nan
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
            # a failed step (the map not finite, or out of its domain): rejected, the last iterate reported
            # unconverged (the caller retries with stronger damping); none before the first step
            if last[3] is not None:
                q, m, sigma, qh, mh, sh = last
                change = math.inf
            break
        if change < tol:
            converged = True
            break
    return finish(setting, ch, alpha, q, m, sigma, qh, mh, sh, it, converged, change)


def finish(
    setting, ch, alpha, q, m, sigma, qh, mh, sh, it, converged, change, EM=None, jv=None
) -> FixedPoint:
    """The FixedPoint at ``(q, m, Σ)`` with hats ``(q̂, m̂, Σ̂)``; ``EM`` and ``jv`` when already known at
    exactly these values (else recomputed)."""
    if EM is None:
        _, _, _, EM = ch.hats(q, m, sigma, alpha)
    # hats not positive (m̂ or Σ̂ <= 0, where the estimator collapses to zero): outside the prior equations'
    # domain (prior_equations); reported as a failed, unconverged point with the fields that need them nan
    inside = mh > 0 and sh > 0
    delta = math.sqrt(max(qh, 1e-300)) / mh if inside else math.nan
    eps = 2 * setting.lam / mh if inside else math.nan
    if jv is None and not inside:
        jv = JValue(math.nan, math.nan, math.nan, math.nan)
    if jv is None:
        try:
            jv = J_and_derivatives(setting.spectrum, delta, eps)
        except ValueError:  # δ below the convolution's resolution floor: the map failed there
            jv = JValue(math.nan, math.nan, math.nan, math.nan)
    train = _train_loss(alpha, q, m, sigma, qh, mh, sh, EM, jv) if inside else math.nan
    test = ch.test_error(q, m)
    # a point with a field that is not finite is never reported converged (the map failed there)
    finite = all(math.isfinite(v) for v in (q, m, sigma, qh, mh, sh, train, test, jv.mass))
    return FixedPoint(
        alpha=alpha,
        q=q,
        m=m,
        sigma=sigma,
        q_hat=qh,
        m_hat=mh,
        sigma_hat=sh,
        test_error=test,
        train_loss=train,
        s_error=setting.q0 + q - 2 * m,
        rank_fraction=jv.mass,
        delta=delta,
        eps=eps,
        eta=mh / sh if inside else math.nan,
        iterations=it,
        converged=converged and finite,
        max_rel_change=change,
    )


MAX_STEP = 1.0  # largest move of one coordinate of y in one step
_ANDERSON_FROM = 0.1  # extrapolate only once every residual in y is below this (the map is near-linear)


def to_y(q0: float, x: np.ndarray) -> np.ndarray:
    """Unconstrained coordinates ``(log q, atanh(m/√(Q0 q)), log Σ)`` of ``x = (q, m, Σ)`` (the correlation
    clipped just inside (−1, 1))."""
    q, m, s = max(x[0], 1e-300), x[1], max(x[2], 1e-300)  # a zero q or Σ counts as very small
    c = min(max(m / math.sqrt(q0 * q), -1 + 1e-12), 1 - 1e-12)
    return np.array([math.log(q), math.atanh(c), math.log(s)])


def to_x(q0: float, y: np.ndarray) -> np.ndarray:
    """``x = (q, m, Σ)`` from the unconstrained coordinates ``y`` of :func:`to_y`."""
    q = math.exp(y[0])
    return np.array([q, math.tanh(y[1]) * math.sqrt(q0 * q), math.exp(y[2])])


def solve_anderson(
    setting: Setting,
    alpha: float,
    init,
    damping: float,
    tol: float,
    max_iter: int,
    ch: OutputChannel,
    memory: int = 4,
) -> FixedPoint:
    """Anderson-accelerated iteration of ``y ← y + (1 − d)·(Y(F(x)) − y)``.

    The iteration runs in the unconstrained coordinates ``y = (log q, atanh(m/√(Q0 q)), log Σ)``: every
    ``y`` is a valid ``(q, m, Σ)`` (``q, Σ > 0``, ``m² < Q0 q``), and ``q`` and ``Σ``, which range over
    orders of magnitude as ``λ̃ → 0`` (Σ grows like 1/λ̃ past the interpolation threshold), move additively.
    With residuals ``r_k = Y(F(x_k)) − y_k`` and the differences ``ΔY, ΔR`` of the last ``memory``
    iterates, ``γ`` minimises ``‖r_k − ΔR γ‖`` and ``y_{k+1} = y_k + β r_k − (ΔY + β ΔR) γ``, ``β = 1 − d``
    (the first step is the damped step). Far from the fixed point (a residual above 0.1 in some coordinate
    of ``y``, a change of q or Σ by more than 10%) the map is far from linear and the extrapolation can run
    off along directions where ``F`` grows with ``x``; there the step is the plain damped one. Safeguards:
    when the map cannot be evaluated (hats outside the
    domain of the prior equations) the step from the last good iterate is halved and the history cleared;
    the history is also cleared when the residual grows to twice the smallest since the last clearing, and
    no coordinate of ``y`` moves by more than 1 in one step (a factor e on ``q`` or ``Σ``).

    The proximal step of each evaluation is warm-started from the previous one. At convergence the point
    is checked against the two-start proximal step of :meth:`OutputChannel.prox_best` (what
    :meth:`OutputChannel.hats` does): the objective of the proximal step need not be convex (large ``Σ``),
    and where some node ends in another local minimum the iteration continues with two-start steps
    throughout, so the fixed point is always that of the map :func:`solve_damped` iterates.

    Converged: the relative residual ``max |F(x) − x|/|F(x)|`` is below ``tol/10``; the distance to the
    fixed point is then about the residual over ``1 − ρ`` (``ρ`` the contraction of the slowest mode of
    the map), below ``tol`` for ``ρ ≤ 0.9``. ``iterations`` counts map evaluations.
    """
    q0 = setting.q0
    beta = 1.0 - damping
    x = np.array(start_point(setting, init), dtype=float)
    y = to_y(q0, x)
    x = to_x(q0, y)
    warm = True  # warm-started proximal steps until the cold-start check fails once
    h_prev: torch.Tensor | None = None
    Y: list[np.ndarray] = []
    R: list[np.ndarray] = []
    best = math.inf
    good: tuple[np.ndarray, np.ndarray] | None = None  # last (y, r) whose evaluation succeeded
    converged, change, it = False, math.inf, 0
    hats = (math.nan, math.nan, math.nan)
    final = (None, None)  # (E[M], J) at the returned point when known
    for it in range(1, max_iter + 1):  # noqa: B007 (it is reported after the loop)
        ev = _evaluate(setting, alpha, x, ch, h_prev)
        if ev is None:  # the map failed at x: a shorter step from the last good point, history cleared
            if good is None:
                break
            Y.clear(), R.clear()
            gy, gr = good
            beta = beta / 2
            y = gy + beta * gr
            x = to_x(q0, y)
            continue
        fx, hx, h, EM, jv = ev
        change = float(np.max(np.abs(fx - x) / np.maximum(np.abs(fx), 1e-300)))
        if change < tol / 10:
            if warm and h_prev is not None:
                # compare with cold starts: if some node sits in another local minimum, the warm-started
                # map is not the cold-started one; finish with cold starts (a few more evaluations)
                hc, _ = ch.prox_best(ch.z_of(x[0], x[1]), x[2])
                off = (hc - h).abs().amax(-1) > 1e-7 * (1 + hc.abs().amax(-1))  # (N,)
                if bool(off.any()):
                    warm, h_prev = False, None
                    Y.clear(), R.clear()
                    best = math.inf
                    continue
            converged, hats, final = True, hx, (EM, jv)
            break
        r = to_y(q0, fx) - y
        hats, good = hx, (y.copy(), r.copy())
        h_prev = h if warm else None
        rn = float(np.linalg.norm(r))
        if rn > 2 * best:  # the extrapolation overshot: restart the history from here
            Y.clear(), R.clear()
            best = rn
        best = min(best, rn)
        Y.append(y.copy())
        R.append(r)
        if len(Y) > memory + 1:
            Y.pop(0), R.pop(0)
        step = beta * r
        if len(Y) >= 2 and float(np.max(np.abs(r))) < _ANDERSON_FROM:
            dY = np.diff(np.array(Y), axis=0).T  # (3, k)
            dR = np.diff(np.array(R), axis=0).T  # (3, k)
            gamma, *_ = np.linalg.lstsq(dR, r, rcond=None)
            step = beta * r - (dY + beta * dR) @ gamma
        # a trust region: no order parameter moves by more than a factor e (or tanh-units of 1) at once
        big = float(np.max(np.abs(step)))
        if big > MAX_STEP:
            step = step * (MAX_STEP / big)
        y = y + step
        x = to_x(q0, y)
    qh, mh, sh = hats
    if not converged and h_prev is not None:  # report x with the hats at x itself
        qh, mh, sh, *_ = ch.hats_and_prox(x[0], x[1], x[2], alpha)
    return finish(setting, ch, alpha, x[0], x[1], x[2], qh, mh, sh, it, converged, change, *final)


def _evaluate(setting, alpha, x, ch: OutputChannel, h_prev):
    """``(F(x), hats(x), h)``, or None where the map is not defined (hats leave the domain of the prior)."""
    try:
        qh, mh, sh, EM, h = ch.hats_and_prox(x[0], x[1], x[2], alpha, h0=h_prev)
        if not (qh > 0 and mh > 0 and sh > 0 and all(map(math.isfinite, (qh, mh, sh)))):
            return None
        q, m, s, jv, _ = prior_equations(setting, qh, mh, sh)
    except ValueError:
        return None
    fx = np.array([q, m, s])
    if not np.all(np.isfinite(fx)):
        return None
    return fx, (qh, mh, sh), h, EM, jv
