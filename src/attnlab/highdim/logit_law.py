"""The law of the target's logits, and where it is not Gaussian (docs/highdim.md C6, "The level").

The state evolution treats the logits ``Z_ab(S) = (x_aᵀ S x_b − δ_ab Tr S)/√d`` as Gaussian: for a target
whose spectrum spreads over many directions they are (a sum of ``d`` independent terms). In the target's
eigenbasis, with isotropic tokens, ``Z_ab(S0) = Σ_i s_i (u_ia u_ib − δ_ab)/√d`` with ``u`` i.i.d. N(0, 1),
and each off-diagonal term has variance ``s_i²/d``: the strongest direction carries the share
``max s_i² / Σ s_i²`` of every logit's variance (:func:`top_share`). For a Marchenko–Pastur target that share
is ``O(1/d)``; for a power law ``s_i ∝ i^(−γ)`` with ``γ > 1/2`` (the regime of the scaling law) it tends to
``1/ζ(2γ)`` at every ``d`` (0.61 at ``γ = 1``): one weighted chi-square term dominates, and no ``d`` makes
the logits Gaussian.

:func:`target_error` measures what that changes in the simplest observable: the error of the target itself
against its noisy labels, ``e0 = E‖rowsoftmax(β0 (Z0 + ξ)) − rowsoftmax(β0 Z0)‖²``, under the exact law of
``Z0`` (drawn in the eigenbasis: ``d`` numbers per token, no rotation), against the Gaussian-equivalent
value the state evolution uses (:func:`attnlab.highdim.two_token.two_token_test_error` at
``q = m = Q0``).

:func:`readout_excess` splits the gap between the ERM's excess error and the state evolution's in two. The
state evolution says two things: the learned matrix equals ``η·ReLU(S0 + δZ − ε)`` in law (the estimator),
and a matrix with overlaps ``q = Tr Ŝ²/d``, ``m = Tr ŜS0/d`` has the excess error of Gaussian logits with
those overlaps (the read-out). It draws matrices of that law for the target's own spectrum and reads each
one's excess error twice: on samples of the exact logit law (the test error of the data module, paired with
the target's on the same samples) and by the Gaussian formula at the draw's ``(q, m)``. Their ratio is the
read-out's factor of the gap; the ERM's excess over the exact read-out is the estimator's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_int, check_real, check_tensor
from attnlab.highdim.data import label_noise, sample

__all__ = [
    "Readout",
    "gaussian_excess",
    "independent_part_excess",
    "readout_excess",
    "target_error",
    "top_share",
]

#: sequences drawn per block (memory ``block · T · d`` doubles)
_BLOCK = 8192


def _eigenvalues(eigenvalues) -> np.ndarray:
    s = np.asarray(getattr(eigenvalues, "eigenvalues", eigenvalues), dtype=float).ravel()
    if s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError(f"eigenvalues: expected a non-empty finite array, got {s.size} values")
    if not np.any(s != 0):
        raise ValueError("eigenvalues: expected at least one non-zero eigenvalue, got all zeros")
    return s


def top_share(eigenvalues) -> float:
    """``max s_i² / Σ s_i²``: the share of each off-diagonal logit's variance carried by the strongest
    direction of the target (``eigenvalues``: an array or a :class:`~attnlab.highdim.DiscreteSpectrum`).
    ``1/d`` for a flat spectrum; ``1/Σ_{i≤d} i^(−2γ)`` for a power law, which tends to ``1/ζ(2γ)`` for
    ``γ > 1/2`` and to 0 (like ``1/log d`` at ``γ = 1/2``) below."""
    s2 = _eigenvalues(eigenvalues) ** 2
    return float(s2.max() / s2.sum())


def target_error(
    eigenvalues,
    noise: float,
    *,
    beta0: float = 1.0,
    tokens: int = 2,
    samples: int = 200_000,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """The target's own test error ``e0`` against noisy labels under the exact law of its logits.

    Parameters
    ----------
    eigenvalues : array or DiscreteSpectrum
        The spectrum ``s_1 … s_d`` of ``S0`` (its eigenvectors do not matter for isotropic tokens).
    noise : float
        Label-noise variance ``Δ`` (``Δ`` on the diagonal of ``ξ``, ``Δ/2`` off it, as
        :func:`attnlab.highdim.sample`).
    beta0 : float
        Target inverse temperature.
    tokens : int
        Sequence length ``T`` (≥ 2).
    samples : int
        Monte Carlo sequences (≥ 2), drawn in blocks of 8192.
    generator : torch.Generator, optional

    Returns
    -------
    (e0, stderr) : the Monte Carlo mean of the per-sequence error (summed over the ``T²`` entries) and its
    standard error.
    """
    s = _eigenvalues(eigenvalues)
    noise = check_real("noise", noise, min=0.0)
    beta0 = check_real("beta0", beta0, min=0.0)
    T = check_int("tokens", tokens, min=2)
    samples = check_int("samples", samples, min=2, max=100_000_000)
    total, total2 = 0.0, 0.0
    for Z0, xi in _target_blocks(s, T, noise, samples, generator):
        err = ((torch.softmax(beta0 * (Z0 + xi), -1) - torch.softmax(beta0 * Z0, -1)) ** 2).sum((-1, -2))
        total += float(err.sum())
        total2 += float((err * err).sum())
    return _mean_se(total, total2, samples)


def independent_part_excess(
    eigenvalues,
    noise: float,
    size: float,
    *,
    beta: float = 1.0,
    beta0: float = 1.0,
    tokens: int = 2,
    samples: int = 200_000,
    generator: torch.Generator | None = None,
) -> tuple[float, float]:
    """The excess test error of adding to the target a part whose logits are Gaussian and independent of
    the target's, under the exact law of the target's logits.

    A symmetric part ``P`` with ``Tr P²/d = size`` (``E``) has logits ``(x_aᵀ P x_b − δ_ab Tr P)/√d`` of
    variance ``E`` off the diagonal and ``2E`` on it; the over-fitting part (orthogonal to ``S0``, full rank,
    in the target's hidden directions) is read this way. With Gaussian target logits the result is
    ``e_G(Q0 + E, Q0) − e_G(Q0, Q0)`` (:func:`~attnlab.highdim.two_token.two_token_test_error`); where the
    target's logits are not Gaussian (:func:`top_share`) it is what that law alone makes of the same part.

    Parameters
    ----------
    eigenvalues : array or DiscreteSpectrum
        The spectrum of ``S0``.
    noise : float
        Label-noise variance ``Δ``.
    size : float
        ``E = Tr P²/d`` (≥ 0).
    beta, beta0 : float
        Student and target inverse temperatures.
    tokens : int
        Sequence length ``T`` (≥ 2).
    samples : int
        Monte Carlo sequences (≥ 2), drawn in blocks of 8192.
    generator : torch.Generator, optional

    Returns
    -------
    (excess, stderr) : the mean over sequences of ``e(S0 + P) − e(S0)``, both against the same noisy labels,
    and its standard error.
    """
    s = _eigenvalues(eigenvalues)
    noise = check_real("noise", noise, min=0.0)
    size = check_real("size", size, min=0.0)
    beta = check_real("beta", beta, min=0.0)
    beta0 = check_real("beta0", beta0, min=0.0)
    T = check_int("tokens", tokens, min=2)
    samples = check_int("samples", samples, min=2, max=100_000_000)
    total, total2 = 0.0, 0.0
    for Z0, xi in _target_blocks(s, T, noise, samples, generator):
        G = torch.randn(Z0.shape, generator=generator, dtype=torch.float64, device=Z0.device)
        ZP = (G + G.transpose(-1, -2)) * math.sqrt(size / 2)  # variance E off the diagonal, 2E on it
        y = torch.softmax(beta0 * (Z0 + xi), -1)
        err = ((torch.softmax(beta * (Z0 + ZP), -1) - y) ** 2).sum((-1, -2))
        err -= ((torch.softmax(beta * Z0, -1) - y) ** 2).sum((-1, -2))
        total += float(err.sum())
        total2 += float((err * err).sum())
    return _mean_se(total, total2, samples)


def _target_blocks(s: np.ndarray, T: int, noise: float, samples: int, generator):
    """Blocks of at most 8192 sequences: the target's exact logits ``Z0`` and the label noise ``ξ``, each
    (b, T, T), drawn in that order (the tokens in the target's eigenbasis, then ``ξ``)."""
    d = s.size
    dev = draw_device(generator, "cpu")
    st = torch.as_tensor(s, dtype=torch.float64, device=dev)
    shift = float(s.sum()) * torch.eye(T, dtype=torch.float64, device=dev)
    done = 0
    while done < samples:
        b = min(_BLOCK, samples - done)
        u = torch.randn(b, T, d, generator=generator, dtype=torch.float64, device=dev)
        Z0 = (torch.einsum("btd,d,bsd->bts", u, st, u) - shift) / math.sqrt(d)  # (b, T, T)
        yield Z0, label_noise(b, T, noise, generator, device=dev)
        done += b


def _mean_se(total: float, total2: float, n: int) -> tuple[float, float]:
    """The mean and its standard error from the sum and the sum of squares of ``n`` values."""
    mean = total / n
    var = max(total2 / n - mean * mean, 0.0) * n / (n - 1)
    return mean, math.sqrt(var / n)


@dataclass(frozen=True)
class Readout:
    """The excess error of draws of the state evolution's law of ``Ŝ``, read two ways
    (:func:`readout_excess`).

    ``exact``: the mean over draws of ``e(D) − e(S0)`` on samples of the exact logit law (each draw its own
    samples, the target's error on the same ones; both read at the student's ``β``, as the Gaussian side
    reads ``e0`` at ``q = m = Q0``); ``gaussian``: the mean of the Gaussian-logit excess at
    each draw's ``(q, m)``; ``*_se``: the spread of the per-draw values over √draws (the draws' own spread
    and the Monte Carlo error of the samples together); ``q``, ``m``: the draws' mean overlaps."""

    exact: float
    exact_se: float
    gaussian: float
    gaussian_se: float
    q: float
    m: float
    draws: int
    samples: int

    @property
    def ratio(self) -> float:
        """``exact / gaussian``: how much the exact read-out moves the excess error of the same matrices (NaN
        where the Gaussian excess is zero)."""
        return self.exact / self.gaussian if self.gaussian != 0 else math.nan

    @property
    def ratio_se(self) -> float:
        """The ratio's standard error, the two relative errors combined as independent (NaN where either
        excess is zero)."""
        if self.exact == 0 or self.gaussian == 0:
            return math.nan
        return abs(self.ratio) * math.hypot(self.exact_se / self.exact, self.gaussian_se / self.gaussian)


def readout_excess(
    setting,
    delta: float,
    eps: float,
    eta: float,
    *,
    draws: int = 4,
    samples: int = 8000,
    generator: torch.Generator | None = None,
) -> Readout:
    """The excess test error of the state evolution's law of ``Ŝ``, on exact and on Gaussian logits.

    Parameters
    ----------
    setting : Setting
        At ``T = 2``, with a finite target (``setting.target``, a
        :class:`~attnlab.highdim.DiscreteSpectrum`: its eigenvalues are ``S0``'s; with isotropic tokens the
        eigenvectors do not matter, so ``S0`` is drawn diagonal). Its ``noise``, ``beta0`` and ``beta`` set
        the labels and the student's temperature.
    delta, eps, eta : float
        The fixed point's ``(δ, ε, η)`` (:class:`~attnlab.highdim.FixedPoint`): the draws are
        ``η·ReLU(S0 + δZ − ε)`` (:func:`~attnlab.highdim.denoiser_sample`).
    draws : int
        Matrices drawn (≥ 2: the standard errors come from their spread).
    samples : int
        Test sequences per draw (≥ 2), drawn in blocks of 8192.
    generator : torch.Generator, optional

    Returns
    -------
    Readout
    """
    from attnlab.highdim.decomposition import denoiser_sample
    from attnlab.highdim.targets import DiscreteSpectrum
    from attnlab.highdim.train import evaluate
    from attnlab.highdim.two_token import two_token_test_error

    if setting.tokens != 2:
        raise ValueError(
            f"setting.tokens: expected 2 (the Gaussian read-out is the T = 2 formula), got {setting.tokens}"
        )
    if not isinstance(setting.target, DiscreteSpectrum):
        raise ValueError(
            "setting.target: expected a DiscreteSpectrum (a finite target's eigenvalues), got "
            f"{type(setting.target).__name__}"
        )
    delta = check_real("delta", delta, min=0.0)
    eps = check_real("eps", eps)
    eta = check_real("eta", eta, min=0.0)
    draws = check_int("draws", draws, min=2, max=100_000)
    samples = check_int("samples", samples, min=2, max=100_000_000)
    s = setting.target.eigenvalues
    d = s.size
    dev = draw_device(generator, "cpu")
    S0 = torch.diag(torch.as_tensor(s, dtype=torch.float64, device=dev))
    g0 = two_token_test_error(setting, setting.q0, setting.q0)
    exact, gauss, qs, ms = [], [], [], []
    for _ in range(draws):
        D = denoiser_sample(S0, delta, eps, eta, generator)
        q, m = float((D * D).sum()) / d, float((D * S0).sum()) / d
        total, done = 0.0, 0
        while done < samples:
            b = min(_BLOCK, samples - done)
            data = sample(S0, b, 2, setting.noise, setting.beta0, "seq2lab", generator)
            total += b * (evaluate(D, data, setting.beta)[0] - evaluate(S0, data, setting.beta)[0])
            done += b
        exact.append(total / samples)
        gauss.append(two_token_test_error(setting, q, m) - g0)
        qs.append(q)
        ms.append(m)

    def mean_se(x: list[float]) -> tuple[float, float]:
        a = np.asarray(x)
        return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size))

    (ex, ex_se), (ga, ga_se) = mean_se(exact), mean_se(gauss)
    return Readout(ex, ex_se, ga, ga_se, float(np.mean(qs)), float(np.mean(ms)), draws, samples)


def gaussian_excess(setting, S0: torch.Tensor, S: torch.Tensor) -> float:
    """The excess test error of ``S`` over the target ``S0`` under the Gaussian read-out:
    ``e_G(q, m) − e_G(Q0, Q0)`` (:func:`~attnlab.highdim.two_token.two_token_test_error`) at ``q = Tr S²/d``,
    ``m = Tr S S0/d`` and the target's own ``Q0 = Tr S0²/d`` (a finite-d realisation's, not the setting's
    limit), with the setting's ``noise``, ``beta0`` and ``beta``. ``S0``, ``S``: (d, d) symmetric, T = 2."""
    from attnlab.highdim.two_token import two_token_test_error

    if setting.tokens != 2:
        raise ValueError(
            f"setting.tokens: expected 2 (the Gaussian read-out is the T = 2 formula), got {setting.tokens}"
        )
    S0 = check_tensor("S0", S0, ndim=2).to(torch.float64)
    if S0.shape[0] != S0.shape[1]:
        raise ValueError(f"S0: expected a square matrix, got shape {tuple(S0.shape)}")
    S = check_tensor("S", S, shape=tuple(S0.shape)).to(device=S0.device, dtype=torch.float64)
    d = S0.shape[0]
    Q0 = float((S0 * S0).sum()) / d
    if not Q0 > 0:
        raise ValueError("S0: expected a non-zero target, got Tr S0² = 0")
    q, m = float((S * S).sum()) / d, float((S * S0).sum()) / d
    return two_token_test_error(setting, q, m, q0=Q0) - two_token_test_error(setting, Q0, Q0, q0=Q0)
