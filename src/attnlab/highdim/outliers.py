"""Outliers of the learned spectrum: eigenvalues of ``Ŝ`` above the bulk (docs/highdim.md C4, C6).

The predicted law of ``Ŝ`` (:func:`attnlab.highdim.predicted_spectrum`) is ``η·ReLU(S0 + δZ − ε)``: a bulk
(the support component of ``μ_δ`` that holds the most mass, the noise) and, for a target with strong
eigenvalues, components above it, one per recovered target direction. At dimension ``d`` each eigenvalue
carries mass ``1/d``, so the predicted number of outliers is ``d`` times the mass of the non-zero law above
the bulk's upper edge (``PredictedSpectrum.outlier_edge``), and the measured number is the count of
eigenvalues of a trained ``Ŝ`` above that same edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attnlab.core.validation import check_int
from attnlab.highdim.learned_spectrum import PredictedSpectrum
from attnlab.highdim.setting import Setting

if TYPE_CHECKING:
    from attnlab.highdim.state_evolution import FixedPoint

__all__ = ["count_outliers", "nonzero_components", "predicted_outliers"]


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
