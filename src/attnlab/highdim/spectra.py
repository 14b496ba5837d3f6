"""Target spectra, their free convolution with a semicircle, and the function J (THEORY.md C3, C4).

Conventions
-----------
The Cauchy transform is ``G(z) = ∫ μ(dx) / (z − x)`` (so ``G(z) ~ 1/z`` at infinity and the density is
``ρ(x) = −Im G(x + i0) / π``). ``μ_δ = μ0 ⊞ semicircle(variance δ²)``; with ``t = δ²`` the subordination
relation is ``G_δ(z) = G_0(z − t G_δ(z))``.

Two targets:

* :class:`MarchenkoPastur` — the spectrum of ``S0 = W0ᵀW0/√(p0 d)`` at ``d → ∞`` (an atom of mass
  ``1 − κ0`` at 0 when ``κ0 < 1``). Its free convolution has a closed-form cubic for ``G_δ`` (the fast path).
* :class:`DiscreteSpectrum` — ``d`` eigenvalues (a finite-d power law, a sampled matrix, any list). Its free
  convolution is computed on the real axis through Biane's parametrisation of the subordination function:
  ``ω = u + i v(u)`` with ``Σ_i w_i / ((u − s_i)² + v²) = 1/t``, ``x = u + t Re G_0(ω)``,
  ``ρ(x) = v / (π t)``,
  ``Re G_δ(x) = (x − u)/t``.

``J(δ, ε) = ∫_ε^∞ (x − ε)² μ_δ(dx)``; its derivatives are single integrals:
``∂_ε J = −2 ∫_ε^∞ (x − ε) μ_δ(dx)`` and, from the free heat equation ``∂_t ∫ f dμ_t =
½ ∬ (f'(x) − f'(y))/(x − y) dμ_t dμ_t`` with ``f'(x)/2 = (x − ε)_+``,
``∂_δ J = 4 δ ∫_ε^∞ (x − ε) ρ_δ(x) Re G_δ(x) dx``. All integrals use Gauss–Legendre nodes in an angle variable
(``x = a + (b − a)(1 − cos θ)/2``), exact for the square-root edges of the support.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from attnlab.core.validation import check_int, check_real

__all__ = [
    "MarchenkoPastur",
    "DiscreteSpectrum",
    "ConvolvedLaw",
    "JValue",
    "power_law_spectrum",
    "semicircle_convolution",
    "J",
    "J_and_derivatives",
]

_NODES = 192  # default nodes per support interval (see ConvolvedLaw.nodes)


@functools.lru_cache(maxsize=64)
def _leggauss(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Legendre nodes and weights on [−1, 1] (cached; treat as read-only)."""
    return np.polynomial.legendre.leggauss(n)


def _angle_nodes(a: float, b: float, n: int = _NODES) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights on [a, b] for integrands with square-root behaviour at both ends."""
    gx, gw = _leggauss(n)
    theta = (gx + 1.0) * (math.pi / 2)  # (n,) in (0, π)
    x = a + (b - a) * (1.0 - np.cos(theta)) / 2
    w = gw * (math.pi / 2) * (b - a) * np.sin(theta) / 2
    return x, w


def _composite_nodes(lo: float, hi: float, inner: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
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


def _graded_nodes(lo: float, hi: float, inner: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite quadrature on [lo, hi] split at ``inner``, every piece angle-mapped at both ends (nodes
    cluster quadratically at every break point, so square-root edges, narrow necks between support pieces
    and a break point placed close to an outer edge are all integrated accurately)."""
    brk = np.unique(np.concatenate([[lo], np.asarray(inner, dtype=float), [hi]]))
    brk = brk[(brk >= lo) & (brk <= hi)]
    if brk.size == 2:
        return _angle_nodes(lo, hi, n)
    m = max(32, n // 6)
    pieces = [_angle_nodes(a, b, m) for a, b in zip(brk[:-1], brk[1:]) if b > a]
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


# ---------------------------------------------------------------------------------------------------------
# target spectra


@dataclass(frozen=True)
class MarchenkoPastur:
    """Spectrum of ``S0 = W0ᵀW0/√(p0 d)`` with ``κ0 = p0/d`` (``d → ∞``).

    The non-zero part is ``√κ0 ×`` a Marchenko–Pastur law of ratio ``1/κ0``; ``Q0 = ∫ x² μ0 = 1 + κ0``.
    """

    kappa0: float

    def __post_init__(self) -> None:
        check_real("kappa0", self.kappa0, min=0.0, min_open=True)

    @property
    def q0(self) -> float:
        """Second moment ``Tr S0²/d``."""
        return 1.0 + self.kappa0

    def cauchy(self, z: np.ndarray) -> np.ndarray:
        """``G_0(z)`` for ``Im z > 0`` (closed form, the root with ``G ~ 1/z``)."""
        return _mp_cauchy_quadratic(np.asarray(z, dtype=complex), self.kappa0)


def _mp_cauchy_quadratic(z: np.ndarray, k0: float) -> np.ndarray:
    # δ = 0 limit of the cubic: (z/√κ0) G² − (z + 1/√κ0 − √κ0) G + 1 = 0
    s = math.sqrt(k0)
    a = z / s
    b = -(z + 1 / s - s)
    disc = np.sqrt(b * b - 4 * a)
    r1 = (-b + disc) / (2 * a)
    r2 = (-b - disc) / (2 * a)
    # pick the root with Im G <= 0 in the upper half plane
    return np.where(r1.imag <= r2.imag, r1, r2)


@dataclass(frozen=True)
class DiscreteSpectrum:
    """A finite list of eigenvalues ``s_i`` (each with mass ``1/len(s)``), e.g. a finite-d target."""

    eigenvalues: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        s = np.sort(np.asarray(self.eigenvalues, dtype=float).ravel())
        if s.size == 0 or not np.all(np.isfinite(s)):
            raise ValueError(f"eigenvalues: expected a non-empty finite array, got {s.size} values")
        object.__setattr__(self, "eigenvalues", s)

    @property
    def q0(self) -> float:
        """Second moment ``Tr S0²/d``."""
        return float(np.mean(self.eigenvalues**2))

    @property
    def d(self) -> int:
        return int(self.eigenvalues.size)

    def cauchy(self, z: np.ndarray) -> np.ndarray:
        """``G_0(z) = mean_i 1/(z − s_i)``."""
        z = np.asarray(z, dtype=complex)
        return np.mean(1.0 / (z[..., None] - self.eigenvalues), axis=-1)


def power_law_spectrum(d: int, gamma: float) -> DiscreteSpectrum:
    """``s_i ∝ i^{−γ}``, ``i = 1..d``, normalised to ``Tr S0²/d = 1`` (so ``s_1 ∝ √d``; THEORY.md C1, C6)."""
    d = check_int("d", d, min=1)
    gamma = check_real("gamma", gamma, min=0.0, min_open=True)
    s = np.arange(1, d + 1, dtype=float) ** (-gamma)
    s *= math.sqrt(d / np.sum(s**2))
    return DiscreteSpectrum(s)


# ---------------------------------------------------------------------------------------------------------
# the convolved law


@dataclass(frozen=True)
class ConvolvedLaw:
    """``μ_δ = μ0 ⊞ semicircle(δ²)`` on the real axis: support intervals and quadrature.

    Use :func:`semicircle_convolution` to build one. ``intervals`` lists the support components
    ``(a, b)`` in increasing order; ``masses`` their masses.
    """

    target: MarchenkoPastur | DiscreteSpectrum
    delta: float
    intervals: tuple[tuple[float, float], ...]
    # Biane parametrisation (discrete targets): matching intervals in u-space
    u_intervals: tuple[tuple[float, float], ...] = ()

    # -- pointwise ------------------------------------------------------------------------------------
    def _eval_mp(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(density, Re G) at real ``x`` from the cubic (MP fast path)."""
        k0, t = self.target.kappa0, self.delta**2
        s = math.sqrt(k0)
        x = np.asarray(x, dtype=float)
        n = x.size
        # coefficients of a G³ + b G² + c G + d = 0, normalised to monic
        a = t / s
        b = -(x / s + t)
        c = x + 1 / s - s
        comp = np.zeros((n, 3, 3))  # (n, 3, 3) companion matrices
        comp[:, 0, :] = -np.stack([b / a, c / a, np.full(n, -1.0 / a)], axis=-1)
        comp[:, 1, 0] = 1.0
        comp[:, 2, 1] = 1.0
        roots = np.linalg.eigvals(comp)  # (n, 3)
        idx = np.argmin(roots.imag, axis=-1)
        g = roots[np.arange(n), idx]
        # polish by Newton on the cubic itself: the companion eigenvalues lose ~|b/a| ~ 1/δ² in relative
        # accuracy at small δ, Newton restores full precision on the chosen (simple) root
        for _ in range(2):
            pg = ((a * g + b) * g + c) * g - 1.0
            dp = (3 * a * g + 2 * b) * g + c
            g = g - pg / np.where(dp == 0, 1.0, dp)
        rho = np.clip(-g.imag / math.pi, 0.0, None)
        return rho, g.real

    def _biane(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For real ``u`` inside the u-support: (x, density, Re G_0(ω), dx/du)."""
        s, w = self._atoms()
        t = self.delta**2
        a = u[:, None] - s[None, :]  # (n, k)
        a2 = a * a
        # v² solves g(v²) = 1/Σ w/(a² + v²) = t; g is concave increasing, so Newton from v² ≈ 0
        # (where g < t inside the u-support) converges monotonically from below.
        v2 = np.full(u.shape, 1e-300)
        for _ in range(200):
            dd = a2 + v2[:, None]
            phi = np.sum(w / dd, axis=1)
            dphi = np.sum(w / dd**2, axis=1)
            g = 1.0 / phi
            step = (t - g) / (dphi / phi**2)
            v2 = v2 + np.clip(step, 0.0, None)
            if np.all(np.abs(t - g) <= 1e-15 * t):
                break
        dd = a2 + v2[:, None]
        v = np.sqrt(v2)
        reg0 = np.sum(w * a / dd, axis=1)
        x = u + t * reg0
        rho = v / (math.pi * t)
        d2 = dd * dd
        s_a = np.sum(w * a / d2, axis=1)
        s_1 = np.sum(w / d2, axis=1)
        dr_du = np.sum(w * (v2[:, None] - a2) / d2, axis=1)
        dxdu = 1.0 + t * (dr_du + 2.0 * s_a**2 / s_1)
        return x, rho, reg0, dxdu

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        vals, counts = np.unique(self.target.eigenvalues, return_counts=True)
        return vals, counts / counts.sum()

    def _u_nodes(self, ua: float, ub: float, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Composite quadrature on [ua, ub]: pieces between the atoms inside, angle nodes at the ends."""
        s, _ = self._atoms()
        inner = s[(s > ua) & (s < ub)]
        # break at the atoms, thinned so that pieces are not much shorter than δ/8 (the integrand
        # varies on the scale of v ≳ the atom spacing inside a bulk), at most 200 pieces
        min_gap = max(self.delta / 8, (ub - ua) / 200)
        kept, last_b = [], ua
        for b in inner:
            if b - last_b >= min_gap and ub - b >= min_gap / 2:
                kept.append(b)
                last_b = b
        inner = np.asarray(kept)
        return _composite_nodes(ua, ub, inner, n)

    def density(self, x: np.ndarray) -> np.ndarray:
        """Density of ``μ_δ`` at real points ``x``."""
        x = np.atleast_1d(np.asarray(x, dtype=float))
        if isinstance(self.target, MarchenkoPastur):
            rho, _ = self._eval_mp(x)
            inside = np.zeros(x.shape, bool)
            for a, b in self.intervals:
                inside |= (x > a) & (x < b)
            return np.where(inside, rho, 0.0)
        out = np.zeros_like(x)
        for (a, b), (ua, ub) in zip(self.intervals, self.u_intervals):
            sel = (x > a) & (x < b)
            if sel.any():
                u = self._u_of_x(x[sel], ua, ub)
                _, rho, _, _ = self._biane(u)
                out[sel] = rho
        return out

    def _u_of_x(self, x: np.ndarray, ua: float, ub: float) -> np.ndarray:
        """Invert the increasing map ``u -> x(u)`` on [ua, ub] (bisection safeguarded Newton)."""
        lo = np.full(x.shape, ua)
        hi = np.full(x.shape, ub)
        u = (lo + hi) / 2
        for _ in range(100):
            xm, _, _, dxdu = self._biane(u)
            below = xm < x
            lo = np.where(below, u, lo)
            hi = np.where(below, hi, u)
            un = u - (xm - x) / np.where(dxdu > 0, dxdu, np.inf)
            bad = ~((un > lo) & (un < hi))
            un = np.where(bad, (lo + hi) / 2, un)
            if np.all(np.abs(un - u) <= 1e-14 * (1 + np.abs(u))):
                return un
            u = un
        return u

    # -- quadrature --------------------------------------------------------------------------------------
    def nodes(self, lower: float = -math.inf, n: int = _NODES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Quadrature on ``x > lower``: nodes ``x``, weights ``w`` (density included) and ``Re G(x)``.

        ``Σ w f(x) ≈ ∫_{lower}^∞ f dμ_δ`` for smooth ``f``. Accuracy (MP target): the mesh is graded
        geometrically around the features of width ~δ (smoothed atom, bulk edges, necks), so the mass and
        the low moments are exact to ~1e-14 for every κ0 and every δ down to 1e-3 (checked on a grid of
        δ in [1e-3, 0.1] and κ0 in [0.05, 4], including δ within a few percent of a support merger, where
        the density has a cusp ~ |x − x0|^{1/3}: necks and shoulders are graded down to δ·2^{-13}).
        """
        xs, ws, gs = [], [], []
        if isinstance(self.target, MarchenkoPastur):
            for a, b in self.intervals:
                lo = max(a, lower)
                if lo >= b:
                    continue
                # break at the smoothed atom, at the MP bulk edges and at interior density minima;
                # every piece is angle-mapped at both ends (see _graded_nodes), so a break point near
                # an outer edge or at a near-singular point costs nothing in accuracy
                x, w = _graded_nodes(lo, b, self._mp_breaks(lo, b), n)
                rho, reg = self._eval_mp(x)
                xs.append(x)
                ws.append(w * rho)
                gs.append(reg)
        else:
            t = self.delta**2
            for (a, b), (ua, ub) in zip(self.intervals, self.u_intervals):
                if lower >= b:
                    continue
                ulo = ua if lower <= a else float(self._u_of_x(np.array([lower]), ua, ub)[0])
                u, w = self._u_nodes(ulo, ub, n)
                x, rho, _, dxdu = self._biane(u)
                xs.append(x)
                ws.append(w * rho * dxdu)
                gs.append((x - u) / t)
        if not xs:
            return np.zeros(0), np.zeros(0), np.zeros(0)
        return np.concatenate(xs), np.concatenate(ws), np.concatenate(gs)

    def _mp_breaks(self, lo: float, hi: float) -> np.ndarray:
        """Break points of the MP quadrature on [lo, hi].

        Features of width ~δ sit at the smoothed atom (0, when κ0 < 1), at the MP bulk edges and at
        interior density minima (a neck between the smoothed atom and the bulk, or a cusp at a merger).
        Around each feature ``c`` the mesh is graded geometrically, ``c ± (δ/2)·2^k``, so that every piece
        is about as long as its distance to the feature (hp-refinement for near-singular integrands)."""
        k0, dl = self.target.kappa0, self.delta
        r = math.sqrt(k0)
        e_lo, e_hi = r * (1 - 1 / r) ** 2, r * (1 + 1 / r) ** 2
        necks = self._local_minima(lo, hi, e_lo)
        feats = [e_lo, e_hi, *necks]
        if k0 < 1:
            feats.append(0.0)
        span = hi - lo
        kmax = max(1, math.ceil(math.log2(max(span / (dl / 2), 2.0))))
        steps = (dl / 2) * 2.0 ** np.arange(kmax + 1)  # (K,)
        # a neck can be a cusp (density ~ |x − x0|^{1/3} at a merger): grade it down to δ·2^{-13}
        fine = (dl / 2) * 2.0 ** np.arange(-12, kmax + 1)  # (K + 12,)
        cand = [np.asarray(feats)]
        for c in feats:
            st = fine if c in necks else steps
            cand += [c - st, c + st]
        pts = np.unique(np.concatenate(cand))
        # keep points strictly inside, not closer than δ/8 to an outer edge (the end pieces' angle map
        # handles the square-root edge itself)
        gap = dl / 8
        pts = pts[(pts > lo + gap) & (pts < hi - gap)]
        if pts.size > 1:  # merge points that are much closer than their distance to the nearest neck
            scale = np.full(pts.shape, gap)
            for c in necks:
                scale = np.minimum(scale, np.abs(pts - c) / 4 + 1e-300)
            keep = np.concatenate([[True], np.diff(pts) > scale[1:]])
            pts = pts[keep]
        return pts

    def _local_minima(self, lo: float, hi: float, e_lo: float, grid: int = 2001) -> list[float]:
        """Interior strict local minima of the density on a grid over [lo, hi], refined by a second grid
        over the region of the smoothed atom and the lower bulk edge (where the features have width ~δ)."""
        dl = self.delta
        g1 = np.linspace(lo, hi, grid)
        a2, b2 = max(lo, -4 * dl), min(hi, max(e_lo, 0.0) + 4 * dl)
        g2 = np.linspace(a2, b2, grid) if b2 > a2 else np.zeros(0)
        xg = np.unique(np.concatenate([g1, g2]))[1:-1]
        if xg.size < 3:
            return []
        rho, _ = self._eval_mp(xg)
        is_min = (rho[1:-1] < rho[:-2]) & (rho[1:-1] < rho[2:])
        xm, rm = xg[1:-1][is_min], rho[1:-1][is_min]
        out = [float(v) for v in xm[np.argsort(rm)[:4]]]  # MP ⊞ SC has at most one neck; 4 is ample
        # just past a merger the neck is gone but a shoulder of width ≪ δ remains: the steepest point of
        # the density between the smoothed atom and the bulk
        sel = (xg > a2) & (xg < b2)
        if not out and sel.sum() > 3 and self.target.kappa0 < 1:
            xs, rs = xg[sel], rho[sel]
            slope = np.abs(np.diff(rs) / np.diff(xs))
            inner = (xs[1:] > 0) & (xs[1:] < b2 - dl)
            if inner.any():
                i = int(np.argmax(np.where(inner, slope, -1.0)))
                out.append(float((xs[i] + xs[i + 1]) / 2))
        return out

    def mass_above(self, x0: float) -> float:
        """``μ_δ((x0, ∞))``."""
        _, w, _ = self.nodes(x0)
        return float(min(max(np.sum(w), 0.0), 1.0))

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """``μ_δ((−∞, x])`` at each point of ``x``."""
        x = np.atleast_1d(np.asarray(x, dtype=float))
        return np.array([1.0 - self.mass_above(float(xi)) for xi in x])

    @property
    def upper_edge(self) -> float:
        return self.intervals[-1][1]


def semicircle_convolution(target: MarchenkoPastur | DiscreteSpectrum, delta: float) -> ConvolvedLaw:
    """The free convolution ``target ⊞ semicircle(variance δ²)`` (``δ > 0``).

    Parameters
    ----------
    target : MarchenkoPastur or DiscreteSpectrum
        The law ``μ0``.
    delta : float
        Width of the semicircle (its variance is ``δ²``), ``> 0``.
    """
    delta = check_real("delta", delta, min=0.0, min_open=True)
    if isinstance(target, MarchenkoPastur):
        return ConvolvedLaw(target, delta, _mp_support(target.kappa0, delta))
    if isinstance(target, DiscreteSpectrum):
        ui = _discrete_u_support(target.eigenvalues, delta**2)
        law = ConvolvedLaw(target, delta, (), ui)
        xi = []
        for ua, ub in ui:
            xe, _, _, _ = law._biane(np.array([ua, ub]))
            xi.append((float(xe[0]), float(xe[1])))
        return ConvolvedLaw(target, delta, tuple(xi), ui)
    raise ValueError(f"target: expected MarchenkoPastur or DiscreteSpectrum, got {type(target).__name__}")


def _mp_support(k0: float, delta: float) -> tuple[tuple[float, float], ...]:
    """Support of MP ⊞ SC: where the cubic's discriminant (a quartic in z) is negative."""
    from numpy.polynomial import Polynomial as P

    s, t = math.sqrt(k0), delta**2
    a = P([t / s])
    b = P([-t, -1 / s])
    c = P([1 / s - s, 1.0])
    d = P([-1.0])
    disc = 18 * a * b * c * d - 4 * b**3 * d + b**2 * c**2 - 4 * a * c**3 - 27 * a**2 * d**2
    r = disc.roots()
    real = np.sort(r[np.abs(r.imag) < 1e-9 * (1 + np.abs(r.real))].real)
    # refine with a few Newton steps on the polynomial
    dp = disc.deriv()
    for _ in range(3):
        real = real - disc(real) / np.where(dp(real) == 0, 1.0, dp(real))
    real = np.unique(np.round(real, 14))
    pts = np.concatenate([[real[0] - 1.0], real, [real[-1] + 1.0]])
    out = []
    for i in range(len(real) - 1):
        mid = (real[i] + real[i + 1]) / 2
        if disc(mid) < 0:
            out.append((float(real[i]), float(real[i + 1])))
    del pts
    return tuple(out)


def _discrete_u_support(s: np.ndarray, t: float) -> tuple[tuple[float, float], ...]:
    """u-intervals where ``F(u) = mean 1/(u − s_i)² > 1/t`` (Biane)."""
    vals, counts = np.unique(s, return_counts=True)
    return _u_support_weighted(vals, counts / counts.sum(), t)


def _u_support_weighted(s: np.ndarray, w: np.ndarray, t: float) -> tuple[tuple[float, float], ...]:
    inv_t = 1.0 / t

    def F(u: np.ndarray) -> np.ndarray:
        return np.sum(w / (u[:, None] - s[None, :]) ** 2, axis=1)

    def Fp(u: np.ndarray) -> np.ndarray:
        return -2.0 * np.sum(w / (u[:, None] - s[None, :]) ** 3, axis=1)

    def bisect(lo, hi, fn, increasing: bool):
        lo, hi = lo.copy(), hi.copy()
        for _ in range(64):
            mid = (lo + hi) / 2
            up = fn(mid) > 0
            if increasing:
                hi, lo = np.where(up, mid, hi), np.where(up, lo, mid)
            else:
                lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
        return (lo + hi) / 2

    span = math.sqrt(t) * 1.0 + 1e-300
    # outer edges: F(u) = 1/t, left of s[0] and right of s[-1]
    left = bisect(np.array([s[0] - 10 * span - 1.0]), np.array([s[0]]), lambda u: F(u) - inv_t, True)[0]
    right = bisect(np.array([s[-1]]), np.array([s[-1] + 10 * span + 1.0]), lambda u: F(u) - inv_t, False)[0]
    edges = [left]
    if s.size > 1:
        a, b = s[:-1], s[1:]
        # two neighbouring atoms alone give F >= (w_i^(1/3) + w_j^(1/3))³ / (s_j − s_i)² on the gap,
        # so only wider gaps can open; there, minimise the convex F (F' increasing) by bisection
        cand = (b - a) ** 2 > t * (w[:-1] ** (1 / 3) + w[1:] ** (1 / 3)) ** 3
        a, b = a[cand], b[cand]
        umin = bisect(a, b, Fp, True) if a.size else a
        fmin = F(umin) if a.size else a
        gap = fmin < inv_t
        if gap.any():
            ga, gb, gm = a[gap], b[gap], umin[gap]
            r1 = bisect(ga, gm, lambda u: F(u) - inv_t, False)
            r2 = bisect(gm, gb, lambda u: F(u) - inv_t, True)
            for x1, x2 in zip(r1, r2):
                edges.extend([x1, x2])
    edges.append(right)
    return tuple((float(edges[i]), float(edges[i + 1])) for i in range(0, len(edges), 2))


# ---------------------------------------------------------------------------------------------------------
# J and its derivatives


@dataclass(frozen=True)
class JValue:
    """``J(δ, ε)`` with ``∂_δ J``, ``∂_ε J`` and the mass ``μ_δ((ε, ∞))`` (the rank fraction)."""

    J: float
    dJ_ddelta: float
    dJ_deps: float
    mass: float


def J_and_derivatives(
    target: MarchenkoPastur | DiscreteSpectrum, delta: float, eps: float, n: int | None = None
) -> JValue:
    """``J(δ, ε) = ∫_ε^∞ (x − ε)² μ_δ(dx)`` and its partial derivatives (module docstring).

    Parameters
    ----------
    target : MarchenkoPastur or DiscreteSpectrum
        The target spectrum ``μ0``.
    delta : float
        Semicircle width ``δ > 0``.
    eps : float
        Threshold ``ε`` (any real).
    n : int, optional
        Quadrature size per support component (default 200 for MP, 96 for a discrete target; a
        component split into pieces uses ``n/4`` nodes per piece).
    """
    eps = check_real("eps", eps)
    if n is None:
        n = 200 if isinstance(target, MarchenkoPastur) else 96
    law = semicircle_convolution(target, delta)
    x, w, reg = law.nodes(eps, n)
    y = np.clip(x - eps, 0.0, None)
    J = float(np.sum(w * y * y))
    dJe = float(-2.0 * np.sum(w * y))
    dJd = float(4.0 * law.delta * np.sum(w * y * reg))
    mass = float(min(max(np.sum(w), 0.0), 1.0))
    return JValue(J, dJd, dJe, mass)


def J(target: MarchenkoPastur | DiscreteSpectrum, delta: float, eps: float) -> float:
    """``J(δ, ε)`` (see :func:`J_and_derivatives`)."""
    return J_and_derivatives(target, delta, eps).J
