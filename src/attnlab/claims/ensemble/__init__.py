"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators (one per file).

Profiles (test points, control points and the cells of open knobs). Quick: 936 points; one serial run on a
fresh store (one thread) took 309 CPU-s in all (figures and report included) while the machine's load was
3.3–5.4 on its 2 cores, led by decorrelation-optimal (about 123) and training-orthogonalises (69), then
heads-linear-in-budget (35) and many-small-heads (33): about 2.6 minutes on 2 idle cores with two workers.
Full: larger Monte Carlo samples, n up to 3·10⁴ (budget-law, many-small-heads) and 10⁵ (weighting), d = 32,
400 training steps, 12–32 seeds (docs/ensemble.md gives its measured cost); a GPU (``--device cuda``) or a
cluster (``--backend ray``) is the place for it.
"""

from attnlab.claims.ensemble import (
    budget_law,
    decomposition,
    decorrelation_optimal,
    hdi_monotone,
    heads_linear_in_budget,
    literal_hdi,
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
    literal_hdi.CLAIM,
]

__all__ = ["CLAIMS"]
