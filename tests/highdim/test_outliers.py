"""Predicted and measured outliers of the learned spectrum, against planted spectra and the support
components of the convolved law counted directly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnlab.highdim import (
    DiscreteSpectrum,
    FixedPoint,
    Setting,
    count_outliers,
    power_law_spectrum,
    predicted_outliers,
    predicted_spectrum,
    semicircle_convolution,
)


def _fp(delta: float, eps: float, eta: float = 1.0) -> FixedPoint:
    # only δ, ε, η enter the predicted spectrum; the other order parameters are placeholders
    vals = {f.name: 0.0 for f in dataclasses.fields(FixedPoint) if f.name not in ("stable", "candidates")}
    vals.update(delta=delta, eps=eps, eta=eta, iterations=1, converged=True)
    return FixedPoint(**vals)


def test_three_planted_spikes_are_three_outliers():
    # 37 zero eigenvalues (the bulk after a small semicircle smearing) and three isolated spikes far above
    # it: each spike is its own support component of mass 1/d, so exactly three outliers at d = 40
    s = np.concatenate([np.zeros(37), [6.0, 9.0, 12.0]])
    setting = Setting(target=DiscreteSpectrum(s), noise=0.1, lam=0.01)
    ps = predicted_spectrum(setting, _fp(delta=0.3, eps=0.05, eta=1.3))
    assert predicted_outliers(ps, 40) == 3
    # the measured count uses the same edge: eigenvalues above it, whatever their number
    assert count_outliers(np.array([0.0, 0.1, ps.outlier_edge, ps.outlier_edge + 1e-9, 50.0]), ps) == 2


@pytest.mark.parametrize(("delta", "eps"), [(0.3, 0.1), (0.6, 0.2), (1.0, 0.5)])
def test_count_matches_the_support_components_counted_directly(delta, eps):
    # second method: the mass of the convolved law's components above the bulk component (the one holding
    # the most mass), from the law itself rather than the tabulated density of the predicted spectrum;
    # both round d × mass, so they agree exactly unless a mass sits within the trapezoid error (~1e-4 of
    # a mode here) of a half-integer
    d = 40
    spec = power_law_spectrum(d, 1.0)
    law = semicircle_convolution(spec, delta)
    masses = [law.mass_above(a) - law.mass_above(b) for a, b in law.intervals]
    ib = int(np.argmax(masses))
    direct = round(sum(m for (a, b), m in zip(law.intervals[ib + 1 :], masses[ib + 1 :]) if b > eps) * d)
    ps = predicted_spectrum(Setting(target=spec, noise=0.1, lam=0.01), _fp(delta, eps))
    assert predicted_outliers(ps, d) == direct
    assert direct >= 1  # the power law's leading eigenvalues stand out at these widths


def test_bad_inputs():
    ps = predicted_spectrum(Setting(target=power_law_spectrum(10, 1.0)), _fp(0.3, 0.1))
    with pytest.raises(ValueError, match="d"):
        predicted_outliers(ps, 0)
    with pytest.raises(ValueError, match="spectrum"):
        predicted_outliers("x", 10)
    with pytest.raises(ValueError, match="eigenvalues"):
        count_outliers(np.zeros((2, 2)), ps)


@pytest.mark.parametrize(("delta", "eps", "pieces"), [(0.58, 0.07, 1), (0.0552, 4e-4, 2)])
def test_nonzero_components_count_the_runs_of_positive_density(delta, eps, pieces):
    # MP(κ0 = 0.5) has an atom at 0: a narrow semicircle keeps it apart from the bulk (two pieces), a wide
    # one merges them. Second method: runs of positive density of the convolved law on a fine grid above ε
    from attnlab.highdim import MarchenkoPastur, nonzero_components

    setting = Setting(kappa0=0.5, noise=0.5, lam=0.01)
    assert nonzero_components(setting, _fp(delta, eps)) == pieces
    law = semicircle_convolution(MarchenkoPastur(0.5), delta)
    x = np.linspace(eps, 5.0, 20001)
    pos = law.density(x) > 1e-9
    runs = int(pos[0]) + int(np.sum(pos[1:] & ~pos[:-1]))
    assert runs == pieces


def test_full_cdf_and_resolution_cut_against_the_convolved_law():
    # the whole law of Ŝ at a planted fixed point: atom μ_δ((−∞, ε]) and, above zero, η·(x − ε) for x
    # drawn from μ_δ; the cut is where the law's mass above ε and below ε + c/η is 1/d, found here by
    # bisection on the convolved law's own mass function (an independent computation)
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
    fp = _fp(0.8, 0.6, eta=1.7)
    ps = predicted_spectrum(s, fp)
    law = semicircle_convolution(s.spectrum, 0.8)
    assert float(ps.cdf(np.array([0.0]))[0]) == pytest.approx(1 - law.mass_above(0.6), abs=1e-9)
    for t in (0.2, 1.0):
        expect = 1 - law.mass_above(0.6 + t / 1.7)
        assert float(ps.cdf(np.array([t]))[0]) == pytest.approx(expect, abs=2e-4)
    d = 200
    lo, hi = 0.6, 0.6 + 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if law.mass_above(0.6) - law.mass_above(mid) < 1 / d else (lo, mid)
    # tolerance: the tabulated density's trapezoid CDF against the law's own mass, a relative 1e-3 of a
    # cut of order 1e-2
    assert ps.resolution_cut(d) == pytest.approx(1.7 * (lo - 0.6), rel=2e-3)
    assert ps.resolution_cut(1) == np.inf  # a single eigenvalue cannot resolve anything
    assert float(ps.cdf(np.array([-1.0]))[0]) == 0.0


def test_keep_outliers_against_a_planted_eigenbasis():
    import torch

    from attnlab.highdim.outliers import keep_outliers

    # S = V diag(λ) Vᵀ with a known orthogonal V: three outliers (5, 4, 3) above the edge 2, a bulk below
    g = torch.Generator().manual_seed(0)
    V, _ = torch.linalg.qr(torch.randn(12, 12, generator=g, dtype=torch.float64))
    lam = torch.tensor([5.0, 4.0, 3.0] + [0.1 * i for i in range(9)], dtype=torch.float64)
    S = (V * lam) @ V.T
    for k, kept in ((0, []), (1, [5.0]), (2, [5.0, 4.0]), (3, [5.0, 4.0, 3.0]), (7, [5.0, 4.0, 3.0])):
        expect = lam.clone()
        expect[:3] = torch.tensor([v if v in kept else 0.0 for v in (5.0, 4.0, 3.0)], dtype=torch.float64)
        # eigendecomposition round trip in float64: agreement to 1e-12
        assert torch.allclose(keep_outliers(S, k, 2.0), (V * expect) @ V.T, atol=1e-12)
    # scrambled: the same eigenvalues along random directions added to the untouched bulk
    bulk = keep_outliers(S, 0, 2.0)
    R = keep_outliers(S, 2, 2.0, torch.Generator().manual_seed(1)) - bulk
    w, U = torch.linalg.eigh(R)
    assert torch.allclose(w[-2:], torch.tensor([4.0, 5.0], dtype=torch.float64), atol=1e-12)
    assert torch.allclose(w[:-2], torch.zeros(10, dtype=torch.float64), atol=1e-12)
    # the new directions are not the learned ones: overlap with the top eigenvector well below 1 (a random
    # unit vector in R^12 has squared overlap 1/12 on average; 0.9 is far in the tail)
    assert float((U[:, -1] @ V[:, 0]) ** 2) < 0.9
    with pytest.raises(ValueError, match="k"):
        keep_outliers(S, -1, 2.0)


def test_mode_errors_along_a_planted_eigenbasis():
    import torch

    from attnlab.highdim.outliers import mode_errors

    # S0 = V diag(s) Vᵀ with s = 4, 3, 2, 1 (V known) and S = S0 + E: along the k-th strongest direction the
    # relative error is ((V_kᵀ E V_k)/s_k)², computed here in numpy from V directly (float64: 1e-12)
    g = torch.Generator().manual_seed(3)
    V, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    s = torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    E = torch.randn(6, 6, generator=g, dtype=torch.float64)
    E = (E + E.T) / 2
    S0 = (V * s) @ V.T
    Vn, En = V.numpy(), E.numpy()
    expect = [(Vn[:, k] @ En @ Vn[:, k] / float(s[k])) ** 2 for k in range(3)]
    assert mode_errors(S0 + E, S0, 3) == pytest.approx(expect, abs=1e-12)
    assert mode_errors(torch.zeros(6, 6, dtype=torch.float64), S0, 2) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="modes"):
        mode_errors(S0, S0, 7)
