"""Claims of paper A: multi-head attention as an ensemble of Nadaraya–Watson estimators (one per file).

Profiles (test points, control points and the cells of open knobs). Quick: 819 points; CPU time measured
on a sample of one point in eight per claim (one thread) while the machine ran at a load of 15–25 on its
2 cores: 404 CPU-s, led by decorrelation-optimal (230), training-orthogonalises (56), many-small-heads
(44), heads-linear-in-budget (24) and budget-law (19). Such a load inflates CPU time: an earlier
whole-profile measurement under a lighter load put decorrelation-optimal at about 150 CPU-s (63% of 238),
against 230 here, so the profile needs 265–404 CPU-s, 2.2–3.4 minutes on 2 idle cores. Full: larger
Monte Carlo samples, n up to 3·10⁴ (budget-law, many-small-heads) and 10⁵ (weighting), d = 32, 400
training steps, 12–24 seeds (docs/ensemble.md gives its measured cost); a GPU (``--device cuda``) or a
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
