"""CPU seconds per point of each claim, measured on the reference machine, for claims that have no
runtime stored at a profile (``engine.costs.claim_costs``; a stored runtime always takes precedence).

``full``: ``bench/bench_profile_costs.py`` (points of each claim's full grid: its middle, first and,
for paper A, last point; one torch thread, CPU time of the point; a point stopped at the sampling
timeout counts as its CPU time so far, a lower bound, and a claim whose draws all stopped is left out:
unknown). A claim with a size model (``engine.costs.SIZE_MODELS``) has ``PER_SIZE`` (CPU s per unit of
size, its draws' CPU s over their summed size), and its ``full`` constant is that times the mean size
over its whole full grid; the others, the mean of their draws. Written by ``bench_profile_costs.py
--fit ... --write-table``. Three paper-C claims are priced from their own full grids instead
(docs/highdim.md), all three from whole runs of their full profiles at root seed 0: scaling-law 4,504 CPU-s
over its 348 points (two workers, load 3-4), training-loss 2,042 over 428 and temperature 1,994 over 234 (one
worker, load 2-3). Measured 2026-12-02 on a
shared 2-core machine (load average 4-6 from other work during the two-draw full sample, 1-4 during paper
A's three-draw one).

``quick``: the mean CPU time per point of every claim in a fresh quick store (``make run`` on a fresh
clone: 2 workers on 2 otherwise idle cores, 1917 points in 498 s).

Costs go stale when a claim changes; rerun the benchmark and regenerate this table then.
"""

from __future__ import annotations

REFERENCE: dict[str, dict[str, float]] = {
    "quick": {
        "ensemble.budget-law": 0.1918,
        "ensemble.decomposition": 0.01585,
        "ensemble.decorrelation-optimal": 3.008,
        "ensemble.hdi-monotone": 0.04897,
        "ensemble.heads-linear-in-budget": 0.09502,
        "ensemble.literal-hdi": 0.008478,
        "ensemble.many-small-heads": 0.1207,
        "ensemble.nw-identity": 0.001704,
        "ensemble.single-head-smoother": 0.4189,
        "ensemble.training-orthogonalises": 0.6404,
        "ensemble.variance-needs-decorrelation": 0.3033,
        "ensemble.weighting": 0.3186,
        "flow.approx-orthogonal": 0.6303,
        "flow.beta-star": 0.169,
        "flow.beta-star-onset": 1.589,
        "flow.cluster-times": 0.9526,
        "flow.energy-monotone": 0.1136,
        "flow.energy-monotone-softmax": 0.6817,
        "flow.entropy": 0.4909,
        "flow.entropy-equiangular": 0.4217,
        "flow.equiangular-rates": 0.06405,
        "flow.late-constant": 0.1064,
        "flow.radial-invariance": 2.379,
        "flow.radial-shadow": 0.5603,
        "flow.relu-late": 0.05988,
        "flow.relu-vs-softmax": 0.757,
        "flow.superadditivity-mean": 0.06227,
        "flow.value-perturbation": 1.799,
        "highdim.emergence": 0.1156,  # 8 seeds (was 2), root seeds 0-3: 704 points, 81.4 CPU-s
        "highdim.bias-rate": 3.16,  # v2, fresh store, root seed 0: 18 points, 56.9 CPU-s
        "highdim.error-coefficients": 0.9065,  # fresh store, root seed 0: 9 points, 8.2 CPU-s
        "highdim.error-decomposition": 2.557,
        "highdim.factorised-beats-frobenius": 0.6134,
        "highdim.interpolation-threshold": 0.6131,
        "highdim.nuclear-norm": 2.823,  # v4 (four initialisations), root seeds 0-3: 12 points, 33.9 CPU-s
        "highdim.outliers-generalisation": 0.2134,  # v6 (20 seeds at α = 0.06): 156 points, 33.3 CPU-s
        "highdim.perfect-recovery": 0.3108,
        "highdim.scaling-law": 2.217,
        "highdim.seq2seq": 0.6939,
        "highdim.spectrum": 2.516,  # v8 (split seen in simulation): fresh store, 50.3 CPU-s / 20
        "highdim.temperature": 0.5456,
        "highdim.theory-vs-adam": 0.6881,
        "highdim.tokens": 1.328,
        "highdim.training-loss": 0.2643,
        "highdim.variance-rate": 0.954,  # v2, fresh store, root seed 0: 48 points, 45.8 CPU-s
        "highdim.width": 0.7349,
        "models.minilm-diversity": 10.95,
        "models.principal-angles": 4.021,
        "models.training-diversity": 4.735,
    },
    "full": {
        "ensemble.budget-law": 6.002,
        "ensemble.decomposition": 0.2567,
        "ensemble.decorrelation-optimal": 4.52,
        "ensemble.hdi-monotone": 0.1745,
        "ensemble.heads-linear-in-budget": 1.035,
        "ensemble.literal-hdi": 0.04,
        "ensemble.many-small-heads": 4.103,
        "ensemble.nw-identity": 0.03,
        "ensemble.single-head-smoother": 0.1468,
        "ensemble.training-orthogonalises": 0.7767,
        "ensemble.variance-needs-decorrelation": 3.344,
        "ensemble.weighting": 11.15,
        "flow.approx-orthogonal": 1.31,
        "flow.beta-star": 0.07,
        "flow.beta-star-onset": 6.265,
        "flow.cluster-times": 3.035,
        "flow.energy-monotone": 0.675,
        "flow.energy-monotone-softmax": 11.74,
        "flow.entropy": 1.29,
        "flow.entropy-equiangular": 0.965,
        "flow.equiangular-rates": 0.165,
        "flow.late-constant": 0.46,
        "flow.radial-shadow": 2.435,
        "flow.relu-late": 0.09,
        "flow.relu-vs-softmax": 0.095,
        "flow.superadditivity-mean": 0.655,
        "highdim.emergence": 1.662,  # d = 200, 72 seeds, root seed 0: 3024 points, 5,025 CPU-s
        "highdim.bias-rate": 8.12,  # v2, its whole full profile, root seed 0: 36 points, 292 CPU-s
        "highdim.error-coefficients": 4.76,  # v2, its whole full profile, root seed 0: 96 points, 465 CPU-s
        "highdim.error-decomposition": 2.337,  # 8 seeds, root seeds 0-2: 168 points, 392.6 CPU-s
        "highdim.factorised-beats-frobenius": 7,
        "highdim.interpolation-threshold": 0.695,
        "highdim.nuclear-norm": 2.256,  # v4 (eight initialisations), root seeds 0-2: 432 points, 974.8 CPU-s
        "highdim.outliers-generalisation": 1.052,  # its whole full profile: 144 points, 151.5 CPU-s
        "highdim.perfect-recovery": 0.65,
        "highdim.scaling-law": 11.95,  # v10: 4,504 CPU-s over 348 points, plus 15 at d = 400 (1 CPU-s each)
        "highdim.seq2seq": 0.565,
        "highdim.spectrum": 10.04,  # five seeds, root seeds 0-2: 156 points, 1,566 CPU-s
        "highdim.temperature": 8.52,
        "highdim.theory-vs-adam": 0.88,
        "highdim.tokens": 0.305,  # 15 seeds, root seeds 0-2: 384 points, 117.2 CPU-s
        "highdim.training-loss": 4.77,
        "highdim.variance-rate": 2.15,  # v2, its whole full profile, root seed 0: 144 points, 309 CPU-s
        "highdim.width": 1.085,
        "models.minilm-diversity": 11.6,
        "models.principal-angles": 5.65,
    },
}

#: CPU s per unit of ``engine.costs.SIZE_MODELS`` size, fitted on the full sample (modelled claims)
PER_SIZE: dict[str, dict[str, float]] = {
    "full": {
        "ensemble.budget-law": 2.087e-09,
        "ensemble.decomposition": 1.87e-09,
        "ensemble.hdi-monotone": 1.546e-09,
        "ensemble.heads-linear-in-budget": 1.912e-09,
        "ensemble.many-small-heads": 3.166e-09,
        "ensemble.single-head-smoother": 2.214e-09,
        "ensemble.variance-needs-decorrelation": 1.346e-09,
        "ensemble.weighting": 1.433e-09,
    },
}
