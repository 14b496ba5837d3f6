"""Paper C: single-head tied attention in high dimensions (docs/highdim.md C).

The regularisation parameter of every public function is ``λ̃`` (``lam``), the nuclear-norm coefficient of
docs/highdim.md C2 (the weight decay on ``W`` is ``λ = λ̃/√κ``: :func:`lam_from_lam_tilde`); ``noise`` is the
label-noise variance ``Δ``; the letter δ is kept for the spectral width of C3.

>>> import attnlab as al
>>> setting = al.highdim.Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
>>> fp = al.highdim.state_evolution(setting, alpha=0.5)    # doctest: +SKIP

Importing the package is light: each public name loads its submodule on first use, so a process that only
trains (``attnlab.highdim.train``) does not import the state evolution's solver.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attnlab.highdim.data import (
        TASKS,
        Dataset,
        attention,
        label_noise,
        logits,
        mp_target,
        power_law_target,
        sample,
    )
    from attnlab.highdim.decomposition import (
        ErrorDecomposition,
        RecoveredSplit,
        decompose_by_recovered,
        decompose_error,
        denoiser_sample,
    )
    from attnlab.highdim.law_distance import ks_to_tabulated, ks_two_sample, tabulated_cdf
    from attnlab.highdim.logit_law import Readout, readout_excess, target_error, top_share
    from attnlab.highdim.outliers import count_outliers, nonzero_components, predicted_outliers
    from attnlab.highdim.proximal import ProximalResult, nuclear_objective, nuclear_psd_erm
    from attnlab.highdim.scaling import (
        PowerLawFit,
        find_plateau,
        local_exponents,
        mean_exponent,
        power_law_fit,
    )
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

#: the submodule that defines each public name
_SOURCES: dict[str, tuple[str, ...]] = {
    "data": (
        "TASKS",
        "Dataset",
        "attention",
        "label_noise",
        "logits",
        "mp_target",
        "power_law_target",
        "sample",
    ),
    "decomposition": (
        "ErrorDecomposition",
        "RecoveredSplit",
        "decompose_by_recovered",
        "decompose_error",
        "denoiser_sample",
    ),
    "law_distance": ("ks_to_tabulated", "ks_two_sample", "tabulated_cdf"),
    "logit_law": ("Readout", "readout_excess", "target_error", "top_share"),
    "outliers": ("count_outliers", "nonzero_components", "predicted_outliers"),
    "proximal": ("ProximalResult", "nuclear_objective", "nuclear_psd_erm"),
    "scaling": ("PowerLawFit", "find_plateau", "local_exponents", "mean_exponent", "power_law_fit"),
    "spectra": (
        "ConvolvedLaw",
        "DiscreteSpectrum",
        "J",
        "J_and_derivatives",
        "JValue",
        "MarchenkoPastur",
        "power_law_spectrum",
        "semicircle_convolution",
    ),
    "state_evolution": (
        "FixedPoint",
        "OutputChannel",
        "PredictedSpectrum",
        "Setting",
        "Stability",
        "flat_to_matrix",
        "lam_from_lam_tilde",
        "lam_tilde_from_lam",
        "predicted_spectrum",
        "select_fixed_point",
        "stability",
        "state_evolution",
        "sweep",
    ),
    "thresholds": (
        "Thresholds",
        "alpha_bar",
        "interpolation_threshold",
        "perfect_recovery_bayes",
        "perfect_recovery_threshold",
        "perfect_recovery_unfactorised",
        "thresholds",
    ),
    "train": ("TrainConfig", "TrainResult", "evaluate", "predict", "simulate", "train_erm"),
}
_WHERE = {name: module for module, names in _SOURCES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:  # a submodule not imported yet (``attnlab.highdim.channel``)
        missing = AttributeError(f"module {__name__!r} has no attribute {name!r}")
        if name.startswith("__"):
            raise missing
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise missing from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


class _Package(types.ModuleType):
    """Importing a submodule binds it as an attribute of its package; where a public function has the
    submodule's name (``state_evolution``, ``thresholds``), the function keeps the name, as it did when this
    package imported everything eagerly."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

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
    "Readout",
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
    "label_noise",
    "lam_from_lam_tilde",
    "lam_tilde_from_lam",
    "local_exponents",
    "logits",
    "mean_exponent",
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
    "readout_excess",
    "sample",
    "select_fixed_point",
    "semicircle_convolution",
    "simulate",
    "stability",
    "state_evolution",
    "sweep",
    "tabulated_cdf",
    "target_error",
    "thresholds",
    "top_share",
    "train_erm",
]
