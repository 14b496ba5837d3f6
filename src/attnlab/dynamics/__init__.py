"""Paper B: multi-head self-attention dynamics on the sphere (docs/flow.md B).

Example
-------
>>> import attnlab as al
>>> spec = al.dynamics.Heads.scalar([1.0, 0.5], d=8, kind="softmax")
>>> x0 = al.dynamics.init.uniform(batch=4, n=16, d=8, seed=0)
>>> sol = al.dynamics.simulate(spec, x0, beta=1.0, t1=1.0, dt=0.1,
...                            record=al.dynamics.Record(every=0.5, observables=("energy", "clusters")))
>>> sol.observables["log_energy"].shape
torch.Size([3, 4, 2])
"""

from __future__ import annotations

from attnlab.dynamics import init, observables, theory
from attnlab.dynamics.checks import energy_identity, energy_monotone, entropy_identity, trajectory_states
from attnlab.dynamics.field import head_outputs, projections, vector_field, velocity
from attnlab.dynamics.integrate import (
    METHODS,
    OBSERVABLES,
    Record,
    Solution,
    dopri_step,
    euler_step,
    rk4_step,
    simulate,
)
from attnlab.dynamics.model import Heads
from attnlab.dynamics.observables import (
    RADIAL_RTOL,
    EnergyRates,
    PerturbationSplit,
    RadialDominance,
    cluster_fraction,
    energy,
    energy_rates,
    entropy,
    entropy_rate,
    log_energy,
    mean_gamma,
    n_clusters,
    perturbation_split,
    radial_dominance,
    radial_shadows,
)
from attnlab.dynamics.rates import (
    SuperadditivitySample,
    crossing_time,
    gamma_rate,
    late_rate_fit,
    local_superadditivity,
    superadditivity_sample,
    wilson_interval,
)
from attnlab.dynamics.robustness import CriticalDeltas, critical_deltas
from attnlab.dynamics.shadows import (
    RadialInvariance,
    RadialScan,
    ShadowCounts,
    radial_invariance,
    radial_scan,
    shadow_counts,
)
from attnlab.dynamics.space import Flat, Space, Sphere, get_space
from attnlab.dynamics.theory import BetaStar, beta_star, c_star

__all__ = [
    "METHODS",
    "RADIAL_RTOL",
    "CriticalDeltas",
    "RadialInvariance",
    "RadialScan",
    "ShadowCounts",
    "radial_invariance",
    "radial_scan",
    "critical_deltas",
    "SuperadditivitySample",
    "crossing_time",
    "gamma_rate",
    "energy_identity",
    "energy_monotone",
    "entropy_identity",
    "late_rate_fit",
    "local_superadditivity",
    "shadow_counts",
    "superadditivity_sample",
    "trajectory_states",
    "OBSERVABLES",
    "BetaStar",
    "EnergyRates",
    "Flat",
    "Heads",
    "PerturbationSplit",
    "RadialDominance",
    "Record",
    "Solution",
    "Space",
    "Sphere",
    "beta_star",
    "c_star",
    "cluster_fraction",
    "dopri_step",
    "energy",
    "energy_rates",
    "entropy",
    "entropy_rate",
    "euler_step",
    "get_space",
    "head_outputs",
    "init",
    "log_energy",
    "mean_gamma",
    "n_clusters",
    "observables",
    "projections",
    "perturbation_split",
    "radial_dominance",
    "radial_shadows",
    "rk4_step",
    "simulate",
    "theory",
    "vector_field",
    "velocity",
    "wilson_interval",
]
