"""Paper C: single-head tied attention in high dimensions (docs/highdim.md C).

The regularisation parameter of every public function is ``λ̃`` (``lam``), the nuclear-norm coefficient of
docs/highdim.md C2 (the weight decay on ``W`` is ``λ = λ̃/√κ``: :func:`lam_from_lam_tilde`); ``noise`` is the
label-noise variance ``Δ``; the letter δ is kept for the spectral width of C3.

>>> import attnlab as al
>>> setting = al.highdim.Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
>>> fp = al.highdim.state_evolution(setting, alpha=0.5)    # doctest: +SKIP
"""

from attnlab.highdim.data import TASKS, Dataset, attention, logits, mp_target, power_law_target, sample
from attnlab.highdim.decomposition import (
    ErrorDecomposition,
    RecoveredSplit,
    decompose_by_recovered,
    decompose_error,
    denoiser_sample,
)
from attnlab.highdim.law_distance import ks_to_tabulated, ks_two_sample, tabulated_cdf
from attnlab.highdim.outliers import count_outliers, nonzero_components, predicted_outliers
from attnlab.highdim.proximal import ProximalResult, nuclear_objective, nuclear_psd_erm
from attnlab.highdim.scaling import PowerLawFit, find_plateau, local_exponents, power_law_fit
from attnlab.highdim.spectra import (
    ConvolvedLaw,
    DiscreteSpectrum,
    J,
    J_and_derivatives,
    JValue,
    MarchenkoPastur,
    power_law_spectrum,
    semicircle_convolution,
)
from attnlab.highdim.state_evolution import (
    FixedPoint,
    OutputChannel,
    PredictedSpectrum,
    Setting,
    Stability,
    flat_to_matrix,
    lam_from_lam_tilde,
    lam_tilde_from_lam,
    predicted_spectrum,
    select_fixed_point,
    stability,
    state_evolution,
    sweep,
)
from attnlab.highdim.thresholds import (
    Thresholds,
    alpha_bar,
    interpolation_threshold,
    perfect_recovery_bayes,
    perfect_recovery_threshold,
    perfect_recovery_unfactorised,
    thresholds,
)
from attnlab.highdim.train import TrainConfig, TrainResult, evaluate, predict, simulate, train_erm

__all__ = [
    "TASKS",
    "ConvolvedLaw",
    "Dataset",
    "DiscreteSpectrum",
    "ErrorDecomposition",
    "FixedPoint",
    "J",
    "JValue",
    "J_and_derivatives",
    "MarchenkoPastur",
    "OutputChannel",
    "PredictedSpectrum",
    "ProximalResult",
    "RecoveredSplit",
    "Setting",
    "Stability",
    "PowerLawFit",
    "Thresholds",
    "TrainConfig",
    "TrainResult",
    "alpha_bar",
    "attention",
    "count_outliers",
    "decompose_by_recovered",
    "decompose_error",
    "denoiser_sample",
    "evaluate",
    "find_plateau",
    "flat_to_matrix",
    "interpolation_threshold",
    "ks_to_tabulated",
    "ks_two_sample",
    "lam_from_lam_tilde",
    "lam_tilde_from_lam",
    "local_exponents",
    "logits",
    "mp_target",
    "nonzero_components",
    "nuclear_objective",
    "nuclear_psd_erm",
    "perfect_recovery_bayes",
    "perfect_recovery_threshold",
    "perfect_recovery_unfactorised",
    "power_law_spectrum",
    "power_law_target",
    "power_law_fit",
    "predict",
    "predicted_outliers",
    "predicted_spectrum",
    "sample",
    "select_fixed_point",
    "semicircle_convolution",
    "simulate",
    "stability",
    "state_evolution",
    "sweep",
    "tabulated_cdf",
    "thresholds",
    "train_erm",
]
