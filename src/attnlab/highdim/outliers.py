"""Outliers of the learned spectrum: eigenvalues of ``Ŝ`` above the bulk (docs/highdim.md C4, C6).

The predicted law of ``Ŝ`` (:func:`attnlab.highdim.predicted_spectrum`) is ``η·ReLU(S0 + δZ − ε)``: a bulk
(the support component of ``μ_δ`` that holds the most mass, the noise) and, for a target with strong
eigenvalues, components above it, one per recovered target direction. At dimension ``d`` each eigenvalue
carries mass ``1/d``, so the predicted number of outliers is ``d`` times the mass of the non-zero law above
the bulk's upper edge (``PredictedSpectrum.outlier_edge``), and the measured number is the count of
eigenvalues of a trained ``Ŝ`` above that same edge.

:func:`keep_outliers` removes all but the ``k`` largest outliers of a learned matrix (their eigenvalues set
to zero: those directions not recovered), optionally with the kept outliers' eigenvectors replaced by random
directions (outliers of the same size that carry no information on the target): how the test error changes
with ``k`` tells what each recovered outlier brings to generalisation.

Emergence (C6): :func:`mode_errors` is the error of a learned matrix along each of the target's strongest
directions, ``(u_kᵀ Ŝ u_k − s_k)²/s_k²`` (1 when the direction is not learned at all, 0 when it is exact),
and :func:`share_after` the share of such a curve's fall over an α grid that comes after a given α (the α
at which the direction's outlier leaves the bulk): near 1 when the error drops as the outlier leaves.
:func:`spike_exit_alpha` gives that α for one target eigenvalue ``s``: in ``S0 + δZ`` an isolated eigenvalue
``s`` of ``S0`` leaves the semicircle bulk of the noise (as an outlier at ``s + δ²/s``, above the edge ``2δ``)
when ``s > δ``, the spectral transition of a low-rank perturbation of a Wigner matrix. The finite-d count of
:func:`predicted_outliers` (support pieces of the convolved law, each target eigenvalue an atom of mass
``1/d``) separates a piece only later, near ``s ≈ 2δ``: the transition itself is invisible in the limiting
density.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from attnlab.core.validation import check_int, check_real, check_tensor
from attnlab.highdim.learned_spectrum import PredictedSpectrum
from attnlab.highdim.setting import Setting

if TYPE_CHECKING:
    from attnlab.highdim.state_evolution import FixedPoint

__all__ = [
    "count_outliers",
    "keep_outliers",
    "mode_errors",
    "nonzero_components",
    "predicted_outliers",
    "share_after",
    "spike_exit_alpha",
]


def predicted_outliers(spectrum: PredictedSpectrum, d: int) -> int:
    """Predicted number of eigenvalues of ``Ŝ`` above the bulk at dimension ``d``.

    ``round(d · r · (1 − F(edge)))`` with ``r`` the rank fraction and ``F`` the CDF of the non-zero part
    (:meth:`PredictedSpectrum.cdf_nonzero`) at ``outlier_edge``.
    """
    if not isinstance(spectrum, PredictedSpectrum):
        raise ValueError(f"spectrum: expected a PredictedSpectrum, got {type(spectrum).__name__}")
    d = check_int("d", d, min=1)
    above = 1.0 - float(spectrum.cdf_nonzero(np.array([spectrum.outlier_edge]))[0])
    return int(round(d * spectrum.rank_fraction * above))


def count_outliers(eigenvalues: Sequence[float] | np.ndarray, spectrum: PredictedSpectrum) -> int:
    """Number of ``eigenvalues`` (of a trained ``Ŝ``) strictly above the predicted bulk edge."""
    if not isinstance(spectrum, PredictedSpectrum):
        raise ValueError(f"spectrum: expected a PredictedSpectrum, got {type(spectrum).__name__}")
    ev = np.asarray(eigenvalues, dtype=float)
    if ev.ndim != 1:
        raise ValueError(f"eigenvalues: expected a 1-d array, got shape {ev.shape}")
    return int(np.sum(ev > spectrum.outlier_edge))


def nonzero_components(setting: Setting, fp: FixedPoint) -> int:
    """Number of connected pieces of the predicted non-zero spectrum of ``Ŝ``: the support components of
    ``μ_δ`` that reach above ``ε`` (two when the bulk has split, e.g. the noise part near zero separated
    from the target's bulk at high α)."""
    from attnlab.highdim.convolution import semicircle_convolution

    law = semicircle_convolution(setting.spectrum, fp.delta)
    return sum(1 for _, b in law.intervals if b > fp.eps)


def keep_outliers(
    S: torch.Tensor, k: int, edge: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``S`` with only its ``k`` largest eigenvalues above ``edge`` kept as outliers.

    With ``S = Σ_i λ_i v_i v_iᵀ`` and ``O = {i : λ_i > edge}`` (the outliers, largest first), the
    outliers beyond the first ``k`` are removed (their eigenvalues set to zero); the bulk (eigenvalues at
    or below ``edge``) is untouched. With a ``generator``, the kept outliers' eigenvectors are replaced by
    orthonormal directions drawn uniformly (QR of a Gaussian matrix, drawn on the generator's device):
    ``bulk + Σ_{i ≤ k} λ_i w_i w_iᵀ``, the same eigenvalues carrying no information on the target (still
    positive semi-definite when ``S`` is). Returns a (d, d) float64 tensor on ``S``'s device.
    """
    S = check_tensor("S", S, ndim=2).to(torch.float64)
    d = S.shape[0]
    if S.shape[1] != d:
        raise ValueError(f"S: expected a square matrix, got shape {tuple(S.shape)}")
    k = check_int("k", k, min=0)
    edge = check_real("edge", edge)
    w, V = torch.linalg.eigh((S + S.T) / 2)  # ascending
    out = torch.nonzero(w > edge).flatten().flip(0)  # outlier indices, largest eigenvalue first
    kept = out[:k]
    lam = w.clone()
    lam[out] = 0.0
    bulk = (V * lam) @ V.T  # (d, d): S without its outliers
    if generator is None:
        return bulk + (V[:, kept] * w[kept]) @ V[:, kept].T
    G = torch.randn(
        d, max(int(kept.numel()), 1), generator=generator, dtype=torch.float64, device=generator.device
    ).to(S.device)
    Q, _ = torch.linalg.qr(G)  # (d, |kept|) orthonormal columns, uniformly distributed
    Q = Q[:, : kept.numel()]
    return bulk + (Q * w[kept]) @ Q.T


def mode_errors(S: torch.Tensor, S0: torch.Tensor, modes: int) -> np.ndarray:
    """``(u_kᵀ S u_k − s_k)² / s_k²`` for the ``modes`` largest eigenvalues ``s_k`` of ``S0`` (eigenvectors
    ``u_k``), largest first: the relative error of ``S`` along each strongest target direction."""
    S0 = check_tensor("S0", S0, ndim=2).to(torch.float64)
    S = check_tensor("S", S, shape=tuple(S0.shape)).to(torch.float64).to(S0.device)
    modes = check_int("modes", modes, min=1, max=S0.shape[0])
    s, U = torch.linalg.eigh(S0)
    top = torch.argsort(s, descending=True)[:modes]
    s, U = s[top], U[:, top]  # (modes,), (d, modes)
    rq = torch.einsum("dk,de,ek->k", U, S, U)  # (modes,) Rayleigh quotients
    return ((rq - s) / s).pow(2).cpu().numpy()


def share_after(alphas: Sequence[float], values: Sequence[float], at: float) -> float:
    """The share of the fall of ``values`` over the grid ``alphas`` that comes after ``α = at``:
    ``(v(at) − v_last) / (v_first − v_last)``, with ``v(at)`` interpolated linearly in ``ln α``, clipped to
    ``[0, 1]`` (nan when the values do not fall). Near 1 when a curve starts to fall at ``at``, near 0 when
    it has fallen before."""
    a = np.asarray(alphas, dtype=float)
    v = np.asarray(values, dtype=float)
    if a.ndim != 1 or v.shape != a.shape or a.size < 2:
        raise ValueError(
            f"values: expected one value per α (at least two α), got shapes {a.shape}, {v.shape}"
        )
    if np.any(a <= 0) or np.any(np.diff(a) <= 0):
        raise ValueError("alphas: expected positive, increasing sample ratios")
    at = check_real("at", at, min=0.0, min_open=True)
    fall = v[0] - v[-1]
    if not fall > 0:
        return float("nan")
    v_at = float(np.interp(np.log(at), np.log(a), v))
    return float(np.clip((v_at - v[-1]) / fall, 0.0, 1.0))


def spike_exit_alpha(alphas: Sequence[float], deltas: Sequence[float], s: float) -> float | None:
    """The α at which ``δ(α) = s`` (``deltas`` decreasing along increasing ``alphas``; linear interpolation
    of ``ln δ`` in ``ln α``): where a target eigenvalue ``s`` leaves the noise bulk (module docstring).
    None when ``s`` is out of the bulk already at the first α or still inside it at the last."""
    a = np.asarray(alphas, dtype=float)
    dl = np.asarray(deltas, dtype=float)
    if a.ndim != 1 or dl.shape != a.shape or a.size < 2:
        raise ValueError(f"deltas: expected one δ per α (at least two α), got shapes {a.shape}, {dl.shape}")
    if np.any(a <= 0) or np.any(np.diff(a) <= 0) or np.any(dl <= 0):
        raise ValueError("alphas, deltas: expected positive values on increasing α")
    s = check_real("s", s, min=0.0, min_open=True)
    above = dl > s  # still inside the bulk
    if not above[0] or above[-1]:
        return None
    i = int(np.argmin(above))  # first α with δ <= s
    la, ld = np.log(a[i - 1 : i + 1]), np.log(dl[i - 1 : i + 1])
    t = (math.log(s) - ld[0]) / (ld[1] - ld[0]) if ld[1] != ld[0] else 1.0
    return float(math.exp(la[0] + t * (la[1] - la[0])))
