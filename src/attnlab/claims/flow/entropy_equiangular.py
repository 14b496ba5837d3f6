"""``flow.entropy-equiangular`` (Thm 27 in its setting): entropy rises to log n near equiangular.

Thm 27 proves that for one scalar softmax head started equiangular the covariance in
``dH_i/dt = −β² Cov_{p_i}(s, ṡ)`` is ≤ 0, so attention entropy rises, and it settles at log n. Exactly
equiangular starts are one state up to rotation (the equiangular ODE); the evidence is taken on starts
no symmetry reduces: an equiangular configuration in R^n jittered by a Gaussian of spread ``jitter`` and
renormalised (:func:`attnlab.dynamics.init.jittered`), whose size the theorem leaves open (a knob).
Per trajectory, *rises to log n*: the mean entropy never falls by more than ``drop_tol·log n`` below its
running maximum and ends within ``gap_tol·log n`` of log n by ``t1`` (``flow.entropy``'s run and rule).

Negative control: two tight antipodal clusters (metastable: attention stays within a cluster, entropy
near log(n/2)), decided by the same branch.

Verdict rule (one branch, "rises to log n"): holds when at least ``1 − max_fall_fraction`` (95%) of the
trajectories rise to log n, fails otherwise.
"""

from __future__ import annotations

from attnlab.claims.flow.entropy import Params, run, verdict
from attnlab.engine.protocol import Claim, Control, Grid, Knob

__all__ = ["CLAIM"]

_TRAJ = {"part": "trajectories", "start": "equiangular", "n": 16, "d": 16, "t1": 30.0, "dt": 0.1, "batch": 16}
_EXPLAIN = (
    "{rise_fraction:.3f} of {trajectories} trajectories from jittered equiangular starts rise to log n "
    "(need ≥ 1 − {max_fall_fraction:g}); falls by more than 0.1% of log n in {fall_fraction:.3f} "
    "({any_fall_fraction:.3f} fall at all; largest {max_drop_over_log_n:.2e}·log n); final entropy ≥ "
    "{final_min_over_log_n:.3f}·log n; by setting {rise_fraction_by_setting}."
)
CLAIM = Claim(
    id="flow.entropy-equiangular",
    kind="theorem",
    grade="evidence",
    paper="B",
    statement="Thm 27, scalar equiangular case: attention entropy of one scalar softmax head rises and "
    "settles at log n (tested from jittered equiangular starts).",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"beta": [1.0, 4.0]}, fixed=_TRAJ | {"jitter": 0.05}),
        "full": Grid(
            {"beta": [1.0, 4.0, 9.0], "n": [16, 32, 64]}, fixed=_TRAJ | {"jitter": 0.05, "batch": 128}
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "two-clusters": Control(
            "fails",
            {"start": "clusters", "d": 3},
            "two tight antipodal clusters are metastable: attention stays within a cluster, entropy near "
            "log(n/2), far from log n within the window",
        ),
    },
    knobs={
        "jitter": Knob(
            {"quick": [0.01, 0.05, 0.2], "full": [0.01, 0.05, 0.1, 0.2, 0.5]},
            "the theorem is proved at exactly equiangular starts; how near is near is left open",
        )
    },
    regime="one scalar softmax head, jittered equiangular starts (d = n), within the window t1",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
