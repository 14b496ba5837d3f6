"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators (one per file)."""

from attnlab.claims.ensemble import (
    budget_law,
    decomposition,
    decorrelation_optimal,
    hdi_monotone,
    heads_linear_in_budget,
    many_small_heads,
    nw_identity,
    single_head_smoother,
    training_orthogonalises,
    variance_needs_decorrelation,
    weighting,
)

CLAIMS = [
    nw_identity.CLAIM,
    decomposition.CLAIM,
    variance_needs_decorrelation.CLAIM,
    hdi_monotone.CLAIM,
    decorrelation_optimal.CLAIM,
    training_orthogonalises.CLAIM,
    budget_law.CLAIM,
    heads_linear_in_budget.CLAIM,
    many_small_heads.CLAIM,
    weighting.CLAIM,
    single_head_smoother.CLAIM,
]

__all__ = ["CLAIMS"]
