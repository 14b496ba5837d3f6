"""``flow.entropy`` (Thm 27): attention-entropy production.

Statement: ``dH_i/dt = −β² Cov_{p_i}(s, ṡ)``; in the scalar equiangular case entropy rises to log n.
The identity is checked at states along trajectories against the forward-mode derivative
(:func:`attnlab.dynamics.entropy_identity`).

Verdict rule: holds when the identity's error is below 1e-8, the equiangular entropy rate never
falls below −1e-12 and the final gap to log n is below 1e-3; fails otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import (
    Heads,
    Record,
    entropy,
    entropy_identity,
    entropy_rate,
    init,
    simulate,
    trajectory_states,
    velocity,
)
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    part: Literal["identity", "equiangular"] = "identity"  # the identity, or entropy along a trajectory
    beta: float = 1.0  # inverse temperature
    heads: int = 2  # random symmetric softmax heads (identity)
    n: int = 12  # tokens
    d: int = 4  # dimension (identity; the equiangular start uses d = n)
    t1: float = 3.0  # trajectory length
    states: int = 5  # recorded states (identity)
    batch: int = 8  # configurations (identity)
    dt: float = 0.05  # RK4 step (identity)
    strength: float = 1.0  # scalar head strength (equiangular)
    gamma0: float = 0.0  # initial inner product (equiangular)
    dt_trajectory: float = 0.02  # RK4 step (equiangular)
    records: int = 100  # recorded intervals (equiangular)


def run(point: Point) -> Result:
    p: Params = point.p
    if p.part == "identity":
        spec = Heads.random_symmetric(p.heads, p.d, generator=point.generator(), kind="softmax")
        spec = spec.to(point.device)
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(1), device=point.device)
        _, X = trajectory_states(spec, x0, p.beta, p.t1, p.states, "sphere", p.dt)
        errs = [float(entropy_identity(spec, x, p.beta).max()) for x in X]
        return Result(
            metrics={
                "max_rel_err": max(errs),
                "states": len(X) * p.batch,
                "device": device_name(point.device),
            },
            arrays={"rel_err": np.array(errs)},
        )
    n = p.n
    spec = Heads.scalar([p.strength], d=n, kind="softmax", device=point.device)
    x0 = init.equiangular(batch=1, n=n, d=n, gamma=p.gamma0, generator=point.generator(), device=point.device)
    rec = Record(every=p.t1 / p.records, observables=(), trajectory=True)
    sol = simulate(spec, x0, beta=p.beta, t1=p.t1, dt=p.dt_trajectory, record=rec)
    Hs, rates = [], []
    for x in sol.trajectory:
        Hs.append(float(entropy(spec, x, p.beta).mean()))
        rates.append(float(entropy_rate(spec, x, p.beta, velocity(spec, x, p.beta)).min()))
    Hs = np.array(Hs)
    return Result(
        metrics={
            "min_rate": min(rates),
            "final_entropy": float(Hs[-1]),
            "log_n": math.log(n),
            "gap_final": math.log(n) - float(Hs[-1]),
            "max_drop": float(np.max(Hs[:-1] - Hs[1:])),
            "device": device_name(point.device),
        },
        arrays={"t": sol.t.numpy(), "entropy": Hs},
    )


TOLERANCE = "identity 1e-8 relative; rate >= -1e-12; gap 1e-3"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    ident = [r for r in good if r.params.get("part", "identity") == "identity"]
    eq = [r for r in good if r.params.get("part") == "equiangular"]
    if not ident or not eq:
        return Verdict("inconclusive", {}, TOLERANCE, "need both parts." + note)
    nums = {
        "identity_max_rel_err": max(r.metrics["max_rel_err"] for r in ident),
        "states": sum(r.metrics["states"] for r in ident),
        "equiangular_min_entropy_rate": min(r.metrics["min_rate"] for r in eq),
        "max_gap_to_log_n_at_end": max(r.metrics["gap_final"] for r in eq),
    }
    ok = (
        nums["identity_max_rel_err"] < 1e-8
        and nums["equiangular_min_entropy_rate"] > -1e-12
        and nums["max_gap_to_log_n_at_end"] < 1e-3
    )
    return Verdict("holds" if ok else "fails", nums, TOLERANCE, note.strip())


CLAIM = Claim(
    id="flow.entropy",
    kind="theorem",
    paper="B",
    statement="dH_i/dt = -β² Cov_{p_i}(s, ṡ); in the scalar equiangular case entropy rises to log n "
    "(Thm 27).",
    version=1,
    params=Params,
    grids={
        "quick": Grid(
            {"beta": [1.0, 4.0]},
            fixed={"part": "identity", "heads": 2, "n": 12, "d": 4, "t1": 3.0, "states": 5, "batch": 8},
            extra=[
                Grid(
                    {"n": [8, 32]},
                    fixed={"part": "equiangular", "beta": 2.0, "strength": 1.0, "gamma0": 0.0, "t1": 12.0},
                )
            ],
        ),
        "full": Grid(
            {"beta": [0.5, 1.0, 4.0, 9.0], "heads": [1, 2, 4]},
            fixed={"part": "identity", "n": 32, "d": 8, "t1": 6.0, "states": 13, "batch": 32},
            extra=[
                Grid(
                    {"n": [8, 32, 128], "beta": [1.0, 4.0]},
                    fixed={"part": "equiangular", "strength": 1.0, "gamma0": 0.0, "t1": 20.0},
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    explain={
        "holds": "identity error {identity_max_rel_err:.1e} at {states} states; smallest "
        "equiangular entropy rate {equiangular_min_entropy_rate:.2e}; "
        "final gap to log n {max_gap_to_log_n_at_end:.1e}.",
        "fails": "identity error {identity_max_rel_err:.1e}; smallest entropy rate "
        "{equiangular_min_entropy_rate:.2e}; final gap to log n {max_gap_to_log_n_at_end:.1e}.",
    },
)
