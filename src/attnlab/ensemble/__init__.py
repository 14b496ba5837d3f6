"""Paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators."""

from attnlab.core.geometry import (
    Diversity,
    diversity,
    hdi_ceiling,
    null_hdi,
    null_principal_angles,
    overlap_matrix,
    principal_angles,
)
from attnlab.ensemble.budget import (
    BudgetSweep,
    budget_splits,
    budget_sweep,
    continuous_optimum,
    fit_power_law,
)
from attnlab.ensemble.data import TARGETS, RegressionTask
from attnlab.ensemble.decomposition import (
    Decomposition,
    decompose,
    decompose_predictions,
    equicorrelated_variance,
    monte_carlo_predictions,
)
from attnlab.ensemble.estimators import NWEnsemble, NWHead
from attnlab.ensemble.heads import KERNELS, head_predictions
from attnlab.ensemble.layouts import LAYOUTS, controlled_hdi, projection_layout
from attnlab.ensemble.nw import default_scale, nw_estimate, nw_weights
from attnlab.ensemble.training import (
    TrainedProjections,
    ensemble_loss,
    kept_path_slope,
    train_projections,
    weight_overlap_penalty,
)
from attnlab.ensemble.weights import SCHEMES, fibonacci_numbers, head_weights, optimal_weights

__all__ = [
    "KERNELS",
    "LAYOUTS",
    "SCHEMES",
    "TARGETS",
    "BudgetSweep",
    "Decomposition",
    "Diversity",
    "NWEnsemble",
    "NWHead",
    "RegressionTask",
    "TrainedProjections",
    "budget_splits",
    "budget_sweep",
    "continuous_optimum",
    "controlled_hdi",
    "decompose",
    "decompose_predictions",
    "default_scale",
    "diversity",
    "ensemble_loss",
    "equicorrelated_variance",
    "fibonacci_numbers",
    "fit_power_law",
    "hdi_ceiling",
    "head_predictions",
    "head_weights",
    "monte_carlo_predictions",
    "null_hdi",
    "null_principal_angles",
    "nw_estimate",
    "nw_weights",
    "optimal_weights",
    "overlap_matrix",
    "principal_angles",
    "projection_layout",
    "kept_path_slope",
    "train_projections",
    "weight_overlap_penalty",
]
