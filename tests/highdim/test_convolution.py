"""The MP ⊞ semicircle Cauchy transform by Cardano's formula (attnlab.highdim.convolution)."""

import math

import numpy as np
import pytest

from attnlab.highdim import MarchenkoPastur, semicircle_convolution
from attnlab.highdim.convolution import _cubic_roots


def test_cubic_roots_against_companion_eigenvalues():
    # random monic cubics with real coefficients: the three roots match numpy's companion-matrix
    # eigenvalues (an independent method) as sets, to 1e-9 (simple roots of O(1) coefficients)
    rng = np.random.default_rng(0)
    B, C, D = (rng.normal(size=200) * 3 for _ in range(3))
    R = _cubic_roots(B, C, D)
    for i in range(200):
        ref = np.roots([1.0, B[i], C[i], D[i]])
        dist = np.abs(ref[:, None] - R[i][None, :])  # (3, 3)
        assert np.max(np.min(dist, axis=1)) < 1e-9 * (1 + np.max(np.abs(ref)))
        assert np.max(np.min(dist, axis=0)) < 1e-9 * (1 + np.max(np.abs(ref)))


@pytest.mark.parametrize(("k0", "delta"), [(0.05, 1e-3), (0.5, 1e-3), (0.5, 0.3), (4.0, 0.01), (0.2, 3.0)])
def test_density_and_real_part_against_the_cubic(k0, delta):
    # inside the support the chosen root solves the cubic to rounding and has Im G < 0 (the density); the
    # density integrates to the mass of the support (1: every component together), checked by quadrature
    law = semicircle_convolution(MarchenkoPastur(k0), delta)
    s, t = math.sqrt(k0), delta**2
    for a, b in law.intervals:
        x = np.linspace(a, b, 401)[1:-1]
        rho, reg = law._eval_mp(x)
        g = reg - 1j * math.pi * rho
        res = (t / s) * g**3 - (x / s + t) * g**2 + (x + 1 / s - s) * g - 1
        assert np.max(np.abs(res)) < 1e-9 * max(1.0, t / s * np.max(np.abs(g)) ** 3)
        assert np.all(rho >= 0)
    _, w, _ = law.nodes()
    assert np.sum(w) == pytest.approx(1.0, abs=1e-10)


# --- the resolution floor -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "eig",
    [np.array([0.5, 1.0, 2.0]), np.array([1.0]), np.array([0.0, 0.0, 1.0, 3.0]), np.linspace(-2, 5, 40)],
)
def test_discrete_target_at_its_floor_against_the_zero_width_limit(eig):
    """Just above the floor, ``J(δ, ε)`` of a discrete target is its ``δ → 0`` limit ``Σ w_i (s_i − ε)₊²``
    (an independent closed form; the ``O(δ²)`` correction is ~1e-20 here) to 3e-5 relative: the worst
    error measured on these spectra at the floor was 3e-6, and a tenth of the floor (below it) gives up
    to 8e-5 or NaN. The mass is 1 to the same order."""
    from attnlab.highdim.convolution import resolution_floor
    from attnlab.highdim.spectra import J_and_derivatives
    from attnlab.highdim.targets import DiscreteSpectrum

    t = DiscreteSpectrum(eig)
    floor = resolution_floor(t)
    assert floor == pytest.approx(1e-10 * np.max(np.abs(eig)))
    jv = J_and_derivatives(t, floor * 1.0001, 0.3)
    limit = np.mean(np.clip(eig - 0.3, 0.0, None) ** 2)
    assert jv.J == pytest.approx(limit, rel=3e-5)
    assert jv.mass == pytest.approx(np.mean(eig > 0.3), abs=3e-5)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
def test_below_the_floor_is_one_clear_error_scaled_with_the_target(scale):
    """A width below the floor is refused with one line naming ``delta``, the floor and the value; the floor
    follows the target's scale (the convolution is covariant under a common scale), for both kinds."""
    from attnlab.highdim.convolution import resolution_floor
    from attnlab.highdim.targets import DiscreteSpectrum, MarchenkoPastur

    t = DiscreteSpectrum(scale * np.array([0.5, 1.0, 2.0]))
    floor = resolution_floor(t)
    assert floor == pytest.approx(2e-10 * scale)
    semicircle_convolution(t, 1.01 * floor)  # accepted
    with pytest.raises(ValueError, match=r"^delta: expected >= .*not resolved.*got ") as err:
        semicircle_convolution(t, 0.99 * floor)
    assert "\n" not in str(err.value)
    mp = MarchenkoPastur(0.5)
    assert resolution_floor(mp) == pytest.approx(1e-24 * np.sqrt(1.5))
    with pytest.raises(ValueError, match=r"^delta: expected >= "):
        semicircle_convolution(mp, 1e-30)
    with pytest.raises(ValueError, match=r"^target: expected MarchenkoPastur or DiscreteSpectrum"):
        resolution_floor("mp")


def test_marchenko_pastur_is_exact_down_to_its_floor():
    """At ten times the floor the closed-form cubic still gives ``J`` equal to its value at ``δ = 1e-12``
    (both are the ``δ → 0`` limit to ~1e-24 relative) to 1e-13: measured 5e-16, while NaN follows a factor
    of a hundred below the floor."""
    from attnlab.highdim.convolution import resolution_floor
    from attnlab.highdim.spectra import J_and_derivatives
    from attnlab.highdim.targets import MarchenkoPastur

    for k0 in (0.05, 0.5, 4.0):
        t = MarchenkoPastur(k0)
        ref = J_and_derivatives(t, 1e-12, 0.3).J
        assert J_and_derivatives(t, 10 * resolution_floor(t), 0.3).J == pytest.approx(ref, rel=1e-13)
