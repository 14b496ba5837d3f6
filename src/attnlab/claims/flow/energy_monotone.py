"""``flow.energy-monotone`` (Thm 11): the total energy is a Lyapunov function of the usa flow.

Statement: with symmetric ``M_h`` and ``V_h = M_h`` (usa kind, the gradient-flow form),
``dE_multi/dt = (1/n) Σ_i ‖ẋ_i‖² ≥ 0`` on the sphere and in flat space (velocity scale 1, heads summed;
with heads averaged the factor is H/n). The identity is checked at states along RK4 trajectories
with the forward-mode derivative of ``E_multi`` at the state (:func:`attnlab.dynamics.energy_identity`).
It is a statement about the usa kind: for softmax attention with H ≥ 2 heads (real transformers)
monotonicity fails (``flow.energy-monotone-softmax``; about 40% of trajectories at β = 4, H = 2–4),
while H = 1 is exact (a positive rescaling of the gradient).

Verdict rule (one branch, "identity error"): holds when the identity's largest relative error over all
checked states is below 1e-8 (float64), fails otherwise. Negative control through that branch: values
``V_h ≠ M_h`` (size 0.1), where the velocity is no longer n·∇E and the identity is false.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, energy_identity, init, trajectory_states
from attnlab.engine.params import Cost, In
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    space: Literal["sphere", "flat"] = "sphere"  # tokens on the sphere or in R^d
    heads: int = 3  # number of heads H
    n: int = 16  # tokens
    d: int = 6  # token dimension
    beta: float = 1.0  # inverse temperature
    t1: float = 2.0  # trajectory length (model time)
    states: int = 6  # recorded states per trajectory (the identity is checked there)
    batch: int = 8  # token configurations
    combine: Literal["sum", "mean"] = "sum"  # heads summed or averaged
    dt: float = 0.05  # RK4 step
    value_size: float = 0.0  # ||V_h − M_h||_op/||M_h||_op (0: the theorem's V_h = M_h)

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "heads": In("[1, inf)", cap=256),
        "n": In("[2, inf)", cap=100_000),
        "d": In("[1, inf)", cap=100_000),
        "beta": In("(0, inf)"),
        "t1": In("(0, inf)", cap=1_000),
        "states": In("[1, inf)", cap=100_000),
        "batch": In("[1, inf)", cap=100_000),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
        "value_size": In("[0, inf)"),
    }
    COSTS = (Cost("batch * heads * n * n * d * t1 / dt", 1e12, "scores computed"),)


def run(point: Point) -> Result:
    p: Params = point.p
    spec = Heads.random_symmetric(p.heads, p.d, generator=point.generator(), kind="usa", combine=p.combine)
    if p.value_size > 0:
        spec = spec.perturb_values(p.value_size, generator=point.generator(2))
    spec = spec.to(point.device)
    x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=point.generator(1), device=point.device)
    times, X = trajectory_states(spec, x0, p.beta, p.t1, p.states, p.space, p.dt)
    checks = [energy_identity(spec, x, p.beta, p.space) for x in X]
    errs = [float(err.max()) for err, _ in checks]
    return Result(
        metrics={
            "max_rel_err": max(errs),
            "min_rate": min(float(rate.min()) for _, rate in checks),
            "states": len(X) * p.batch,
            "device": device_name(point.device),
        },
        arrays={"t": times, "rel_err": np.array(errs)},
    )


TOLERANCE = "relative 1e-8 (float64)"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, TOLERANCE, "no rows." + note)
    err = max(r.metrics["max_rel_err"] for r in good)
    nums = {
        "max_rel_err_identity": err,
        "states_checked": sum(r.metrics["states"] for r in good),
        "min_rate": min(r.metrics["min_rate"] for r in good),
        "by_setting": {
            f"{r.params['space']},beta={r.params['beta']:g},{r.params.get('combine', 'sum')}": r.metrics[
                "max_rel_err"
            ]
            for r in good
        },
    }
    return Verdict("holds" if err < 1e-8 else "fails", nums, TOLERANCE, note.strip(), branch="identity error")


_IDENT = {"heads": 3, "n": 16, "d": 6, "beta": 1.0, "states": 6, "batch": 8}
_IDENT_F = {"heads": 4, "n": 32, "d": 8, "batch": 32}
CLAIM = Claim(
    id="flow.energy-monotone",
    kind="theorem",
    grade="evidence",
    paper="B",
    statement="With symmetric M_h and V_h = M_h (usa kind), dE_multi/dt = (1/n) sum_i ||x_i'||^2 >= 0 on the "
    "sphere and in flat space (Thm 11). Not for softmax attention with H >= 2 heads (see "
    "flow.energy-monotone-softmax).",
    version=3,
    params=Params,
    grids={
        "quick": Grid(
            {"space": ["sphere"]},
            fixed=_IDENT | {"t1": 2.0},
            # flat usa dynamics blow up in finite time (scores grow with the norms): a short window
            extra=[Grid({"space": ["flat"]}, fixed=_IDENT | {"t1": 0.5})],
        ),
        "full": Grid(
            {"space": ["sphere"], "beta": [0.5, 1.0, 4.0], "combine": ["sum", "mean"]},
            fixed=_IDENT_F | {"t1": 4.0, "states": 11},
            seeds=2,
            extra=[
                Grid(
                    {"space": ["flat"], "beta": [0.5, 1.0], "combine": ["sum", "mean"]},
                    fixed=_IDENT_F | {"t1": 0.25, "states": 6},
                    seeds=2,
                )
            ],
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "values-not-aligned": Control(
            "fails",
            {"value_size": 0.1},
            "with V_h ≠ M_h the velocity is not n·∇E_multi, so dE/dt ≠ (1/n)Σ‖ẋ_i‖²: the identity must fail",
        )
    },
    regime="usa kind, symmetric M_h, V_h = M_h; finite-time window in flat space (the flow blows up)",
    explain={
        "holds": "dE_multi/dt = (1/n) Σ‖ẋ_i‖² at {states_checked} states along RK4 trajectories (sphere and "
        "flat; forward-mode derivative at the state): max relative error {max_rel_err_identity:.1e}, "
        "smallest rate {min_rate:.3g} ≥ 0. This is the usa kind: softmax attention with H ≥ 2 heads, "
        "as in real transformers, does not keep the energy monotone (flow.energy-monotone-softmax); "
        "H = 1 does.",
        "fails": "the identity misses by {max_rel_err_identity:.1e} (relative) at some state ({by_setting}).",
    },
)
