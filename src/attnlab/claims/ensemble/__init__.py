"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators (one per file).

Profiles (test points plus control points). Quick: 465 points, about 240 CPU seconds (measured: 219 s
user + 19 s system while other work loaded the 2 cores; 7.5 minutes of wall time under that load,
about 2 minutes on 2 idle cores by the CPU time), led by decorrelation-optimal (48 training points,
about 3 CPU seconds each: 63% of the total), then weighting, training-orthogonalises and
single-head-smoother. Full: 2410 points with larger Monte Carlo
samples, n up to 10⁵ (weighting) and 3·10⁴ (budget-law, d up to 32), 400 training steps, 12–24 seeds;
estimated at 2.5–3.5 CPU hours (not measured; one heads-linear-in-budget point at d = 32 costs 1–2 CPU
seconds, one decorrelation-optimal point several times its quick 3 s), most of it in budget-law,
weighting and decorrelation-optimal: a GPU (``--device cuda``) or a cluster (``--backend ray``) is the
place for it.
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
