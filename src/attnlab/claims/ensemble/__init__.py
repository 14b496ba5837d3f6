"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators (one per file).

Profiles (test points plus control points). Quick: 323 points, about 200 CPU seconds (measured: 182 s
user + 15 s system; about 100 s of wall time on 2 idle cores), led by decorrelation-optimal (48 training
points) and hdi-monotone (90 frames). Full: 1838 points with larger Monte Carlo samples, n up to 10⁵
(weighting) and 3·10⁴ (budget-law, d up to 32), 400 training steps; estimated at 2–3 CPU hours (not
measured), most of it in budget-law, weighting and decorrelation-optimal: a GPU (``--device cuda``) or a
cluster (``--backend ray``) is the place for it.
"""

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
