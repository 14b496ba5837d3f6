"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators (one per file)."""

from attnlab.claims.ensemble import (
    budget_law,
    decomposition,
    decorrelation_optimal,
    hdi_monotone,
    nw_identity,
    variance_needs_decorrelation,
    weighting,
)

CLAIMS = [
    nw_identity.CLAIM,
    decomposition.CLAIM,
    variance_needs_decorrelation.CLAIM,
    hdi_monotone.CLAIM,
    decorrelation_optimal.CLAIM,
    budget_law.CLAIM,
    weighting.CLAIM,
]

__all__ = ["CLAIMS"]
