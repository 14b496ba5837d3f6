"""The exact law of the target's logits against the Gaussian one the state evolution uses
(attnlab.highdim.logit_law; docs/highdim.md C6, "The level")."""

import math

import numpy as np
import pytest
import torch

from attnlab.core.seeding import generator
from attnlab.highdim import (
    DiscreteSpectrum,
    Setting,
    power_law_spectrum,
    power_law_target,
    sample,
    target_error,
    top_share,
)
from attnlab.highdim.train import evaluate
from attnlab.highdim.two_token import two_token_test_error

NOISE = 0.5


def gaussian_e0(q0: float = 1.0) -> float:
    """The state evolution's e0: the Gaussian-equivalent error of the target at q = m = Q0."""
    target = DiscreteSpectrum(np.full(4, math.sqrt(q0)))
    st = Setting(kappa0=0.5, noise=NOISE, tokens=2, lam=1e-3, target=target)
    return two_token_test_error(st, q0, q0)


def test_top_share_closed_forms():
    assert top_share(np.ones(50)) == pytest.approx(1 / 50, rel=1e-14)
    d = 300
    h2 = np.sum(1.0 / np.arange(1, d + 1) ** 2)
    assert top_share(power_law_spectrum(d, 1.0)) == pytest.approx(1 / h2, rel=1e-12)
    # 1/ζ(2) = 6/π²: the tail Σ_{i>d} i⁻² < 1/d moves the share by less than 1/(d ζ(2)) relative
    assert top_share(power_law_spectrum(20000, 1.0)) == pytest.approx(6 / math.pi**2, rel=1e-4)
    # γ = 1/2: the share falls like 1/log d (no finite limit)
    assert top_share(power_law_spectrum(10000, 0.5)) < 0.11 < top_share(power_law_spectrum(400, 0.5))
    assert top_share(np.array([-3.0, 1.0])) == pytest.approx(0.9)


def test_target_error_is_the_rotated_targets_error():
    """Second method: the same e0 from a Haar-rotated S0 and the data module's samples (logits X S0 Xᵀ, the
    labels of ``sample``, the error of ``evaluate``), against the eigenbasis draw; both Monte Carlo, so the
    tolerance is 4 combined standard errors."""
    d, n = 60, 60000
    g = generator(3)
    S0 = power_law_target(d, 1.5, g)
    data = sample(S0, n, 2, NOISE, 1.0, "seq2lab", g)
    per = ((data.A - data.A_clean) ** 2).sum((-1, -2)).double()
    e_rot, se_rot = float(per.mean()), float(per.std() / math.sqrt(n))
    assert evaluate(S0, data)[0] == pytest.approx(e_rot, rel=1e-10)  # the predictor of S0 is A_clean
    e, se = target_error(power_law_spectrum(d, 1.5), NOISE, samples=n, generator=generator(4))
    assert abs(e - e_rot) < 4 * math.hypot(se, se_rot)
    assert se == pytest.approx(se_rot, rel=0.1)  # the same spread per sequence


def test_flat_spectrum_gives_the_gaussian_error():
    """A flat spectrum spreads the logits over d directions (top share 1/d): the exact e0 is the state
    evolution's Gaussian one within 4 standard errors (measured: within 0.2% at d = 400)."""
    e, se = target_error(np.ones(400), NOISE, samples=100_000, generator=generator(5))
    assert abs(e - gaussian_e0()) < 4 * se


@pytest.mark.parametrize("gamma, low", [(1.0, 0.04), (1.5, 0.08)])
def test_power_law_logits_are_not_gaussian(gamma, low):
    """γ > 1/2: the strongest mode keeps a share 1/ζ(2γ) of the logit variance at every d, so e0 sits above
    the Gaussian value by the same amount at d = 100 and 400 (measured +7.8%, +7.3% at γ = 1 and +12.4%,
    +11.9% at γ = 1.5, standard errors 0.2%; +6.6% and +11.4% at d = 10⁴): the shift less 4 standard errors
    (0.46% each at 80000 sequences) stays above ``low``, 3–4 standard errors below what that leaves of the
    measured shift; the two sizes agree within 2 points (3 combined standard errors)."""
    e_g = gaussian_e0()
    shifts = []
    for d in (100, 400):
        e, se = target_error(power_law_spectrum(d, gamma), NOISE, samples=80_000, generator=generator(d))
        shifts.append(e / e_g - 1)
        assert e / e_g - 1 > low + 4 * se / e_g
    assert abs(shifts[0] - shifts[1]) < 0.02


def test_a_gentle_power_law_is_gaussian_at_large_d():
    """γ = 1/4: the top share falls like d^(−1/2) (0.026 at d = 400): e0 within 4 standard errors of the
    Gaussian value (measured −0.1%)."""
    e, se = target_error(power_law_spectrum(400, 0.25), NOISE, samples=100_000, generator=generator(6))
    assert abs(e - gaussian_e0()) < 4 * se


def test_target_error_tokens_beta_and_generator():
    s = power_law_spectrum(30, 1.0)
    a = target_error(s, NOISE, samples=5000, generator=generator(1))
    assert a == target_error(s, NOISE, samples=5000, generator=generator(1))  # reproducible
    assert a != target_error(s, NOISE, samples=5000, generator=generator(2))
    # no noise: the labels are the target's own, e0 = 0 exactly
    assert target_error(s, 0.0, samples=100, generator=generator(1)) == (0.0, 0.0)
    # β0 = 0: both softmaxes are uniform, e0 = 0 whatever the noise
    assert target_error(s, NOISE, beta0=0.0, samples=100, generator=generator(1))[0] == 0.0
    e3, _ = target_error(s, NOISE, tokens=3, samples=5000, generator=generator(1))
    assert 0 < e3 < 3  # nine entries of differences of probabilities
    # blocks: a count that is not a multiple of the block size uses every sequence once
    e, se = target_error(s, NOISE, samples=8193, generator=generator(1))
    assert math.isfinite(e) and se > 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(eigenvalues=[]), "eigenvalues: expected a non-empty"),
        (dict(eigenvalues=[0.0, 0.0]), "eigenvalues: expected at least one non-zero"),
        (dict(eigenvalues=[1.0, np.nan]), "eigenvalues: expected a non-empty finite"),
        (dict(noise=-0.1), "noise"),
        (dict(tokens=1), "tokens"),
        (dict(samples=1), "samples"),
        (dict(beta0=-1.0), "beta0"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    args = dict(eigenvalues=[1.0, 0.5], noise=NOISE)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        target_error(args.pop("eigenvalues"), args.pop("noise"), **args)


def test_top_share_rejects_bad_input():
    with pytest.raises(ValueError, match="eigenvalues"):
        top_share([])
    with pytest.raises(ValueError, match="eigenvalues"):
        top_share(torch.zeros(3).numpy())


def test_label_noise_has_the_variances_of_c1():
    """ξ of C1: variance Δ on the diagonal, Δ/2 off it, symmetric; 200000 draws give each variance to about
    0.3% (relative standard error √(2/n)), so 2% is ~7 standard errors."""
    from attnlab.highdim import label_noise

    xi = label_noise(200_000, 3, 0.5, generator(9))
    assert xi.shape == (200_000, 3, 3) and torch.equal(xi, xi.transpose(-1, -2))
    var = xi.var(0)
    assert torch.allclose(torch.diagonal(var), torch.full((3,), 0.5, dtype=var.dtype), rtol=0.02)
    off = var[~torch.eye(3, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, 0.25), rtol=0.02)
    assert label_noise(5, 2, 0.0, generator(1)).abs().max() == 0
