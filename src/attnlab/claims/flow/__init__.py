"""Claims of paper B (docs/flow.md B): multi-head self-attention dynamics on the sphere, one claim per file.

Derivative identities are checked at states along trajectories with an independent derivative at the
state (forward mode), never by differencing stored steps. Heads and initial tokens are drawn from the
point's CPU generators and moved to ``point.device``, where the simulations run (float64); closed
forms stay on CPU, and every run records where its heavy part ran in the metric ``device``.
"""

from attnlab.claims.flow import (
    approx_orthogonal,
    beta_star,
    beta_star_onset,
    cluster_times,
    energy_monotone,
    energy_monotone_softmax,
    entropy,
    entropy_equiangular,
    equiangular_rates,
    late_constant,
    radial_invariance,
    radial_shadow,
    relu_late,
    relu_vs_softmax,
    superadditivity_mean,
    value_perturbation,
)

CLAIMS = [
    energy_monotone.CLAIM,
    energy_monotone_softmax.CLAIM,
    value_perturbation.CLAIM,
    radial_shadow.CLAIM,
    beta_star.CLAIM,
    equiangular_rates.CLAIM,
    relu_vs_softmax.CLAIM,
    entropy.CLAIM,
    approx_orthogonal.CLAIM,
    radial_invariance.CLAIM,
    relu_late.CLAIM,
    late_constant.CLAIM,
    beta_star_onset.CLAIM,
    entropy_equiangular.CLAIM,
    superadditivity_mean.CLAIM,
    cluster_times.CLAIM,
]

#: Statements of paper B that the summary does not state precisely enough to test, with the reason
#: (shown in docs/flow.md, "Not testable from the statement").
NOT_TESTABLE = {
    "Thm 40": "named only among the quantitative results resting on idealisations; no statement is given",
    "Lambert-W remark about c*(H)": "c*(H) is the root of c² + (H−1)c − 1 = 0 (checked by flow.beta-star); "
    "the summary gives no Lambert-W formula to compare with",
    "Wasserstein-gradient-flow reading": "at n tokens it is dE/dt = ‖v‖²_{L²(μ_n)} = (1/n)Σ‖ẋ_i‖², "
    "checked by flow.energy-monotone; the mean-field (n → ∞) statement has no further finite-n "
    "consequence given",
    "Projection identities": "⟨P⊥u, u⟩ = ‖P⊥u‖² and the symmetry of P⊥ are properties of an orthogonal "
    "projector (algebra, no data can contradict them); their use is checked where it decides something: "
    "form 1's margin equals n·dE_h/dt under orthogonality (unit test, relative 1e-11) and flow.radial-shadow "
    "finds form 1 ⇔ dE_h/dt ≥ 0 at every sphere configuration",
    "Critical points of the combined multi-head field": "named by the summary as an open problem, with no "
    "conjecture about their structure to hold data against",
}

__all__ = ["CLAIMS", "NOT_TESTABLE"]
